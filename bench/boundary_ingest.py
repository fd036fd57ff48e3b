"""Boundary's projection-batch ingest (``FactStore.ingest_many``) on chdb, against a raw baseline.

Builds ``n`` batches of 10 ``calls_v1`` rows (one execution each) and measures in the same run:

- baseline: one ``insert_arrow`` per batch, no registry (what the rows alone cost ClickHouse);
- the store, one batch per call, sequential (a PUT after a PUT);
- the store, one batch per call, from 8 threads (concurrent PUTs into one Boundary process);
- the store, from 8 threads over two ``FactStore`` instances with their own clients (two
  replicas on one ClickHouse), every batch sent to both.

For each: ms per batch (wall), inserts issued into ClickHouse (new parts) and rows per insert.

Run: ``.venv/bin/python bench/boundary_ingest.py [n_batches]`` (default 1,000).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import clickhouse_connect
import pyarrow as pa

from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchRejected, BatchScope, body_digest
from api.boundary.facts.store import BatchIdentity, FactStore
from formats import catalog

ROWS = 10
THREADS = 8


def _batch(scope: BatchScope, idx: int) -> tuple[BatchIdentity, BatchScope, pa.Table]:
    ex = catalog.deterministic_row_id("bench_exec", str(idx))
    rows: list[dict[str, Any]] = [
        {
            "tenant_id": scope.tenant_id,
            "project_id": scope.project_id,
            "environment_id": scope.environment_id,
            "generation": scope.generation,
            "row_id": catalog.deterministic_row_id("calls_v1", ex, pos),
            "execution_id": ex,
            "process_euid": "euid",
            "thread_id": "t0",
            "call_id": f"c{pos}",
            "parent_call_id": None,
            "function_name": "Fn",
            "parent_function_name": None,
            "program_id": "prog",
            "call_path_id": "cp",
            "is_llm": False,
            "started_at_ns": 1_000 + pos,
            "ended_at_ns": 2_000 + pos,
            "duration_ns": 1_000,
            "status": "succeeded",
            "args_state": "available",
            "output_state": "available",
            "error_state": "not_applicable",
            "args_cid": None,
            "output_cid": None,
            "error_cid": None,
        }
        for pos in range(ROWS)
    ]
    table = pa.Table.from_pylist(rows, schema=catalog.public_schema("calls_v1"))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest = body_digest(sink.getvalue().to_pybytes())
    bid = catalog.deterministic_row_id("projection_batch", ex, "calls_v1", 0)
    return BatchIdentity(bid, "calls_v1", 1, ex, digest), scope, table


def _parts_created(store: FactStore, table: str) -> int:
    # Every insert makes one part; merged-away parts leave the active set, so count by level 0
    # blocks: max_block_number grows by one per insert.
    rows = store.client.query(
        "SELECT max(max_block_number) FROM system.parts WHERE database = {d:String} AND table = {t:String}",
        parameters={"d": store.database, "t": table},
    ).result_rows
    return int(rows[0][0] or 0)


def _threads(work: list[Any], fn: Any) -> None:
    chunks = [work[i::THREADS] for i in range(THREADS)]
    ts = [threading.Thread(target=lambda c=c: [fn(x) for x in c]) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main(n: int) -> None:
    path = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    clients = [clickhouse_connect.get_client(interface="chdb", path=str(path)) for _ in range(2)]
    figures: list[tuple[str, float, int, int]] = []

    def run(label: str, go: Any, stores: list[FactStore]) -> None:
        for s in stores:
            s.ensure_schema()
        base = {t: _parts_created(stores[0], t) for t in ("calls_v1", ddl.REGISTRY_TABLE)}
        t0 = time.perf_counter()
        rows = go(stores)
        wall = time.perf_counter() - t0
        inserts = sum(_parts_created(stores[0], t) - b for t, b in base.items())
        figures.append((label, wall * 1000 / n, inserts, rows))

    def baseline(stores: list[FactStore]) -> int:
        s = stores[0]
        scope = BatchScope("bt", "bp", "be", 1)
        for i in range(n):
            s.client.insert_arrow("calls_v1", _batch(scope, i)[2], database=s.database)
        return n * ROWS

    def sequential(stores: list[FactStore]) -> int:
        scope = BatchScope("st", "sp", "se", 1)
        for i in range(n):
            assert not isinstance(stores[0].ingest_many([_batch(scope, i)])[0], BatchRejected)
        return n * ROWS

    def threaded(stores: list[FactStore]) -> int:
        scope = BatchScope("tt", "tp", "te", 1)
        _threads(list(range(n)), lambda i: stores[0].ingest_many([_batch(scope, i)]))
        return n * ROWS

    def replicas(stores: list[FactStore]) -> int:
        scope = BatchScope("rt", "rp", "re", 1)
        work = [(i, k) for i in range(n) for k in (0, 1)]
        _threads(work, lambda ik: stores[ik[1]].ingest_many([_batch(scope, ik[0])]))
        return n * ROWS

    run("baseline: insert_arrow per batch", baseline, [FactStore(clients[0], database="b0")])
    run("store, sequential", sequential, [FactStore(clients[0], database="b1")])
    run(f"store, {THREADS} threads", threaded, [FactStore(clients[0], database="b2")])
    run(
        f"two stores, {THREADS} threads, each batch to both",
        replicas,
        [FactStore(clients[0], database="b3"), FactStore(clients[1], database="b3")],
    )
    print(f"{n} batches of {ROWS} calls_v1 rows, chdb at {path}")
    print(f"{'case':48} {'ms/batch':>9} {'inserts':>8} {'rows/insert':>12}")
    for label, ms, inserts, rows in figures:
        per = rows / inserts if inserts else 0.0
        print(f"{label:48} {ms:9.2f} {inserts:8d} {per:12.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
