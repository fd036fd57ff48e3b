"""The 13 query classes through the coordinator, cold and warm, next to raw ClickHouse.

Builds a corpus with the synthetic profiler and the real projection code (public facts into
Boundary's fact store on chdb, private rows into Lance with indexes built), then runs every class
of api/coordinator/query_classes.py through the coordinator's planner and executor. The public
part goes through Boundary's own guard and fact store in-process (the HTTP hop is left out, so the
ratio measures the coordinator, not TLS). For each public-only class the same guarded SQL also runs
directly on ClickHouse in the same run: ``ratio`` = coordinator / raw (target < 1.5x).

Cold is the first run of a class in this process; warm is p50 / p95 over ``--repeats`` more runs.

    .venv/bin/python bench/query.py                      # 1 M calls (~250 k executions)
    .venv/bin/python bench/query.py --calls 15000000     # the full-size run of DESIGN.md section 8
    .venv/bin/python bench/query.py --calls 50000        # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "coordinator"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "projection"))

from activities.lance_store import LanceStore
from activities.projection.batches import build_batches, read_ipc
from api.boundary.facts.batch_check import BatchScope
from api.boundary.facts.guard import Scope as GuardScope
from api.boundary.facts.guard import guard_sql
from api.boundary.facts.store import BatchIdentity, FactStore
from api.boundary.facts.store import Budget as ChBudget
from api.coordinator.executor import Budget, QueryRun
from api.coordinator.planner import plan_query
from api.coordinator.private_reader import PrivateReader
from api.coordinator.query_classes import PUBLIC_CLASSES, ClassParams, class_sql
from formats import query_output as qo
from formats.object_keys import Scope
from formats.synth import SynthConfig, synthesize

SCOPE = Scope("tenbench", "projbench", "envbench")
DB = "bench_query"


class DirectFacts:
    """Boundary's guard + fact store in-process: the resident path without the HTTP hop."""

    def __init__(self, store: FactStore) -> None:
        self.store = store
        self.scope = GuardScope(SCOPE.tenant_id, SCOPE.project_id, SCOPE.environment_id, 1)

    def resident_query(self, sql: str, *, max_rows: int) -> pa.Table:
        guarded = guard_sql(sql, self.scope, database=DB)
        return self.store.run_guarded(guarded, ChBudget(wall_ms=600_000, rows=max_rows, bytes=1 << 34))


