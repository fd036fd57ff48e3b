"""Boundary's projection-batch ingest (``FactStore.ingest_many``) on chdb, against a raw baseline.

Builds ``n`` batches of 10 ``calls_v1`` rows (one execution each) and measures in the same run:

- baseline: one ``insert_arrow`` per batch, no registry (what the rows alone cost ClickHouse);
- the store, one batch per call, sequential (a PUT after a PUT);
- the store, one batch per call, from 8 threads (concurrent PUTs into one Boundary process);
- the store, from 8 threads over two ``FactStore`` instances with their own clients (two
  replicas on one ClickHouse), every batch sent to both.

For each: ms per batch (wall), inserts issued into ClickHouse (new parts) and rows per insert.

Run: ``.venv/bin/python bench/boundary_ingest.py [n_batches]`` (default 1,000).

``--wire [--executions 2000] [--meta-per-request 1]``: Boundary CPU per execution through the
real endpoint instead. Boundary runs as its own process (mTLS, chdb), the batches are the real
worker's (a synthetic profile of executions of 10 spans projected by the activities, captured at
the sink), and every meta object's batches are sent by ``BoundaryFactSink`` as one set request,
alternately in the JSON encoding (the baseline: base64 bodies, checked batch by batch) and in the
binary one (one Arrow IPC stream per relation, checked per relation). Both send the same batches,
into generation 1 (JSON) and generation 2 (binary), so each inserts the same rows fresh. Prints
Boundary's CPU (its process, chdb included) and the sender's CPU per execution for each, and
their ratio. ``--meta-per-request`` sends that many meta objects per request (the grouped sink
of a busy worker sends about a second's worth).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
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


ROOT = Path(__file__).resolve().parents[1]


def _proc_cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _boundary_pid() -> int:
    """The Boundary subprocess this process started (the test fixture keeps no handle)."""
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            for pid in (task / "children").read_text().split():
                if b"api.boundary" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
    raise RuntimeError("no Boundary subprocess found")


class _Capture:
    """A FactSink that keeps every batch set instead of sending it."""

    def __init__(self) -> None:
        self.sets: list[list[Any]] = []

    def active_generation(self, environment_id: str) -> int:
        return 1

    def put_batch(self, scope: Any, batch: Any) -> None:
        self.sets.append([batch])

    def put_batches(self, scope: Any, batches: Any) -> None:
        self.sets.append(list(batches))


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def wire(executions: int, meta_per_request: int) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "projection_io"))
    fx = _load("projection_io_conftest", ROOT / "tests" / "projection_io" / "conftest.py")
    from bucket_corpus import build_objects, upload
    from moto.server import ThreadedMotoServer

    from activities.fact_sink import BoundaryFactSink
    from activities.projection_activities import ProjectionActivities
    from activities.settings import ProjectionSettings
    from formats.contracts import projection as c
    from formats.synth.config import SynthConfig
    from formats.synth.generator import synthesize

    tmp = Path(tempfile.mkdtemp(prefix="bench_wire_"))
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )
    gen = fx.boundary.__wrapped__(factory)
    boundary = next(gen)
    port = fx.free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    try:
        # The worker's real batches: project a synthetic profile with a capturing sink.
        m = fx.Moto(f"http://127.0.0.1:{port}")
        s3 = m.client("s3")
        s3.create_bucket(Bucket="bench-wire")
        cfg = SynthConfig(
            seed=7, executions=executions, llm_calls=(7, 7), selected_calls=(2, 2), rate_per_second=200
        )
        synthesize(tmp / "profile", cfg)
        up = build_objects(tmp / "profile", boundary.scope)
        upload(s3, "bench-wire", up)
        capture = _Capture()
        acts = ProjectionActivities(
            s3=s3,
            bucket="bench-wire",
            lance=fx.make_lance(m, "bench-wire"),
            sink=capture,
            settings=ProjectionSettings(),
            tenant_id=boundary.scope.tenant_id,
        )
        for k in up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(k))
        acts._commit_lance = lambda *a, **kw: 0  # type: ignore[method-assign]
        by_gen: dict[int, list[list[Any]]] = {}
        for generation in (1, 2):
            capture.sets = []
            for k in up.meta_keys:
                acts.project_meta_object(c.ProjectMetaInput(k, generation))
            by_gen[generation] = [
                [b for s in capture.sets[i : i + meta_per_request] for b in s]
                for i in range(0, len(capture.sets), meta_per_request)
            ]
        acts.close()

        from api.dataplane.boundary_client import BoundaryClient

        # A set of thousands of batches on a loaded machine can take longer than the default 10 s.
        client = BoundaryClient(
            boundary.workload_url, boundary.tls, boundary.deployment_id, boundary.cell, timeout=300
        )
        pid = _boundary_pid()
        scope = boundary.scope
        encodings = {"json": 1, "binary": 2}  # encoding -> generation
        cpu = {e: 0.0 for e in encodings}
        sender = {e: 0.0 for e in encodings}
        sent = {e: 0 for e in encodings}

        class _Sink(BoundaryFactSink):
            encoding = "binary"

            def __init__(self) -> None:
                super().__init__(client)
                put = client.put_projection_batch_set
                self.client = type("C", (), {})()
                self.client.put_projection_batch_set = lambda b: put(b, encoding=self.encoding)

        sink = _Sink()
        client.active_generation(scope.environment_id)  # JWT and connection before measuring
        for k in range(len(by_gen[1])):
            for encoding, generation in encodings.items():
                batches = by_gen[generation][k]
                sink.encoding = encoding
                b0, s0 = _proc_cpu(pid), time.process_time()
                errors = [e for e in sink.answers(scope, batches) if e is not None]
                cpu[encoding] += _proc_cpu(pid) - b0
                sender[encoding] += time.process_time() - s0
                if errors:
                    raise errors[0]
                sent[encoding] += sum(1 for b in batches if b.header.relation == "calls_v1")
        client.close()
        n_batches = sum(len(s) for s in by_gen[1])
        print(
            f"{executions} executions of 10 spans, {len(up.meta_keys)} meta objects,"
            f" {n_batches} batches, {len(by_gen[1])} requests per encoding"
            f" ({meta_per_request} meta object(s) each)"
        )
        print(f"{'encoding':10} {'Boundary CPU ms/execution':>26} {'sender CPU ms/execution':>24}")
        for e in encodings:
            print(f"{e:10} {1000 * cpu[e] / sent[e]:26.2f} {1000 * sender[e] / sent[e]:24.2f}")
        print(
            f"ratio binary/json: Boundary {cpu['binary'] / cpu['json']:.2f},"
            f" sender {sender['binary'] / sender['json']:.2f}"
        )
    finally:
        moto.stop()
        with contextlib.suppress(StopIteration):
            next(gen)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("n_batches", nargs="?", type=int, default=1000)
    ap.add_argument("--wire", action="store_true", help="Boundary CPU per execution, JSON vs binary sets")
    ap.add_argument("--executions", type=int, default=2000)
    ap.add_argument("--meta-per-request", type=int, default=1)
    args = ap.parse_args()
    if args.wire:
        wire(args.executions, args.meta_per_request)
    else:
        main(args.n_batches)
