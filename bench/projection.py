"""Projection throughput of one worker process: executions per second (10 spans each, target >= 500).

Real parts: moto (S3) over HTTP in its own process, Lance on moto, Boundary as a subprocess (chdb
behind the batch-set endpoint, real mTLS). Runs the activities directly (no Temporal: its
overhead is one workflow + activity task per meta object) and prints executions/s, time per
phase and per Lance dataset (per execution; summed over threads with --concurrency), and a
baseline measured in the same run: reading + decoding + assembling rows alone (no Boundary, no
Lance writes).

    .venv/bin/python bench/projection.py [--executions 2000] [--index] [--concurrency 8]
        [--profile [--sort cumulative] [--top 40]] [--moto-in-process]
    .venv/bin/python bench/projection.py --shape small [--meta-objects 3000] [--concurrency 8]

--shape big (the default) packs many executions of 10 spans into each meta object; --shape small
is what a process with light traffic writes: one long stream, two meta objects per one-second
publish cycle (meta-pre with the RootStarted, meta-post with one or two RootEnded), and prints
meta objects per second and CPU per meta object for the first and the last 1,000 objects, and
the process's memory after every --window objects (RSS, glibc's and Arrow's shares, the caches).

The bench sets the allocators as the worker does (its settings' defaults: Arrow on the system
pool, at most two glibc arenas); --arrow-pool and --malloc-arena-max measure another choice.

--index runs an IndexAndCompact tick over every dataset first (the schedule's steady state: the
committer then folds new rows into those indexes); --concurrency runs
that many meta objects at once, like the worker's activity threads.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, get_args

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import logging  # noqa: E402

import conftest as fx  # noqa: E402
from bucket_corpus import build_objects, upload  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from activities import projection_activities  # noqa: E402
from activities.maintenance_activities import MaintenanceActivities  # noqa: E402
from activities.projection.batches import build_batch_set, build_batches  # noqa: E402
from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.common.process_gc import tune_gc  # noqa: E402
from api.common.process_memory import ArrowPool, tune_allocators  # noqa: E402
from formats.contracts import projection as c  # noqa: E402
from formats.synth.config import SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402
from worker.settings import TemporalWorkerSettings  # noqa: E402
from worker.temporal_worker import memory_line  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)


class Timed:
    """Wraps a method and adds its wall time and its calling thread's CPU time to a bucket.

    Thread CPU leaves out the work the call waits for on other threads (Lance's Rust threads,
    the committer, the S3 prefetch pool): the worker's CPU minus the activity threads' is that."""

    def __init__(self, totals: dict[str, float], cpu: dict[str, float] | None = None) -> None:
        self.totals = totals
        self.cpu: dict[str, float] = cpu if cpu is not None else defaultdict(float)
        self.lock = threading.Lock()
        self._wrapped: list[tuple[Any, str, Any]] = []
        # (finished at, bucket, thread CPU) per call: where a window's CPU went (--shape small).
        self.events: list[tuple[float, str, float]] = []

    def unwrap(self) -> None:
        """Put the original methods back (the baseline run after the measured one is not counted)."""
        for obj, name, inner in reversed(self._wrapped):
            setattr(obj, name, inner)
        self._wrapped.clear()

    def wrap(self, obj: Any, name: str, bucket: str) -> None:
        inner = getattr(obj, name)
        self._wrapped.append((obj, name, inner))

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            c0 = time.thread_time()
            try:
                return inner(*a, **kw)
            finally:
                cpu = time.thread_time() - c0
                end = time.perf_counter()
                with self.lock:
                    self.totals[bucket] += end - t0
                    self.cpu[bucket] += cpu
                    self.events.append((end, bucket, cpu))

        setattr(obj, name, timed)


def _children() -> dict[str, list[str]]:
    """This process's children (moto, Boundary): their pids by a short name."""
    pids: set[str] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread may end while we look
            pids.update((task / "children").read_text().split())
    out: dict[str, list[str]] = defaultdict(list)
    for pid in pids:
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            out["boundary" if "api.boundary" in cmd else "moto" if "moto" in cmd else cmd[:20]].append(pid)
    return out


