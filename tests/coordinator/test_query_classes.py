"""The 13 query classes through ``POST /v1/query``, each compared with the synthetic profiler's
ground truth (formats/synth truth), never with the system's own output.

Every tenth execution of the corpus has its public facts in Boundary but no private rows in Lance:
private queries must report those rows as ``private_state = pending`` (or count them in the
outcome for a grouping), never drop them or match them silently.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from coordinator_world import Corpus
from fastapi.testclient import TestClient

from api.coordinator import executor
from api.coordinator.query_classes import NS_PER_DAY, NS_PER_HOUR, ClassParams, class_sql
from formats import query_output as qo
from formats.ids import CallRef

SPAN_STATUS = {"ok": "succeeded", "errored": "failed", "cancelled": "cancelled"}
ROLE = {"input": "args", "output": "output", "error": "error"}
ROOT_FN = "invoices.ProcessInvoice"
LLM_FN = "support.llm.ClassifyTicket"


@dataclass
class Call:
    execution_id: str
    call_id: int
    parent: int | None
    function: str
    status: str
    started: int
    duration: int | None
    values: dict[str, Any]  # role -> JSON (available values only)
    states: dict[str, str]
    pending: bool

    def text(self, role: str) -> str | None:
        return (
            json.dumps(self.values[role], ensure_ascii=False, separators=(",", ":"))
            if role in self.values
            else None
        )


@pytest.fixture(autouse=True, params=["id lists", "pruned scans"])
def leaf_reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every class both ways a part's leaves are read: the corpus is small enough that the
    executor would always read them by execution id (``_ID_LIST_MAX``); 0 forces the pruned scan."""
    if request.param == "pruned scans":
        monkeypatch.setattr(executor, "_ID_LIST_MAX", 0)
    return str(request.param)


@pytest.fixture(scope="module")
def calls(corpus: Corpus) -> list[Call]:
    out = []
    for e in corpus.truth.executions:
        if e.status == "abandoned":
            continue
        zero = e.started_unix_ns - e.spans[0].started_ns
        for s in e.spans:
            values = {ROLE[v.role]: v.json for v in s.values if v.state == "available"}
            states = {ROLE[v.role]: v.state for v in s.values}
            out.append(
                Call(
                    e.execution_id,
                    s.call_id,
                    s.parent_call_id,
                    s.function,
                    SPAN_STATUS.get(s.status or "", "abandoned"),
                    zero + s.started_ns,
                    s.ended_ns - s.started_ns if s.ended_ns is not None else None,
                    values,
                    states,
                    e.execution_id in corpus.projected.pending,
                )
            )
    return out


