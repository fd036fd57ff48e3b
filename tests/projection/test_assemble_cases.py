"""Edge cases of one execution, built by hand: states, merges, pending, corruption, lost RootStarted."""

from __future__ import annotations

import dataclasses

import pytest
from projection_builders import (
    ARGS,
    CHILD_OUTPUT,
    ERROR,
    K_CHILD,
    K_HELPER,
    K_ROOT,
    OUTPUT,
    ROOT,
    ZERO,
    Case,
    Lookup,
    call,
    cid_of,
    execution_input,
    meta_segments,
)

from activities.projection.assemble import abandoned_execution, assemble_execution
from activities.projection.model import (
    ENGINE_NOT_REGISTERED,
    DataRead,
    ExecutionProjection,
    PendingExecution,
    ResolvedValue,
)
from formats import evidence as ev
from formats.data_segment import DataGroup
from formats.errors import IdentityMismatchError
from formats.ids import CallRef, EdgeKind, ThreadRef
from formats.meta_segment import EngineStarted


def project(case: Case | None = None, **kw: object) -> ExecutionProjection:
    result = assemble_execution(execution_input(case, **kw), Lookup())  # type: ignore[arg-type]
    assert isinstance(result, ExecutionProjection)
    return result


def calls(p: ExecutionProjection) -> dict[int, dict[str, object]]:
    out = {}
    for row in p.public["calls_v1"]:
        for n in (1, 2):
            if row["call_id"] == call(n).encode_string():
                out[n] = row
    assert len(out) == len(p.public["calls_v1"])
    return out


def test_spans_complete_across_two_segments() -> None:
    p = project()
    assert (p.status, p.index_state, p.value_state) == ("succeeded", "complete", "complete")
    root, child = calls(p)[1], calls(p)[2]
    assert root["execution_id"] == ROOT.execution_id == p.execution_id
    assert (root["started_at_ns"], root["ended_at_ns"], root["duration_ns"]) == (
        ZERO + 1_000,
        ZERO + 9_000,
        8_000,
    )
    assert (child["function_name"], child["parent_function_name"]) == ("app.llm.Extract", "app.Main")
    assert child["parent_call_id"] == root["call_id"]
    assert child["is_llm"] is True and root["is_llm"] is False
    assert child["call_path_id"] == K_CHILD.hex()
    assert (child["args_state"], child["output_state"], child["error_state"]) == (
        "available",
        "available",
        "not_applicable",
    )
    assert child["output_cid"] == cid_of(CHILD_OUTPUT).hex()
    assert root["args_cid"] == cid_of(ARGS).hex() and root["output_cid"] == cid_of(OUTPUT).hex()


def test_cct_deltas_are_summed_per_path() -> None:
    stats = {r["call_path_id"]: r for r in project().public["call_path_stats_v1"]}
    assert set(stats) == {K_ROOT.hex(), K_CHILD.hex(), K_HELPER.hex()}
    helper = stats[K_HELPER.hex()]
    # Started in segment 1 (with the tuple), completed in segment 2 (without it).
    assert (helper["call_count"], helper["total_duration_ns"], helper["function_name"]) == (
        2,
        700,
        "app.Helper",
    )
    assert (helper["min_duration_ns"], helper["max_duration_ns"]) == (0, 700)  # no spans: bounds only
    assert helper["parent_call_path_id"] == K_CHILD.hex()
    child = stats[K_CHILD.hex()]
    assert (child["min_duration_ns"], child["max_duration_ns"]) == (3_000, 3_000)
    assert stats[K_ROOT.hex()]["edge_kind"] == "root"


def test_lost_value_keeps_its_reason() -> None:
    lost = ev.ValueLost(ev.ValueLossReason.VALUE_TOO_LARGE)
    p = project(Case(child_output=lost))
    child = calls(p)[2]
    assert (child["output_state"], child["output_cid"]) == ("lost:value_too_large", None)
    assert p.value_state == "partial"
    (root_thread,) = p.public["threads_v1"]
    assert root_thread["value_state"] == "partial"


def test_missing_occurrence_and_uncaptured_roles() -> None:
    p = project(Case(child_output=None))
    assert calls(p)[2]["output_state"] == "lost:not_recorded"
    p = project(Case(child_roles=ev.ROLE_INPUT, child_output=None))
    assert calls(p)[2]["output_state"] == "not_captured"
    assert calls(p)[2]["error_state"] == "not_captured"


def test_failed_execution_links_the_captured_error() -> None:
    p = project(Case(child_fails=True))
    assert p.status == "failed"
    root, child = calls(p)[1], calls(p)[2]
    for row in (root, child):
        assert (row["status"], row["output_state"], row["error_state"]) == (
            "failed",
            "not_applicable",
            "available",
        )
        assert row["error_cid"] == cid_of(ERROR).hex()
    (err,) = p.public["errors_v1"]
    assert (err["call_id"], err["function_name"], err["is_terminal"]) == (
        child["call_id"],
        "app.llm.Extract",
        True,
    )
    assert err["occurred_at_ns"] == ZERO + 5_000
    (private,) = p.private["errors_v1"]
    assert private["row_id"] == err["row_id"]
    assert private["error"] == '{"message":"private failure detail"}'
    assert private["source_span"] == "baml_src/secret/main.baml:3:40-60"