def _cpu_s(stat: str) -> float:
    """User plus system CPU seconds from the fields after the name in a /proc ``stat`` file."""
    fields = stat.split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> dict[str, float]:
    """CPU seconds used so far by this process's children (moto, Boundary), by a short name."""
    out: dict[str, float] = defaultdict(float)
    for name, pids in _children().items():
        for pid in pids:
            with contextlib.suppress(OSError):
                out[name] += _cpu_s(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1])
    return out


def _tasks_cpu(pid: str = "self") -> Iterator[tuple[int, str, float]]:
    """(thread id, OS thread name, CPU seconds so far) of each of a process's live threads."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread may end while we look
            comm, stat = (task / "stat").read_text().rsplit(")", 1)
            yield int(task.name), comm.split("(", 1)[1], _cpu_s(stat)


def _threads_cpu(pid: str = "self") -> dict[str, float]:
    """CPU seconds used so far by a process's live threads (this one's by default), by OS thread
    name (Python's threads all carry the interpreter's name; Lance's Rust pools and ClickHouse's
    name theirs). A thread that has ended is not counted: the difference of two readings leaves out
    threads that ended between."""
    out: dict[str, float] = defaultdict(float)
    for _, name, cpu in _tasks_cpu(pid):
        out[name.rstrip("0123456789-")] += cpu
    return out


class ThreadCensus:
    """This process's CPU by thread over a window, threads that ended during it included.

    Python's threads carry the interpreter's OS name, and the committer's group leaders live only
    for their group, so a reading of the live threads at the end misses most of the worker's
    Python work outside the activity threads. The census reads every thread's CPU from /proc at
    the start and the end of the window, naming Python's by their ``threading`` name (a leader's
    key dropped) and the others (Lance's Rust pools) by their OS name; a Python thread that starts
    in the window adds its own CPU as its ``run`` returns, in case it ends before the window does.
    A thread that started before the window and ended in it is not counted (the pools here live
    on). The main thread, which only waits for the activity threads, is not counted."""

    def __init__(self) -> None:
        self._ended: dict[str, float] = defaultdict(float)
        self._ended_ids: set[int] = set()
        self._lock = threading.Lock()
        self._open = False
        self._run = threading.Thread.run
        self._at_start: dict[int, tuple[str, float]] = {}
        self._at_end: dict[int, tuple[str, float]] = {}

    @staticmethod
    def _group(name: str) -> str:
        for prefix in ("lance-commit", "lance-fold", "group-commit", "ThreadPoolExecutor", "projection-io"):
            if name.startswith(prefix):
                return prefix
        return name.rstrip("0123456789-_")

    def _read(self) -> dict[int, tuple[str, float]]:
        python = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        main = threading.main_thread().native_id
        return {
            tid: (self._group(python.get(tid) or name), cpu) for tid, name, cpu in _tasks_cpu() if tid != main
        }

    def __enter__(self) -> ThreadCensus:
        census, run = self, self._run

        def counted(thread: threading.Thread) -> None:
            c0 = time.thread_time()
            try:
                run(thread)
            finally:
                with census._lock:
                    if census._open:
                        census._ended[census._group(thread.name)] += time.thread_time() - c0
                        census._ended_ids.add(threading.get_native_id())

        self._at_start = self._read()
        self._open = True
        threading.Thread.run = counted  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        threading.Thread.run = self._run  # type: ignore[method-assign]
        with self._lock:
            self._open = False
            self._at_end = {
                tid: reading for tid, reading in self._read().items() if tid not in self._ended_ids
            }

    def by_name(self) -> dict[str, float]:
        """CPU seconds by thread name over the window."""
        out: dict[str, float] = defaultdict(float, self._ended)
        for tid, (name, cpu) in self._at_end.items():
            out[name] += cpu - self._at_start.get(tid, (name, 0.0))[1]
        return dict(out)


def _child_threads_cpu(child: str) -> dict[str, float]:
    """:func:`_threads_cpu` of the child named ``child`` (as :func:`_children` names it). In
    Boundary, the interpreter's name is Python's threads (HTTP, checks, registry) and the rest are
    embedded ClickHouse's pools; a chdb query also runs partly on the Python thread that calls it,
    so the split is a floor for ClickHouse's share."""
    out: dict[str, float] = defaultdict(float)
    for pid in _children().get(child, []):
        with contextlib.suppress(OSError):
            for name, cpu in _threads_cpu(pid).items():
                out[name] += cpu
    return out


class NullSink:
    def active_generation(self, environment_id: str) -> int:
        return 1

    def put_batch(self, scope: Any, batch: Any) -> None:
        return None

    def put_batches(self, scope: Any, batches: Any) -> None:
        return None


def print_windows(
    per_object: list[tuple[float, float, float, int]],
    start: float,
    window: int,
    events: list[tuple[float, str, float]],
    cpu_start: float,
) -> None:
    """Meta objects per second and activity-thread CPU per object, first and last ``window``
    objects, that CPU by phase (the calls that finished inside each window), and the worker's CPU
    over all its threads per object (``per_object``: finished at, thread CPU, process CPU then,
    executions). Objects finish out of order (a meta-pre object, with no RootEnded, is quick), so
    a window's mix of objects with and without executions moves: each window also prints its
    executions and the activity threads' CPU per execution."""
    done = sorted(per_object)
    window = min(window, len(done) // 2) or 1
    figures = []
    phases: list[dict[str, float]] = []
    all_cpu: list[float] = []
    # Each window starts where the object before it finished (the projection's start for the first).
    opening = (start, 0.0, cpu_start, 0)
    for name, part, (before, _, cpu_before, _) in (
        ("first", done[:window], opening),
        ("last", done[-window:], done[-window - 1] if len(done) > window else opening),
    ):
        wall = part[-1][0] - before
        cpu_ms = 1000 * sum(cpu for _, cpu, _, _ in part) / len(part)
        executions = sum(n for _, _, _, n in part)
        figures.append((len(part) / wall, cpu_ms))
        by_phase: dict[str, float] = defaultdict(float)
        for at, bucket, cpu in events:
            if before < at <= part[-1][0]:
                by_phase[bucket] += 1000 * cpu / len(part)
        phases.append(by_phase)
        # The worker's CPU (every thread) from the window's start to its last object.
        all_ms = 1000 * (part[-1][2] - cpu_before) / len(part)
        all_cpu.append(all_ms)
        print(
            f"  {name} {len(part)} meta objects: {len(part) / wall:.1f} objects/s, {cpu_ms:.1f} ms CPU/object"
            f" in the activity threads, {all_ms:.1f} ms in all the worker's threads; {executions}"
            f" executions ({sum(1 for *_, n in part if n)} objects hold any),"
            f" {cpu_ms * len(part) / max(1, executions):.2f} ms activity-thread CPU per execution"
        )
    (rate0, cpu0), (rate1, cpu1) = figures
    print(
        f"  ratio last/first: objects/s {rate1 / rate0:.2f}, CPU/object {cpu1 / cpu0:.2f}"
        f" (activity threads), {all_cpu[1] / all_cpu[0]:.2f} (all threads)"
    )
    first, last = phases
    for bucket in sorted(set(first) | set(last), key=lambda b: -last.get(b, 0.0)):
        a, b = first.get(bucket, 0.0), last.get(bucket, 0.0)
        print(f"    {bucket:26s} first {a:6.2f}  last {b:6.2f} ms CPU/object  ({b / a if a else 0:.2f}x)")


def print_batch_paths(captured: list[Any], n: int) -> None:
    """Public batches per meta object (build_batch_set) against per execution (build_batches), same run.

    Both give the same batches (tests/projection/test_batch_identity.py); thread CPU, three
    alternating rounds, the lowest of each."""
    per_meta: list[float] = []
    per_execution: list[float] = []
    for _ in range(3):
        c0 = time.thread_time()
        for scope, generation, projections in captured:
            build_batch_set(projections, scope, generation)
        per_meta.append(time.thread_time() - c0)
        c0 = time.thread_time()
        for scope, generation, projections in captured:
            seen: dict[tuple[str, str], Any] = {}
            for p in projections:
                for b in build_batches(p, scope, generation):
                    seen.setdefault((b.header.batch_id, b.header.content_digest), b)
        per_execution.append(time.thread_time() - c0)
    new, old = min(per_meta), min(per_execution)
    print(
        f"public batches: per meta object {1000 * new / max(1, n):.3f} ms/execution,"
        f" per execution (baseline) {1000 * old / max(1, n):.3f} ms/execution; ratio {new / old:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--executions", type=int, default=2000)
    ap.add_argument("--shape", choices=("big", "small"), default="big")
    ap.add_argument("--meta-objects", type=int, default=3000, help="--shape small: stream length")
    ap.add_argument("--window", type=int, default=1000, help="--shape small: objects per window")
    ap.add_argument("--profile", action="store_true", help="cProfile the baseline run")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--moto-in-process", action="store_true", help="moto in this process (shares the GIL)")
    ap.add_argument(
        "--index", action="store_true", help="index values_v1 first (the schedule's steady state)"
    )
    ap.add_argument("--concurrency", type=int, default=1, help="meta objects projected at once (worker: 8)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument(
        "--write-base-ttl",
        type=float,
        default=None,
        help="LanceStore.write_base_ttl_s (0: every write looks for the newest version first)",
    )
    ap.add_argument(
        "--probe-every-fragment",
        action="store_true",
        help="key probes and lookups by CID read every unindexed fragment, this store's own appends too",
    )
    ap.add_argument("--profile-out", help="also dump the baseline's cProfile stats to this file")
    ap.add_argument(
        "--default-gc", action="store_true", help="keep Python's GC thresholds (the worker tunes them)"
    )
    worker = TemporalWorkerSettings.model_fields
    ap.add_argument(
        "--arrow-pool",
        choices=get_args(ArrowPool),
        default=worker["arrow_memory_pool"].default,
        help="pyarrow's memory pool (default: the worker's)",
    )
    ap.add_argument(
        "--malloc-arena-max",
        type=int,
        default=worker["malloc_arena_max"].default,
        help="glibc arenas at most, 0: glibc's default (default: the worker's)",
    )
    args = ap.parse_args()
    # As the worker does first thing (its settings' defaults unless told otherwise).
    arrow_pool = tune_allocators(args.malloc_arena_max, args.arrow_pool)
    if not args.default_gc:
        tune_gc()  # as the worker does once it has started
    tmp = Path(tempfile.mkdtemp())
    port = fx.free_port()
    # S3 is another process in production: by default moto runs as one too, so its Python
    # request handling does not share the worker's GIL (--moto-in-process for the old setup).
    moto: Any = None
    moto_proc: subprocess.Popen[bytes] | None = None
    if args.moto_in_process:
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        moto.start()
    else:
        moto_proc = fx.start_moto_process(port)
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )  # type: ignore[call-arg]
    fx.FACT_FLUSH_INTERVAL_S = None  # Boundary's production flush cadence
    gen = fx.boundary.__wrapped__(factory)  # type: ignore[attr-defined]
    boundary = next(gen)
    try:
        m = fx.Moto(f"http://127.0.0.1:{port}")
        s3 = m.client("s3")
        bucket = "bench-projection"
        s3.create_bucket(Bucket=bucket)
        if args.shape == "small":
            cfg = SynthConfig.long_run(args.meta_objects, seed=7, rate_per_second=1.0)
        else:
            # 10 spans per execution: 1 root + 6-7 LLM + 2 selected calls.
            cfg = SynthConfig(
                seed=7,
                executions=args.executions,
                llm_calls=(7, 7),
                selected_calls=(2, 2),
                rate_per_second=200,
            )
        truth = synthesize(tmp / "profile", cfg)
        spans = sum(len(e.spans) for e in truth.executions) / max(1, len(truth.executions))
        up = build_objects(tmp / "profile", boundary.scope)
        upload(s3, bucket, up)
        lance = fx.make_lance(m, bucket, **ProjectionSettings().lance_store_options())  # the worker's
        if args.write_base_ttl is not None:
            lance.write_base_ttl_s = args.write_base_ttl
        if args.probe_every_fragment:
            lance._may_hold = lambda uri, ds, values: None  # type: ignore[method-assign]
        totals: dict[str, float] = defaultdict(float)
        client = boundary.client()
        # The worker's own settings: the committer at its production cadence.
        acts = fx.make_activities(s3, bucket, lance, client, boundary.scope.tenant_id, ProjectionSettings())
        t = Timed(totals)
        t.wrap(acts, "_send_batches", "boundary PUT batches")
        t.wrap(acts, "_commit_lance", "lance commit")
        t.wrap(acts, "_value_lookup", "values prefetch")
        # Nested inside the three above: the parts the worker's CPU goes to.
        t.wrap(acts, "_input_beat", "read (GET, decode, walk)")
        t.wrap(acts.sink, "put_batches", "  boundary client set")
        t.wrap(projection_activities, "assemble_execution", "assemble rows")
        t.wrap(projection_activities, "build_batch_set", "  build public batches")
        t.wrap(projection_activities, "private_tables_of", "  build private tables")
        merge = lance.merge

        def timed_merge(scope: Any, dataset: str, table: Any) -> Any:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return merge(scope, dataset, table)
            finally:
                with t.lock:
                    merges[dataset] += time.perf_counter() - t0
                    merge_cpu[dataset] += time.thread_time() - c0

        merges: dict[str, float] = defaultdict(float)
        merge_cpu: dict[str, float] = defaultdict(float)  # the calling thread's own CPU
        lance.merge = timed_merge  # type: ignore[method-assign]
        t0 = time.perf_counter()
        for k in up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(k))
        packs_s = time.perf_counter() - t0
        if args.index:
            # Steady state: the IndexAndCompact schedule has built every index of the datasets that
            # hold rows (the committer folds new rows into them, all but the n-gram's).
            sc = boundary.scope
            MaintenanceActivities(acts).index_and_compact(
                c.IndexInput(c.ScopeRef(sc.tenant_id, sc.project_id, sc.environment_id))
            )
        merges.clear()
        t0 = time.perf_counter()
        # Worker CPU (all its threads): steadier than wall time on a shared machine.
        c0 = time.process_time()
        kids0 = _children_cpu()
        boundary_threads0 = _child_threads_cpu("boundary")
        projection_t0, projection_c0 = t0, c0
        outcomes: Counter[str] = Counter()
        # Per meta object: finished at, its thread's CPU, and the worker's CPU so far over all its
        # threads (a window's whole cost: the committer's upkeep and Lance's pools included).
        per_object: list[tuple[float, float, float, int]] = []

        # The process's memory after every --window objects: whether it levels off (caches full)
        # or keeps growing (an allocator holding what was freed).
        memory: list[str] = []

        def project(key: str) -> c.ProjectMetaResult:
            c1 = time.thread_time()
            result = acts.project_meta_object(c.ProjectMetaInput(key, 1))
            with t.lock:
                per_object.append(
                    (time.perf_counter(), time.thread_time() - c1, time.process_time(), len(result.outcomes))
                )
                if len(per_object) % args.window == 0:
                    memory.append(f"  after {len(per_object)} objects: {memory_line(acts)}")
            return result

        # The worker runs activities on a thread pool (8 threads): --concurrency mirrors it.
        with ThreadCensus() as census, ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            for result in pool.map(project, up.meta_keys):
                for o in result.outcomes:
                    outcomes[o.outcome] += 1
        total = time.perf_counter() - t0
        cpu = time.process_time() - c0
        kids = {k: v - kids0.get(k, 0.0) for k, v in _children_cpu().items()}
        boundary_threads = {
            k: v - boundary_threads0.get(k, 0.0) for k, v in _child_threads_cpu("boundary").items()
        }
        n = sum(outcomes.values())
        t.unwrap()

        # Baseline in the same run: the same reads and row building, no Boundary, no Lance writes.
        base = ProjectionActivities(
            s3=s3,
            bucket=bucket,
            lance=lance,
            sink=NullSink(),
            settings=ProjectionSettings(),
            tenant_id=boundary.scope.tenant_id,
        )
        base._commit_lance = lambda *a, **kw: 0  # type: ignore[method-assign]
        # The baseline's meta objects' executions, for the batch-building comparison below.
        captured: list[Any] = []
        send = base._send_batches

        def capture(scope: Any, generation: int, projections: Any) -> int:
            captured.append((scope, generation, projections))
            return send(scope, generation, projections)

        base._send_batches = capture  # type: ignore[method-assign]
        prof = cProfile.Profile() if args.profile else None
        t0 = time.perf_counter()
        c0 = time.process_time()
        if prof:
            prof.enable()
        for k in up.meta_keys:
            base.project_meta_object(c.ProjectMetaInput(k, 1))
        if prof:
            prof.disable()
        base_s = time.perf_counter() - t0
        base_cpu = time.process_time() - c0
        if prof:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
            if args.profile_out:
                prof.dump_stats(args.profile_out)

        print(f"executions projected: {n} ({dict(outcomes)}), mean spans/execution {spans:.1f}")
        arenas = args.malloc_arena_max or "glibc's default"
        print(f"memory (MiB; glibc arenas at most {arenas}, Arrow pool {arrow_pool}):")
        print("\n".join(memory) or f"  at the end: {memory_line(acts)}")
        if args.shape == "small":
            print_windows(per_object, projection_t0, args.window, t.events, projection_c0)
        print(f"meta objects: {len(up.meta_keys)}, packs: {len(up.pack_keys)} (pack ingest {packs_s:.2f} s)")
        print(
            f"projection ({args.concurrency} activity threads): {total:.2f} s"
            f" -> {n / total:.0f} executions/s (target >= 500);"
            f" worker CPU {cpu:.2f} s ({1000 * cpu / max(1, n):.2f} ms/execution)"
        )
        activity_cpu = sum(cpu for _, cpu, _, _ in per_object)
        print(
            f"  of which activity threads {1000 * activity_cpu / max(1, n):.2f} ms/execution,"
            f" other threads (Lance, committer, S3 pool, sink) {1000 * (cpu - activity_cpu) / max(1, n):.2f}"
        )
        print(
            "  the worker's threads by name, ended ones included (ThreadPoolExecutor: the activity"
            " threads): "
            + ", ".join(
                f"{k} {1000 * v / max(1, n):.2f}"
                for k, v in sorted(census.by_name().items(), key=lambda kv: -kv[1])
                if v * 1000 / max(1, n) >= 0.01
            )
            + " ms/execution"
        )
        cs = acts.committer.stats
        print(
            f"  Lance committer: {cs.commits} commits, {cs.compactions} upkeep rounds (compaction and"
            f" lookup-index folds) taking {cs.maintenance_s:.1f} s of its threads' wall time,"
            f" {cs.folds} index folds beside the commits taking {cs.fold_s:.1f} s"
        )
        print(
            "  CPU of the other processes in the same window: "
            + ", ".join(
                f"{k} {v:.2f} s ({1000 * v / max(1, n):.2f} ms/execution)" for k, v in sorted(kids.items())
            )
        )
        if boundary_threads:
            # Where ClickHouse is a server (docker-compose, production), its CPU is not Boundary's.
            python = sum(v for k, v in boundary_threads.items() if k.startswith("python"))
            print(
                f"  boundary's live threads: Python's {1000 * python / max(1, n):.2f} ms/execution"
                f" (HTTP, checks, registry; chdb's calls from them too), embedded ClickHouse's pools"
                f" {1000 * (sum(boundary_threads.values()) - python) / max(1, n):.2f}: "
                + ", ".join(
                    f"{k} {1000 * v / max(1, n):.2f}"
                    for k, v in sorted(boundary_threads.items(), key=lambda kv: -kv[1])
                    if not k.startswith("python") and v * 1000 / max(1, n) >= 0.02
                )
            )
        # Per-phase figures are summed over threads (thread-seconds); their share is of the sum.
        # Names indented by two spaces are phases inside another phase: counted once, in it.
        rest = total - sum(secs for name, secs in totals.items() if not name.startswith(" "))
        for name, secs in sorted(totals.items(), key=lambda x: -x[1]):
            own_cpu = f"  thread CPU {1000 * t.cpu[name] / max(1, n):6.2f} ms/execution"
            print(f"  {name:24s} {secs:7.2f} s  {1000 * secs / max(1, n):6.2f} ms/execution{own_cpu}")
        for name, secs in sorted(merges.items(), key=lambda x: -x[1]):
            print(
                f"    lance merge {name:24s} {secs:7.2f} s  {1000 * secs / max(1, n):6.2f} ms/execution"
                f"  thread CPU {1000 * merge_cpu[name] / max(1, n):6.2f} ms/execution"
            )
        if args.concurrency == 1:
            print(f"  {'other (in no phase)':24s} {rest:7.2f} s  {1000 * rest / max(1, n):6.2f} ms/execution")
        print(
            f"baseline (read+assemble only, no Boundary/Lance): {base_s:.2f} s"
            f" -> {n / base_s:.0f} executions/s, CPU {1000 * base_cpu / max(1, n):.2f} ms/execution;"
            f" ratio full/baseline = {total / base_s:.2f}"
        )
        print_batch_paths(captured, n)
        acts.close()
        base.close()
        client.close()
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)
        if moto is not None:
            moto.stop()
        if moto_proc is not None:
            moto_proc.terminate()
            moto_proc.wait(10)


if __name__ == "__main__":
    main()