def build(calls: int, work: Path) -> tuple[FactStore, LanceStore, ClassParams, Any]:
    from coordinator_corpus import commit_private, index_all, project_profile

    executions = max(10, calls // 4)  # the synthetic profiler writes about 4 calls per execution
    t0 = time.perf_counter()
    truth = synthesize(work / "profiles", SynthConfig(seed=5, processes=2, executions=executions))
    t1 = time.perf_counter()
    projections = project_profile(work / "profiles")
    t2 = time.perf_counter()
    store = FactStore.open(path=work / "chdb", database=DB)
    tables: dict[str, list[pa.Table]] = {}
    for p in projections:
        for b in build_batches(p, SCOPE, 1):
            tables.setdefault(b.header.relation, []).append(read_ipc(b.ipc))
    n_calls = 0
    for relation, parts in tables.items():
        table = pa.concat_tables(parts)
        n_calls += table.num_rows if relation == "calls_v1" else 0
        ident = BatchIdentity(f"bench-{relation}", relation, 1, "00" * 32, "sha256:" + "0" * 64)
        store.ingest(ident, BatchScope(SCOPE.tenant_id, SCOPE.project_id, SCOPE.environment_id, 1), table)
    t3 = time.perf_counter()
    lance = LanceStore(root=work / "lance")
    commit_private(lance, SCOPE, 1, projections)
    index_all(lance, SCOPE)
    t4 = time.perf_counter()
    print(
        f"corpus: {n_calls} calls in {len(projections)} executions; synth {t1 - t0:.1f}s, "
        f"project {t2 - t1:.1f}s, "
        f"chdb {t3 - t2:.1f}s, lance+indexes {t4 - t3:.1f}s"
    )
    calls_list = []
    for e in truth.executions:
        zero = e.started_unix_ns - e.spans[0].started_ns
        for s in e.spans:
            calls_list.append((zero + s.started_ns, e, s))
    starts = sorted(c[0] for c in calls_list)
    root = next(
        p
        for p in projections
        if p.public["calls_v1"] and p.public["calls_v1"][0]["args_state"] == "available"
    )
    row = next(r for r in root.public["calls_v1"] if r["parent_call_id"] is None)
    invoice = next(
        v.json["invoice"]["id"]
        for e in truth.executions
        if e.execution_id == root.execution_id
        for s in e.spans
        for v in s.values
        if v.role == "input" and isinstance(v.json, dict) and "invoice" in v.json
    )
    day = 24 * 3_600_000_000_000
    params = ClassParams(
        now_ns=starts[-1],
        window_start_ns=max(starts[0], starts[-1] - day),
        window_end_ns=starts[-1] + 1,
        root_function=str(row["function_name"]),
        llm_function="support.llm.ClassifyTicket",
        execution_id=root.execution_id,
        call_id=str(row["call_id"]),
        invoice_id=invoice,
    )
    return store, lance, params, n_calls


def run_class(sql: str, facts: DirectFacts, lance: LanceStore) -> tuple[float, qo.QueryOutcome]:
    started = time.perf_counter()
    plan = plan_query(sql, candidate_cap=5_000_000)
    run = QueryRun(
        plan,
        public=facts,
        reader_factory=lambda: PrivateReader.bind(lance, SCOPE, 1),
        snapshot=qo.SnapshotRef(snapshot_id="bench", catalog_version=1, generation=1),
        budget=Budget(wall_ms=600_000, rows=10_000_000, bytes=1 << 34, private_bytes=1 << 40),
        interactive=False,
        candidate_cap=5_000_000,
    )
    for _ in run.lines():
        pass
    assert run.outcome is not None
    return time.perf_counter() - started, run.outcome


def run_raw(sql: str, facts: DirectFacts) -> float:
    started = time.perf_counter()
    facts.resident_query(sql, max_rows=10_000_000).to_pylist()
    return time.perf_counter() - started


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress when redirected
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        store, lance, params, _ = build(args.calls, Path(tmp))
        facts = DirectFacts(store)
        sqls = class_sql(params)
        print(
            f"{'class':<6}{'rows':>8}{'cold ms':>10}{'warm p50':>10}{'warm p95':>10}"
            f"{'raw p50':>10}{'ratio':>8}"
        )
        slowest = ("", 0.0)
        for name, sql in sqls.items():
            cold, outcome = run_class(sql, facts, lance)
            warm = sorted(run_class(sql, facts, lance)[0] for _ in range(args.repeats))
            p50 = statistics.median(warm)
            p95 = warm[min(len(warm) - 1, int(0.95 * len(warm)))]
            raw_text, ratio_text = "", ""
            if name in PUBLIC_CLASSES:
                run_raw(sql, facts)
                raw = statistics.median(sorted(run_raw(sql, facts) for _ in range(args.repeats)))
                raw_text, ratio_text = f"{raw * 1000:.1f}", f"{p50 / raw:.2f}x"
            if p50 > slowest[1]:
                slowest = (name, p50)
            err = f"  error={outcome.error.code}" if outcome.error else ""
            print(
                f"{name:<6}{outcome.rows:>8}{cold * 1000:>10.1f}{p50 * 1000:>10.1f}{p95 * 1000:>10.1f}"
                f"{raw_text:>10}{ratio_text:>8}{err}"
            )
        print(f"slowest warm class: {slowest[0]} ({slowest[1] * 1000:.1f} ms p50)")


if __name__ == "__main__":
    main()
