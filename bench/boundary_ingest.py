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

``--in-process [--executions 2000] [--meta-per-request 1] [--rounds 2]``: the same batch sets
through Boundary's binary-set handler called in this process (no HTTP, TLS or JWT), so a change
of a few percent in the ingest path stands out of the noise. Prints CPU per execution per round,
the store's share, its ClickHouse calls by client method, and Boundary's own Python (the
handler's thread outside those calls: what stays in Boundary with a ClickHouse server).
``--sweep 10,50,200`` instead runs one fresh round per set size (executions per set) and fits the
CPU to a cost per request plus a cost per execution (how Boundary's cost per execution falls as
flushes grow, and where it stops).

``--registry-growth 0,1000000,4000000 [--flush-batches 1000]``: a flush's cost as the batch
registry grows, today's registry (sorted and read by root id) against the one before 2026-12-04
(sorted and read by batch id), in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

import clickhouse_connect
import pyarrow as pa
from proc_cpu import process_cpu
from pydantic import SecretStr

from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchRejected, BatchScope, body_digest
from api.boundary.facts.batch_registry import CLAIM, VISIBLE, BatchMarks
from api.boundary.facts.store import BatchIdentity, FactStore, RowSlice, registry_table
from formats import catalog
from formats.ids import ThreadRef, uuid7_bytes

ROWS = 10
THREADS = 8


def _batch(
    scope: BatchScope, idx: int, *, root: str | None = None, partition: int = 0
) -> tuple[BatchIdentity, BatchScope, pa.Table]:
    ex = root or catalog.deterministic_row_id("bench_exec", str(idx))
    rows: list[dict[str, Any]] = [
        {
            "tenant_id": scope.tenant_id,
            "project_id": scope.project_id,
            "environment_id": scope.environment_id,
            "generation": scope.generation,
            "row_id": catalog.deterministic_row_id("calls_v1", ex, partition, pos),
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
    bid = catalog.deterministic_row_id("projection_batch", ex, "calls_v1", partition)
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


BATCHES_PER_ROOT = 7  # an execution of 10 spans: one batch per public relation it has rows in
EXECUTIONS_PER_PROCESS = 1_000


def _by_batch_id_registry(database: str) -> str:
    """The registry as it was before 2026-12-04 (sorted and read by batch id, 256-row granules):
    the baseline of ``--registry-growth``, not live code."""
    return (
        ddl.create_registry(database)
        .replace("generation, root_id, batch_id, kind", "generation, batch_id, kind")
        .replace("generation, root_id)", "generation, batch_id)")
        .replace(f"index_granularity = {ddl.REGISTRY_GRANULE_ROWS}", "index_granularity = 256")
    )


class _ByBatchIdStore(FactStore):
    """The store reading the registry by batch id, as before 2026-12-04 (the baseline): the
    bench's batch ids are known from their roots."""

    def _registry(self, scope: BatchScope, root_ids: list[str]) -> dict[str, BatchMarks]:
        wanted = sorted(b for r in root_ids for b in _root_batch_ids(r))
        return self._marks(scope, "batch_id", wanted)


def _root(execution: int) -> str:
    """A root id as the profiler makes them: its process's euid (a UUIDv7: processes started later
    sort later) ‖ engine ‖ thread, one process per ``EXECUTIONS_PER_PROCESS`` executions."""
    process, thread = divmod(execution, EXECUTIONS_PER_PROCESS)
    rand = hashlib.sha256(f"bench-process-{process}".encode()).digest()[:10]
    euid = uuid7_bytes(1_700_000_000_000 + 60_000 * process, rand)
    return ThreadRef(euid, 1, thread).execution_id


def _root_batch_ids(root: str) -> list[str]:
    return [
        catalog.deterministic_row_id("projection_batch", root, "calls_v1", p) for p in range(BATCHES_PER_ROOT)
    ]


def _registry_rows(scope: BatchScope, start: int, n: int) -> pa.Table:
    """The claim and visible rows of ``n`` executions' batches, as the store writes them."""
    empty = pa.table({"x": pa.array([], pa.int8())})
    items = [
        (BatchIdentity(bid, "calls_v1", 1, root, "sha256:" + "0" * 64), scope, RowSlice(empty, 0, ROWS))
        for root in map(_root, range(start, start + n))
        for bid in _root_batch_ids(root)
    ]
    return pa.concat_tables([registry_table(CLAIM, items), registry_table(VISIBLE, items)])


def registry_growth(sizes: list[int], flush_batches: int, flushes: int) -> None:
    """A flush's cost as the registry grows: the store with today's registry (sorted and read by
    root id) against the same store reading an earlier registry by batch id, in the same run on
    one chdb. At each size (registry rows: a claim and a mark per batch, ``BATCHES_PER_ROOT``
    batches per execution) the registry is grown as the store writes it, then ``flushes`` flushes
    of ``flush_batches`` fresh batches (the newest processes' executions) are ingested; prints the
    median wall and CPU per flush, the flush's registry read alone, and that read against the
    same layout's at the first size."""
    path = Path(tempfile.mkdtemp(prefix="bench_registry_"))
    client = clickhouse_connect.get_client(interface="chdb", path=str(path))
    stores: dict[str, FactStore] = {
        "by batch id": _ByBatchIdStore(client, database="reg_old"),
        "by root": FactStore(client, database="reg_new"),
    }
    for store in stores.values():
        store.ensure_schema()
        if isinstance(store, _ByBatchIdStore):
            client.command(f"DROP TABLE {store.database}.{ddl.REGISTRY_TABLE}")
            client.command(_by_batch_id_registry(store.database))
    scope = BatchScope("gt", "gp", "ge", 1)
    reads: dict[str, list[float]] = {}
    for name, store in stores.items():
        registry = store._registry

        def timed(*a: Any, _name: str = name, _fn: Any = registry) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a)
            finally:
                reads.setdefault(_name, []).append(time.perf_counter() - t0)

        store._registry = timed  # type: ignore[method-assign,assignment]
    print(
        f"flushes of {flush_batches} batches ({BATCHES_PER_ROOT} per execution, {ROWS} calls_v1 rows"
        f" each), median of {flushes}; chdb at {path}"
    )
    print(
        f"{'registry rows':>13} {'layout':>12} {'flush wall ms':>14} {'flush CPU ms':>13}"
        f" {'registry read ms':>17} {'read / first':>13}"
    )
    per_root = 2 * BATCHES_PER_ROOT
    grown, fresh = 0, 10**9
    first: dict[str, float] = {}
    for size in sizes:
        while grown < size // per_root:
            n = min(20_000, size // per_root - grown)
            table = _registry_rows(scope, grown, n)
            for store in stores.values():
                client.insert_arrow(ddl.REGISTRY_TABLE, table, database=store.database)
            grown += n
        for store in stores.values():  # as merges leave a registry that has had time
            client.command(f"OPTIMIZE TABLE {store.database}.{ddl.REGISTRY_TABLE} FINAL")
        for name, store in stores.items():
            walls, cpus = [], []
            reads[name] = []
            for _ in range(flushes):
                roots = [_root(fresh + i) for i in range(max(1, flush_batches // BATCHES_PER_ROOT))]
                fresh += len(roots)
                items = [
                    _batch(scope, 0, root=root, partition=p)
                    for root in roots
                    for p in range(BATCHES_PER_ROOT)
                ]
                w0, c0 = time.perf_counter(), time.process_time()
                results = store.ingest_many(items)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                assert not any(isinstance(r, BatchRejected) for r in results)
            read = statistics.median(reads[name])
            first.setdefault(name, read)
            print(
                f"{grown * per_root:13d} {name:>12} {1000 * statistics.median(walls):14.1f}"
                f" {1000 * statistics.median(cpus):13.1f} {1000 * read:17.1f} {read / first[name]:13.2f}",
                flush=True,
            )


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
        self.active = 1

    def active_generation(self, environment_id: str) -> int:
        return self.active

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


def _worker_sets(
    tmp: Path, scope: Any, executions: int, per_request: dict[int, int]
) -> tuple[dict[int, list[list[Any]]], int]:
    """The worker's real batch sets per generation: a synthetic profile of executions of 10 spans
    projected by the activities (moto for S3, no Boundary), captured at the sink and grouped
    ``per_request[generation]`` meta objects per set. Also returns the number of meta objects."""
    sys.path.insert(0, str(ROOT / "tests" / "projection_io"))
    fx = _load("projection_io_conftest", ROOT / "tests" / "projection_io" / "conftest.py")
    from bucket_corpus import build_objects, upload
    from moto.server import ThreadedMotoServer

    from activities.projection_activities import ProjectionActivities
    from activities.settings import ProjectionSettings
    from formats.contracts import projection as c
    from formats.synth.config import SynthConfig
    from formats.synth.generator import synthesize

    port = fx.free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    try:
        m = fx.Moto(f"http://127.0.0.1:{port}")
        s3 = m.client("s3")
        s3.create_bucket(Bucket="bench-wire")
        cfg = SynthConfig(
            seed=7, executions=executions, llm_calls=(7, 7), selected_calls=(2, 2), rate_per_second=200
        )
        synthesize(tmp / "profile", cfg)
        up = build_objects(tmp / "profile", scope)
        upload(s3, "bench-wire", up)
        capture = _Capture()
        acts = ProjectionActivities(
            s3=s3,
            bucket="bench-wire",
            lance=fx.make_lance(m, "bench-wire"),
            sink=capture,
            settings=ProjectionSettings(),
            tenant_id=scope.tenant_id,
        )
        for k in up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(k))
        acts._commit_lance = lambda *a, **kw: 0  # type: ignore[method-assign]
        by_gen: dict[int, list[list[Any]]] = {}
        for generation, meta_per_request in per_request.items():
            capture.sets, capture.active = [], generation
            for k in up.meta_keys:
                acts.project_meta_object(c.ProjectMetaInput(k, generation))
            by_gen[generation] = [
                [b for s in capture.sets[i : i + meta_per_request] for b in s]
                for i in range(0, len(capture.sets), meta_per_request)
            ]
        acts.close()
        return by_gen, len(up.meta_keys)
    finally:
        moto.stop()


def _calls(batches: list[Any]) -> int:
    """Executions in a set: one ``calls_v1`` batch per execution."""
    return sum(1 for b in batches if b.header.relation == "calls_v1")


def wire(executions: int, meta_per_request: int) -> None:
    fx = _load("projection_io_conftest", ROOT / "tests" / "projection_io" / "conftest.py")
    from activities.fact_sink import BoundaryFactSink

    tmp = Path(tempfile.mkdtemp(prefix="bench_wire_"))
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )
    fx.FACT_FLUSH_INTERVAL_S = None  # Boundary's production flush cadence
    gen = fx.boundary.__wrapped__(factory)
    boundary = next(gen)
    try:
        both = {1: meta_per_request, 2: meta_per_request}
        by_gen, n_meta = _worker_sets(tmp, boundary.scope, executions, both)

        from api.dataplane.boundary_client import BoundaryClient

        # A set of thousands of batches on a loaded machine can take longer than the default 10 s.
        client = BoundaryClient(
            boundary.workload_url, boundary.tls, boundary.deployment_id, boundary.cell, timeout=300
        )
        pid = _boundary_pid()
        scope = boundary.scope
        encodings: dict[Literal["json", "binary"], int] = {"json": 1, "binary": 2}  # -> generation
        cpu = {e: 0.0 for e in encodings}
        sender = {e: 0.0 for e in encodings}
        sent = {e: 0 for e in encodings}

        class _Sink(BoundaryFactSink):
            encoding: Literal["json", "binary"] = "binary"

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
                b0, s0 = process_cpu(pid), time.process_time()
                errors = [e for e in sink.answers(scope, batches) if e is not None]
                cpu[encoding] += process_cpu(pid) - b0
                sender[encoding] += time.process_time() - s0
                if errors:
                    raise errors[0]
                sent[encoding] += _calls(batches)
        client.close()
        n_batches = sum(len(s) for s in by_gen[1])
        print(
            f"{executions} executions of 10 spans, {n_meta} meta objects,"
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
        with contextlib.suppress(StopIteration):
            next(gen)


def _by_executions(sets: list[list[Any]], n: int) -> list[list[Any]]:
    """The sets' batches, in order, regrouped ``n`` executions per set (a program's
    function_definitions_v1 batch goes with the execution it comes with)."""
    out: list[list[Any]] = [[]]
    roots: set[str] = set()
    for b in (b for s in sets for b in s):
        if b.header.relation != "function_definitions_v1" and b.header.root_id not in roots:
            if len(roots) == n:
                out.append([])
                roots = set()
            roots.add(b.header.root_id)
        out[-1].append(b)
    return out


def in_process(executions: int, meta_per_set: int, rounds: int, sweep: list[int] | None = None) -> None:
    """Boundary's handler of a binary set, called in this process: no HTTP, TLS or JWT, so a
    change of a few percent in the ingest path stands out of the machine's noise. Each round
    ingests every set fresh into its own generation (made active in turn), ``meta_per_set`` meta
    objects per set, or with ``sweep`` one round per size, ``sweep[i]`` executions per set; a
    last round sends the last generation's sets again (the replay path), and a last line inserts
    the same rows bare (the floor: what ClickHouse alone costs). CPU is this process's own (chdb's
    threads included), with the encoding of each set outside the measured span. With a sweep, a
    least-squares fit splits the CPU into a cost per request (a flush: its ClickHouse inserts and
    queries) and a cost per execution, for the whole handler and for its ClickHouse calls apart."""
    from activities.fact_sink import chunks
    from api.boundary.app import build_runtime
    from api.boundary.bootstrap import bootstrap_development
    from api.boundary.deps import WorkloadCaller
    from api.boundary.routers.projection_batches import _parse_and_ingest_binary
    from api.boundary.settings import BoundarySettings
    from api.common.process_gc import tune_gc
    from formats.batch_set_body import encode_batch_set
    from formats.object_keys import Scope

    tmp = Path(tempfile.mkdtemp(prefix="bench_inproc_"))
    metastore = f"sqlite:///{tmp / 'metastore.sqlite3'}"
    boot = bootstrap_development(metastore)
    scope = Scope(boot.tenant_id, boot.project_id, boot.environment_id)
    generations = list(range(1, (len(sweep) if sweep else rounds) + 1))
    by_gen, n_meta = _worker_sets(
        tmp, scope, executions, dict.fromkeys(generations, 1 if sweep else meta_per_set)
    )
    if sweep:
        by_gen = {g: _by_executions(by_gen[g], n) for g, n in zip(generations, sweep, strict=True)}
    settings = BoundarySettings(
        metastore_url=SecretStr(metastore),
        run_dir=tmp / "boundary",
        clickhouse_path=tmp / "chdb",
        # Each call flushes at once: with the cadence a call that follows another within the
        # second waits for it, and chdb's background merges meanwhile would count as the call's.
        fact_flush_interval_s=0.0,
    )
    runtime = build_runtime(settings, with_workload_identity=False)
    tune_gc()  # as Boundary's main does once it has started
    caller = WorkloadCaller(boot.deployment_id, boot.cell, boot.tenant_id)
    store = runtime.fact_store()
    # CPU of the store's ClickHouse calls by client method, and of the whole store call.
    cpu: dict[str, float] = {}
    # The calling thread's CPU inside the ClickHouse calls: the rest of the handler's thread is
    # Boundary's own Python, which a ClickHouse server would leave in Boundary's process.
    in_calls = [0.0]

    def timed(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0, th0 = time.process_time(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[name] = cpu.get(name, 0.0) + time.process_time() - t0
                if name != "store":
                    in_calls[0] += time.thread_time() - th0

        return call

    store.ingest_many = timed("store", store.ingest_many)  # type: ignore[method-assign]
    calls_of = ("query", "insert", "insert_arrow", "command")
    for name in calls_of:
        setattr(store.client, name, timed(name, getattr(store.client, name)))
    print(f"{executions} executions of 10 spans, {n_meta} meta objects, in process")
    print(
        f"{'round':34} {'requests':>8} {'CPU ms/execution':>17} {'of it the store':>16}"
        + "".join(f" {n:>13}" for n in calls_of)
        + f" {'visible':>8} {'own Python':>14}"
    )
    last = generations[-1]
    size = [f"{n} executions/set" for n in sweep] if sweep else [f"{meta_per_set} meta/set"] * rounds
    plan = [(f"fresh, generation {g}, {size[g - 1]}", g) for g in generations]
    plan.append((f"replay, generation {last}", last))
    fresh: list[tuple[int, int, float, float]] = []  # (requests, executions, CPU, own Python CPU)
    for label, generation in plan:
        if generation > 1 and label.startswith("fresh"):
            runtime.metastore.set_active_generation(scope.environment_id, generation)
        total, own, visible, calls, requests = 0.0, 0.0, 0, 0, 0
        cpu.clear()
        for batches in by_gen[generation]:
            for part in chunks(batches):  # as the sink splits a set into requests
                requests += 1
                wire_items = [
                    (b.header.batch_id, b.header.to_wire(scope.environment_id), b.ipc) for b in part
                ]
                body = encode_batch_set(wire_items).body
                t0, th0, calls0 = time.process_time(), time.thread_time(), in_calls[0]
                result = _parse_and_ingest_binary(runtime, caller, body, None)
                total += time.process_time() - t0
                own += time.thread_time() - th0 - (in_calls[0] - calls0)
                if result.rejected:
                    raise RuntimeError(f"{result.rejected} batches rejected in {label}")
                visible += result.visible
            calls += _calls(batches)
        per = {n: 1000 * v / calls for n, v in cpu.items()}
        print(
            f"{label:34} {requests:8d} {1000 * total / calls:17.3f} {per.get('store', 0.0):16.3f}"
            + "".join(f" {per.get(n, 0.0):13.3f}" for n in calls_of)
            + f" {visible:8d} {1000 * own / calls:14.3f}"
        )
        if label.startswith("fresh"):
            fresh.append((requests, calls, total, own))
    if len({r for r, *_ in fresh}) > 1:
        _print_fit(fresh)
    # The floor: the same rows inserted bare (one insert_arrow per relation per request, as the
    # store inserts them; no checks, no registry), into a database of their own.
    floor = FactStore(store.client, database="floor")
    floor.ensure_schema()
    total, calls = 0.0, 0
    for batches in by_gen[last]:
        for part in chunks(batches):
            by_relation: dict[str, list[pa.Table]] = {}
            for b in part:
                by_relation.setdefault(b.header.relation, []).append(pa.ipc.open_stream(b.ipc).read_all())
            tables = {r: pa.concat_tables(ts).combine_chunks() for r, ts in by_relation.items()}
            t0 = time.process_time()
            for relation, table in tables.items():
                store.client.insert_arrow(relation, table, database=floor.database)
            total += time.process_time() - t0
        calls += _calls(batches)
    print(f"{'floor: rows inserted bare':24} {1000 * total / calls:17.3f}")


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b * x``: (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def _print_fit(fresh: list[tuple[int, int, float, float]]) -> None:
    """CPU per request against executions per request, one point per round: the intercept is
    what a request (a flush) costs whatever its size, the slope what each execution in it adds.
    Split into Boundary's own Python (the handler's thread outside its ClickHouse calls: what
    stays in Boundary's process with a ClickHouse server) and ClickHouse (the calls, on the
    handler's thread and chdb's own, and chdb's merges meanwhile)."""
    print("fit over the fresh rounds: CPU per request = per request + per execution x executions in it")
    parts = {
        "the handler": [(r, e, t) for r, e, t, _ in fresh],
        "  Boundary's own Python": [(r, e, own) for r, e, _, own in fresh],
        "  ClickHouse (embedded)": [(r, e, t - own) for r, e, t, own in fresh],
    }
    fits = {name: _fit([(e / r, 1000 * c / r) for r, e, c in points]) for name, points in parts.items()}
    for name, (per_request, per_exec) in fits.items():
        print(f"  {name:24} {per_request:8.1f} ms per request  {per_exec:6.3f} ms per execution")
    per_request, per_exec = fits["the handler"]
    if per_exec < 0.5:
        need = per_request / (0.5 - per_exec)
        print(f"  0.5 ms per execution from about {need:.0f} executions per request")
    else:
        print("  0.5 ms per execution is out of reach: the cost per execution alone is above it")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("n_batches", nargs="?", type=int, default=1000)
    ap.add_argument("--wire", action="store_true", help="Boundary CPU per execution, JSON vs binary sets")
    ap.add_argument("--executions", type=int, default=2000)
    ap.add_argument("--meta-per-request", type=int, default=1)
    ap.add_argument(
        "--in-process", action="store_true", help="Boundary CPU per execution, binary handler in process"
    )
    ap.add_argument("--rounds", type=int, default=2, help="fresh rounds of --in-process")
    ap.add_argument(
        "--sweep",
        metavar="SIZES",
        help="--in-process: one fresh round per size (executions per set, comma-separated), and a fit",
    )
    ap.add_argument(
        "--registry-growth",
        metavar="SIZES",
        help="a flush's cost at these registry sizes (rows, comma-separated), old layout vs new",
    )
    ap.add_argument("--flush-batches", type=int, default=1000, help="batches per flush of --registry-growth")
    args = ap.parse_args()
    if args.registry_growth:
        registry_growth([int(float(x)) for x in args.registry_growth.split(",")], args.flush_batches, 5)
    elif args.in_process:
        sweep = [int(x) for x in args.sweep.split(",")] if args.sweep else None
        in_process(args.executions, args.meta_per_request, args.rounds, sweep)
    elif args.wire:
        wire(args.executions, args.meta_per_request)
    else:
        main(args.n_batches)