def test_missing_value_makes_the_execution_pending() -> None:
    hidden = {cid_of(CHILD_OUTPUT), cid_of(OUTPUT)}
    result = assemble_execution(execution_input(), Lookup(hidden))
    assert isinstance(result, PendingExecution)
    assert result.execution_id == ROOT.execution_id
    assert result.missing_cids == tuple(sorted(c.hex() for c in hidden))


def test_sweep_reports_missing_values_lost_instead_of_pending() -> None:
    inp = dataclasses.replace(execution_input(), root_ended=None)
    p = abandoned_execution(inp, Lookup({cid_of(OUTPUT)}))
    assert (p.status, p.index_state) == ("abandoned", "no_root_ended")
    assert calls(p)[1]["output_state"] == "lost:not_ingested"


def test_abandoned_execution_with_only_its_start() -> None:
    inp = execution_input()
    inp = dataclasses.replace(inp, root_ended=None, data=(DataRead(1, inp.data[0].group),))
    p = abandoned_execution(inp, Lookup())
    rows = calls(p)
    assert rows[1]["status"] == rows[2]["status"] == "abandoned"
    assert rows[1]["ended_at_ns"] is None and rows[1]["output_state"] == "not_applicable"
    (thread,) = p.public["threads_v1"]
    assert (thread["status"], thread["index_state"], thread["ended_at_ns"]) == (
        "abandoned",
        "no_root_ended",
        None,
    )
    assert thread["started_at_ns"] == ZERO + 900  # RootStarted, not the ThreadStart
    assert "health_v1" not in p.public


@pytest.mark.parametrize("problem", ["missing", "corrupt", "absent"])
def test_gap_in_the_data_range_is_index_corrupt(problem: str) -> None:
    inp = execution_input()
    first = inp.data[0]
    reads = (first,) if problem == "absent" else (first, DataRead(2, None, problem))
    p = assemble_execution(dataclasses.replace(inp, data=reads), Lookup())
    assert isinstance(p, ExecutionProjection)
    assert p.index_state == "index_corrupt"
    (thread,) = p.public["threads_v1"]
    assert thread["index_state"] == "index_corrupt"
    assert calls(p)[2]["status"] == "abandoned"  # its end was in the lost segment


def test_undecodable_group_payload_is_index_corrupt() -> None:
    inp = execution_input()
    group = inp.data[1].group
    assert group is not None
    broken = dataclasses.replace(group, evidence=group.evidence[:-3])
    p = assemble_execution(dataclasses.replace(inp, data=(inp.data[0], DataRead(2, broken))), Lookup())
    assert isinstance(p, ExecutionProjection) and p.index_state == "index_corrupt"


def test_walk_back_exhaustion_is_index_corrupt() -> None:
    # RootStarted and EngineStarted sit one sequence further back; the registry knows the engine.
    engine = meta_segments(Case())[0].records[1]
    assert isinstance(engine, EngineStarted)
    inp = execution_input(max_walk=1, engine_lookup=lambda _: engine)
    assert inp.context.root_started is None and inp.context.engine_started == engine
    p = assemble_execution(inp, Lookup())
    assert isinstance(p, ExecutionProjection) and p.index_state == "index_corrupt"


def test_engine_not_registered_yet_is_pending_not_corrupt() -> None:
    inp = execution_input(max_walk=1, engine_lookup=lambda _: None)
    p = assemble_execution(inp, Lookup())
    assert isinstance(p, PendingExecution) and p.reason == ENGINE_NOT_REGISTERED


def test_gap_between_root_started_and_root_ended_is_index_corrupt() -> None:
    inp = execution_input()
    assert inp.context.root_started_seq == 1
    ctx = dataclasses.replace(inp.context, gaps=(3,))
    straddled = dataclasses.replace(inp, root_ended_seq=5, context=ctx)
    p = assemble_execution(straddled, Lookup())
    assert isinstance(p, ExecutionProjection) and p.index_state == "index_corrupt"
    assert p.public["calls_v1"]  # partial facts are kept


def test_lost_root_started_flag() -> None:
    inp = execution_input(Case(root_started_lost=True))
    assert inp.context.engine_missing is None and inp.context.root_started is None
    p = assemble_execution(inp, Lookup())
    assert isinstance(p, ExecutionProjection)
    assert p.index_state == "root_started_lost"
    (thread,) = p.public["threads_v1"]
    assert thread["runtime_id"] is None
    assert thread["started_at_ns"] == ZERO + 1_000  # from the root ThreadStart


def test_value_body_must_match_its_cid() -> None:
    lookup = Lookup()
    lookup.values[cid_of(OUTPUT)] = ResolvedValue(b"\x1a\x03abc", 1, "pack")
    with pytest.raises(IdentityMismatchError):
        assemble_execution(execution_input(), lookup)


