"""Projection of synthetic streams, compared with the synthetic profiler's ground truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from projection_corpus import CORPUS_CONFIG, CasLookup, Corpus, streams

from activities.projection.assemble import abandoned_execution, assemble_execution
from activities.projection.model import ExecutionProjection
from formats import catalog
from formats.ids import CallRef
from formats.synth import synthesize

ROLE = {"input": "args", "output": "output", "error": "error"}
SPAN_STATUS = {"ok": "succeeded", "errored": "failed", "cancelled": "cancelled"}


def _projected(corpus: Corpus) -> list[ExecutionProjection]:
    lookup = CasLookup(corpus.root)
    out = []
    for stream in corpus.streams:
        for inp in stream.ended_inputs():
            result = assemble_execution(inp, lookup)
            assert isinstance(result, ExecutionProjection), result
            out.append(result)
    return out


@pytest.fixture(scope="module")
def projected(corpus: Corpus) -> list[ExecutionProjection]:
    return _projected(corpus)


def _expected_state(span: Any, role: str) -> tuple[str, str | None]:
    for v in span.values:
        if ROLE[v.role] == role:
            cid = v.cid.removeprefix("bamlv_1_") if v.cid else None
            return v.state, cid
    return catalog.NOT_APPLICABLE, None


def test_every_finished_execution_is_projected_once(
    corpus: Corpus, projected: list[ExecutionProjection]
) -> None:
    finished = {e.execution_id for e in corpus.truth.executions if e.status != "abandoned"}
    assert sorted(p.execution_id for p in projected) == sorted(finished)


def test_root_thread_row_carries_the_execution_state(
    corpus: Corpus, projected: list[ExecutionProjection]
) -> None:
    truth = corpus.truth.by_id()
    for p in projected:
        t = truth[p.execution_id]
        roots = [r for r in p.public["threads_v1"] if r["is_root"]]
        assert len(roots) == 1
        root = roots[0]
        assert (root["status"], root["index_state"]) == (t.status, t.index_state)
        assert root["started_at_ns"] == t.started_unix_ns
        assert root["ended_at_ns"] == t.ended_unix_ns
        assert root["duration_ns"] == t.ended_unix_ns - t.started_unix_ns
        assert root["process_euid"] == t.stream
        assert root["runtime_id"].startswith("baml_id_1_")


def test_every_span_is_one_call_row_matching_the_truth(
    corpus: Corpus, projected: list[ExecutionProjection]
) -> None:
    truth = corpus.truth.by_id()
    zero = corpus.truth.executions[0].started_unix_ns - corpus.truth.executions[0].spans[0].started_ns
    for p in projected:
        t = truth[p.execution_id]
        rows = {CallRef.decode_string(r["call_id"]).call_id: r for r in p.public["calls_v1"]}
        assert sorted(rows) == sorted(s.call_id for s in t.spans)
        names = {s.call_id: s.function for s in t.spans}
        for span in t.spans:
            row = rows[span.call_id]
            assert row["execution_id"] == p.execution_id
            parent = CallRef.decode_string(row["parent_call_id"]).call_id if row["parent_call_id"] else None
            assert parent == span.parent_call_id
            assert row["function_name"] == span.function
            assert row["parent_function_name"] == (
                names[span.parent_call_id] if span.parent_call_id else None
            )
            assert row["status"] == SPAN_STATUS[span.status]
            assert row["started_at_ns"] == zero + span.started_ns
            assert row["ended_at_ns"] == zero + span.ended_ns
            assert row["duration_ns"] == span.ended_ns - span.started_ns
            for role in ("args", "output", "error"):
                state, cid = _expected_state(span, role)
                assert (row[f"{role}_state"], row[f"{role}_cid"]) == (state, cid), (span.function, role)


def test_lost_values_and_failures_are_present_in_the_corpus(projected: list[ExecutionProjection]) -> None:
    # Guards the comparison above against a corpus too small to exercise them.
    states = {
        r[f"{role}_state"] for p in projected for r in p.public["calls_v1"] for role in ("args", "output")
    }
    assert "lost:value_too_large" in states
    assert {p.status for p in projected} >= {"succeeded", "failed"}
    assert any(r["error_state"] == "available" for p in projected for r in p.public["calls_v1"])


def test_value_state_follows_lost_values(projected: list[ExecutionProjection]) -> None:
    for p in projected:
        states = [r[f"{role}_state"] for r in p.public["calls_v1"] for role in ("args", "output", "error")]
        lost = sum(s.startswith("lost:") for s in states)
        available = states.count("available")
        expected = "complete" if lost == 0 else ("none" if available == 0 else "partial")
        assert p.value_state == expected


def test_cct_call_counts_cover_every_call(tmp_path: Path) -> None:
    """Every call (selected or not) counts once in call_path_stats_v1, merged across segments."""
    config = CORPUS_CONFIG.replace(executions=40, unfinished_per_process=0, p_long=0.5)
    truth = synthesize(tmp_path, config)
    projected = _projected(Corpus(tmp_path, truth, streams(tmp_path)))
    total = sum(r["call_count"] for p in projected for r in p.public["call_path_stats_v1"])
    assert total == truth.calls
    for p in projected:
        keys = [r["call_path_id"] for r in p.public["call_path_stats_v1"]]
        assert len(keys) == len(set(keys))  # one row per path: deltas merged


def test_multi_segment_executions_merge(corpus: Corpus, projected: list[ExecutionProjection]) -> None:
    truth = corpus.truth.by_id()
    multi = [
        p for p in projected if truth[p.execution_id].data_first_seq != truth[p.execution_id].data_last_seq
    ]
    assert multi, "corpus has no execution spanning several data segments"
    for p in multi:
        assert p.index_state == "complete"
        for row in p.public["calls_v1"]:
            assert row["ended_at_ns"] is not None  # started in one segment, ended in a later one
        # Span durations are exact min/max on paths where every call has a span.
        calls_by_path: dict[str, list[int]] = {}
        for row in p.public["calls_v1"]:
            calls_by_path.setdefault(row["call_path_id"], []).append(row["duration_ns"])
        for stat in p.public["call_path_stats_v1"]:
            durations = calls_by_path.get(stat["call_path_id"])
            if durations and len(durations) == stat["call_count"]:
                assert (stat["min_duration_ns"], stat["max_duration_ns"]) == (min(durations), max(durations))
                assert stat["total_duration_ns"] == sum(durations)


def test_health_and_function_definitions(corpus: Corpus, projected: list[ExecutionProjection]) -> None:
    for p in projected:
        (health,) = p.public["health_v1"]
        assert set(catalog.HEALTH_COUNTERS) <= set(health)
        defs = p.public["function_definitions_v1"]
        assert {d["function_name"] for d in defs} >= {r["function_name"] for r in p.public["calls_v1"]}
        failed_links = sum(r["error_state"] != "not_applicable" for r in p.public["calls_v1"])
        assert health["terminal_error_links_committed"] == failed_links


def test_abandoned_executions_match_the_truth(corpus: Corpus) -> None:
    truth = corpus.truth.by_id()
    lookup = CasLookup(corpus.root)
    inputs = [i for s in corpus.streams for i in s.abandoned_inputs()]
    assert len(inputs) == 4
    for inp in inputs:
        p = abandoned_execution(inp, lookup)
        t = truth[p.execution_id]
        assert (p.status, p.index_state) == ("abandoned", "no_root_ended") == (t.status, t.index_state)
        (root,) = [r for r in p.public["threads_v1"] if r["is_root"]]
        assert root["ended_at_ns"] is None and root["started_at_ns"] == t.started_unix_ns
        assert "health_v1" not in p.public
        rows = {CallRef.decode_string(r["call_id"]).call_id: r for r in p.public["calls_v1"]}
        assert sorted(rows) == sorted(s.call_id for s in t.spans)
        for span in t.spans:
            row = rows[span.call_id]
            if span.ended_ns is None:
                assert (row["status"], row["ended_at_ns"], row["output_state"]) == (
                    "abandoned",
                    None,
                    "not_applicable",
                )
            else:
                assert row["status"] == SPAN_STATUS[span.status]