@pytest.fixture(scope="module")
def params(corpus: Corpus, calls: list[Call]) -> ClassParams:
    starts = sorted(c.started for c in calls)
    lo, hi = starts[len(starts) // 10], starts[-1] + 1
    probe = next(
        c
        for c in calls
        if c.function == ROOT_FN
        and not c.pending
        and "args" in c.values
        and "output" in c.values
        and lo <= c.started < hi
    )
    return ClassParams(
        now_ns=starts[-1],
        window_start_ns=lo,
        window_end_ns=hi,
        root_function=ROOT_FN,
        llm_function=LLM_FN,
        execution_id=probe.execution_id,
        call_id=call_id_text(corpus, probe),
        invoice_id=probe.values["args"]["invoice"]["id"],
    )


def call_id_text(corpus: Corpus, call: Call) -> str:
    for p in corpus.projected.projections:
        if p.execution_id == call.execution_id:
            for row in p.public["calls_v1"]:
                if CallRef.decode_string(row["call_id"]).call_id == call.call_id:
                    return str(row["call_id"])
    raise AssertionError("call not projected")


def run(api: TestClient, headers: dict[str, str], sql: str) -> qo.QueryResult:
    resp = api.post("/v1/query", json={"sql": sql}, headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith(qo.NDJSON_MEDIA_TYPE)
    result = qo.read_query_bytes(resp.content)
    assert result.outcome.error is None, result.outcome.error
    assert result.outcome.snapshot.snapshot_id and result.outcome.snapshot.generation == 1
    return result


def key(row: dict[str, Any]) -> tuple[str, int]:
    return row["execution_id"], CallRef.decode_string(row["call_id"]).call_id


def in_window(c: Call, p: ClassParams) -> bool:
    return p.window_start_ns <= c.started < p.window_end_ns


@pytest.fixture(scope="module")
def sqls(params: ClassParams) -> dict[str, str]:
    return class_sql(params)


def test_q1_recent_executions(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                              calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    roots = [c for c in calls if c.parent is None and c.started >= params.now_ns - NS_PER_HOUR]
    roots.sort(key=lambda c: (-c.started, c.execution_id))
    got = run(api, user_headers, sqls["Q1"])
    assert [r["execution_id"] for r in got.rows] == [c.execution_id for c in roots[:100]]
    assert got.outcome.status == "complete" and got.outcome.snapshot.lance_version is None


def test_q2_calls_per_function_per_day(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                                       calls: list[Call]) -> None:  # fmt: skip
    want = Counter((c.function, c.started // NS_PER_DAY) for c in calls)
    got = run(api, user_headers, sqls["Q2"])
    assert {(r["function_name"], r["day"]): r["calls"] for r in got.rows} == dict(want)


def test_q3_duration_quantiles(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                               calls: list[Call]) -> None:  # fmt: skip
    per: dict[str, list[int]] = defaultdict(list)
    for c in calls:
        if c.duration is not None:
            per[c.function].append(c.duration)
    got = {r["function_name"]: r for r in run(api, user_headers, sqls["Q3"]).rows}
    assert set(got) == set(per)
    for fn, durations in per.items():
        durations.sort()
        for level, col in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            # quantileExact: the element at floor(level * n) of the sorted values
            assert got[fn][col] == durations[min(int(level * len(durations)), len(durations) - 1)]


def test_q4_error_rate_per_function_per_hour(api: TestClient, user_headers: dict[str, str],
                                             sqls: dict[str, str], calls: list[Call]) -> None:  # fmt: skip
    total = Counter((c.function, c.started // NS_PER_HOUR) for c in calls)
    failed = Counter((c.function, c.started // NS_PER_HOUR) for c in calls if c.status == "failed")
    got = run(api, user_headers, sqls["Q4"]).rows
    assert {(r["function_name"], r["hour"]): r["calls"] for r in got} == dict(total)
    for r in got:
        k = (r["function_name"], r["hour"])
        assert r["failed"] == failed.get(k, 0)
        assert r["error_rate"] == pytest.approx(failed.get(k, 0) / total[k])


def test_q5_slowest_llm_calls(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                              calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    llm = [c for c in calls if ".llm." in c.function and in_window(c, params) and c.duration is not None]
    want = sorted((c.duration for c in llm), reverse=True)[:20]  # type: ignore[misc]
    got = run(api, user_headers, sqls["Q5"]).rows
    assert [r["duration_ns"] for r in got] == want
    by_key = {(c.execution_id, c.call_id): c for c in llm}
    assert all(by_key[key(r)].duration == r["duration_ns"] for r in got)


def test_q6_one_execution_call_tree(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                                    calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    want = {(c.call_id, c.parent, c.function) for c in calls if c.execution_id == params.execution_id}
    got = run(api, user_headers, sqls["Q6"]).rows
    assert {
        (
            CallRef.decode_string(r["call_id"]).call_id,
            CallRef.decode_string(r["parent_call_id"]).call_id if r["parent_call_id"] else None,
            r["function_name"],
        )
        for r in got
    } == want


def test_q7_call_path_stats(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                            calls: list[Call]) -> None:  # fmt: skip
    got = run(api, user_headers, sqls["Q7"]).rows
    assert got and sum(r["calls"] for r in got) == sum(1 for c in calls if c.function == LLM_FN)


def test_q8_one_calls_values(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                             calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    probe = next(
        c
        for c in calls
        if c.execution_id == params.execution_id and c.function == ROOT_FN and c.parent is None
    )
    got = run(api, user_headers, sqls["Q8"])
    assert len(got.rows) == 1
    row = got.rows[0]
    assert row["args"] == probe.values["args"]
    assert row["output"] == probe.values.get("output")
    assert row["error"] == probe.values.get("error")
    assert row["private_state"] == "indexed"
    assert got.outcome.status == "complete" and got.outcome.private_bytes_read > 0
    assert got.outcome.snapshot.lance_version is not None


def test_q9_exact_private_match(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                                calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    cands = [c for c in calls if c.function == ROOT_FN and in_window(c, params)]
    want_indexed = {
        (c.execution_id, c.call_id)
        for c in cands
        if not c.pending and c.values.get("args", {}).get("invoice", {}).get("id") == params.invoice_id
    }
    want_pending = {(c.execution_id, c.call_id) for c in cands if c.pending and "args" in c.values}
    got = run(api, user_headers, sqls["Q9"])
    indexed = {key(r) for r in got.rows if r["private_state"] == "indexed"}
    pending = {key(r) for r in got.rows if r["private_state"] == "pending"}
    assert want_indexed and indexed == want_indexed
    assert pending == want_pending
    assert got.outcome.pending.private_rows == len(want_pending)
    assert got.outcome.status == ("partial" if want_pending else "complete")


@pytest.mark.parametrize("needle", ["refund one", "返金", "двойное", "refund"])
def test_q10_substring_search_in_outputs(
    api: TestClient,
    user_headers: dict[str, str],
    corpus: Corpus,
    calls: list[Call],
    params: ClassParams,
    needle: str,
) -> None:
    sql = class_sql(ClassParams(**{**params.__dict__, "needle": needle}))["Q10"]
    cands = [c for c in calls if c.function == LLM_FN and in_window(c, params)]
    cands.sort(key=lambda c: (-c.started, call_id_text(corpus, c)))
    want = [
        (c.execution_id, c.call_id)
        for c in cands
        if (c.pending and "output" in c.values) or (not c.pending and has_string_with(c, "output", needle))
    ][:50]
    got = run(api, user_headers, sql).rows
    assert [key(r) for r in got] == want
    assert any(not c.pending and has_string_with(c, "output", needle) for c in cands)


def string_leaves(value: Any) -> list[str]:
    """The string scalars of a JSON value (object keys excluded)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in string_leaves(v)]
    return []


def has_string_with(call: Call, role: str, needle: str) -> bool:
    return role in call.values and any(needle in s for s in string_leaves(call.values[role]))


def test_q10_key_names_do_not_match(
    api: TestClient, user_headers: dict[str, str], calls: list[Call], params: ClassParams
) -> None:
    # Every output object of the LLM function has keys; a needle that is only a key name matches nothing.
    cands = [c for c in calls if c.function == LLM_FN and in_window(c, params) and not c.pending]
    keys = {k for c in cands if isinstance(c.values.get("output"), dict) for k in c.values["output"]}
    needle = next(
        k for k in sorted(keys) if len(k) >= 3 and not any(has_string_with(c, "output", k) for c in cands)
    )
    sql = class_sql(ClassParams(**{**params.__dict__, "needle": needle}))["Q10"]
    got = run(api, user_headers, sql).rows
    assert all(r["private_state"] == "pending" for r in got)
    assert any(needle in (c.text("output") or "") for c in cands)


def test_q11_top_by_private_number(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                                   calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    scored = [
        (c.values["output"]["score"], (c.execution_id, c.call_id))
        for c in calls
        if c.function == LLM_FN and in_window(c, params) and not c.pending
        and isinstance(c.values.get("output"), dict)
        and isinstance(c.values["output"].get("score"), int | float)
    ]  # fmt: skip
    scored.sort(key=lambda t: -t[0])
    got = run(api, user_headers, sqls["Q11"]).rows
    assert [r["score"] for r in got] == [s for s, _ in scored[:10]]
    assert {key(r) for r in got} <= {k for _, k in scored}


def test_q12_group_by_private_field(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                                    calls: list[Call], params: ClassParams) -> None:  # fmt: skip
    cands = [c for c in calls if c.function == LLM_FN and in_window(c, params)]
    groups: dict[Any, list[int]] = defaultdict(list)
    for c in cands:
        if not c.pending:
            tier = c.values.get("args", {}).get("customer", {}).get("tier")
            groups[tier].append(c.duration or 0)
    got = run(api, user_headers, sqls["Q12"])
    assert {r["tier"]: r["calls"] for r in got.rows} == {t: len(d) for t, d in groups.items()}
    for r in got.rows:
        assert r["mean_duration_ns"] == pytest.approx(sum(groups[r["tier"]]) / len(groups[r["tier"]]))
    pending = sum(1 for c in cands if c.pending and "args" in c.values)
    assert got.outcome.pending.private_rows == pending and pending > 0
    assert got.outcome.status == "partial"


def test_q13_availability(api: TestClient, user_headers: dict[str, str], sqls: dict[str, str],
                          calls: list[Call]) -> None:  # fmt: skip
    want: Counter[tuple[str, str]] = Counter()
    for c in calls:
        for role in ("output", "args"):
            state = c.states.get(role, "")
            if state.startswith("lost:"):
                want[(role, state)] += 1
    got = run(api, user_headers, sqls["Q13"]).rows
    assert {(r["role"], r["state"]): r["n"] for r in got if r["role"] in ("output", "args")} == dict(want)
    assert want, "the corpus should lose some values"


def test_lost_values_are_reported_in_the_outcome(
    api: TestClient, user_headers: dict[str, str], calls: list[Call], params: ClassParams
) -> None:
    sql = (
        "SELECT call_id, output FROM calls_v1 WHERE started_at_ns >= 0 "
        f"AND function_name IN ('{LLM_FN}', '{ROOT_FN}')"
    )
    want = Counter(
        c.states["output"][5:]
        for c in calls
        if c.function in (LLM_FN, ROOT_FN) and c.states.get("output", "").startswith("lost:")
    )
    got = run(api, user_headers, sql).outcome.unavailable
    assert {u.reason: u.count for u in got if u.kind == "output_value"} == dict(want)
    assert want, "the corpus should lose some outputs"