def test_table_rows_and_references() -> None:
    p = project()
    defs = p.public["function_definitions_v1"]
    assert [d["function_name"] for d in defs] == ["app.Main", "app.llm.Extract", "app.Helper"]
    assert [d["is_llm"] for d in defs] == [False, True, False]
    assert p.private["function_definitions_v1"][0]["source_path"] == "baml_src/secret/main.baml"
    refs = {r["cid"] for r in p.private["cid_refs_v1"]}
    assert len(refs) == 5  # four values and the table
    assert {r["root_id"] for r in p.private["cid_refs_v1"]} == {ROOT.execution_id}
    assert len(p.private["values_v1"]) == 4


def test_input_without_root_ended_is_rejected() -> None:
    with pytest.raises(ValueError, match="RootEnded"):
        assemble_execution(dataclasses.replace(execution_input(), root_ended=None), Lookup())
    with pytest.raises(ValueError, match="without a RootEnded"):
        abandoned_execution(execution_input(), Lookup())


def test_spawned_threads_get_their_own_rows() -> None:
    inp = execution_input()
    child_thread = ThreadRef(ROOT.euid, ROOT.engine_id, ROOT.thread_id + 1)
    spawned = CallRef(child_thread.euid, child_thread.engine_id, child_thread.thread_id, 1)
    ctx = ev.NormalContext(K_CHILD)
    extra: list[ev.EvidenceFact] = [
        ev.ThreadStart(child_thread, ROOT, call(1), None, 3_000, ev.ThreadStartKind.SPAWN, "worker"),
        ev.SpanStart(spawned, call(1), child_thread, ctx, 1, None, EdgeKind.SPAWN, 3_100, 2, ev.ROLE_INPUT),
        ev.ValueOccurrence(
            spawned, ctx, ev.ValueRole.INPUT, ev.ValueLost(ev.ValueLossReason.VALUE_TOO_LARGE)
        ),
        ev.SpanEnd(spawned, 4_000, ev.FunctionEndStatus.CANCELLED, 900),
        ev.ThreadEnd(child_thread, 4_100, ev.ThreadEndStatus.CANCELLED),
    ]
    group = inp.data[1].group
    assert group is not None
    merged = DataGroup.build(ROOT, cct=group.cct_payload(), facts=[*group.evidence_facts(), *extra])
    p = assemble_execution(dataclasses.replace(inp, data=(inp.data[0], DataRead(2, merged))), Lookup())
    assert isinstance(p, ExecutionProjection)
    threads = {r["thread_id"]: r for r in p.public["threads_v1"]}
    assert set(threads) == {str(ROOT.thread_id), str(child_thread.thread_id)}
    worker = threads[str(child_thread.thread_id)]
    assert (worker["is_root"], worker["parent_thread_id"], worker["status"]) == (
        False,
        str(ROOT.thread_id),
        "cancelled",
    )
    assert (worker["started_at_ns"], worker["ended_at_ns"]) == (ZERO + 3_000, ZERO + 4_100)
    assert (worker["value_state"], worker["root_function_name"]) == ("none", "app.llm.Extract")
    assert threads[str(ROOT.thread_id)]["value_state"] == "partial"
    row = next(r for r in p.public["calls_v1"] if r["call_id"] == spawned.encode_string())
    assert (row["thread_id"], row["status"], row["args_state"], row["output_state"]) == (
        str(child_thread.thread_id),
        "cancelled",
        "lost:value_too_large",
        "not_captured",
    )
    assert row["call_id"] != call(1).encode_string()  # same call number, another thread


def test_sweep_marks_a_missing_error_value_lost_in_errors_too() -> None:
    inp = dataclasses.replace(execution_input(Case(child_fails=True)), root_ended=None)
    p = abandoned_execution(inp, Lookup({cid_of(ERROR)}))
    (err,) = p.public["errors_v1"]
    assert (err["error_state"], err["error_cid"]) == ("lost:not_ingested", None)
    assert {r["error_state"] for r in p.public["calls_v1"]} == {"lost:not_ingested"}


def test_spans_whose_start_was_lost_keep_their_rows() -> None:
    # Segment 1 (both SpanStarts) is missing: the ends and outputs in segment 2 still make spans.
    p = assemble_execution(execution_input(drop_data={1}), Lookup())
    assert isinstance(p, ExecutionProjection) and p.index_state == "index_corrupt"
    calls = {r["call_id"]: r for r in p.public["calls_v1"]}
    assert set(calls) == {call(1).encode_string(), call(2).encode_string()}
    root = calls[call(1).encode_string()]
    assert root["function_name"] == "<unknown>" and root["parent_call_id"] is None
    assert root["status"] == "succeeded" and root["ended_at_ns"] == ZERO + 9_000
    assert root["started_at_ns"] == ZERO + 9_000 and root["duration_ns"] is None
    assert root["output_state"] == "available"  # its output occurrence survived
    assert root["args_state"] == "lost:span_start_lost"
    (thread,) = p.public["threads_v1"]
    assert thread["status"] == "succeeded" and thread["index_state"] == "index_corrupt"
