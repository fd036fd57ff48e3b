"""Soak: many synthetic processes through the whole embedded stack for minutes; nothing lost or duplicated.

    .venv/bin/python bench/soak.py [--minutes 10] [--streams 20] [--rate 100] [--small-streams 10]
        [--small-rate 1.5] [--kill-at 0.5] [--load-procs 2] [--keep-logs DIR]

The real path: each stream is one synthetic profiler process (``LiveSynth``, the real writer's
one-second cycle) with its own ``Publisher`` → gateway → moto S3 → SQS → bridge → Temporal →
2 worker processes (the stack's own, plus a second ``python -m worker.temporal_worker`` started
with the stack's worker environment) → Boundary (chdb) + Lance on moto. ``--small-streams`` of
them have the light-traffic shape (``SynthConfig.long_run``: small call trees, two meta objects per
cycle holding one or two executions, a second engine starting part-way); the others the default
call trees at the rate left over, so together they offer ``--rate`` executions per second. The
streams run in ``--load-procs`` OS processes, so the load generator does not share one GIL.

At ``--kill-at`` of the run the second worker process is killed with SIGKILL and started again
(the bench's own, not the stack's, so the figures do not depend on the stack supervisor's restart
policy). When the load
stops the bench waits for the drain (every execution of the ground truth in the ledger, the queue
empty, no ProjectMetaObject workflow running), then checks the ground truth (the synth's own list
of executions) against what the stores hold:

* every execution in the ledger exactly once (one row per root id, none extra) and no key twice
  in any Lance dataset;
* per stream, Boundary's root threads and calls (resident queries, what a user's query sees)
  equal the truth's executions and spans;
* every meta object written was shipped; no quarantine marker, nothing in the dead-letter queue.

Freshness of an execution = its ledger row's ``committed_at_ns`` (stamped once its facts are
visible in Boundary and its private rows are committed to Lance, the ledger's own commit follows
within one committer interval) minus its RootEnded time as the synth wrote it (the segment reaches
disk at the end of that publish cycle, up to 1 s later, so the figure is conservative), cut by
stage (publish, deliver, project: ``freshness_stages``) and the activity's phases per meta object
from the workers' timing lines (``phase_times``). CPU is read
from /proc per process group for every part of the stack, both workers, the load generator and
this bench, and divided by the executions and meta objects projected in the same window. The
baseline in the same run is the first minute of load against the last: per-execution cost and
freshness must not grow. Resident memory is read the same way, per component and each worker
apart, and printed at the start of the load, after a minute, at half-time and at the end, with its
growth per minute over each half; the workers log where theirs is every minute (RSS, glibc's and
Arrow's shares, Lance's session, the indexes: docs/projection-runtime.md, "Worker", "Memory").
Lance commits and conflicts are counted from Lance's own commit events in the workers' logs
(``LANCE_LOG=info``), as ``tests/projection_io/test_several_workers.py`` does: a ``transaction``
file deleted is a commit attempt that lost the race to another process and was rebased by Lance;
``data`` files deleted were rewritten by a re-run merge. The bridge's own counts (signals sent,
workflows found completed, visibility extensions) come from its heartbeat file.

Exits 1 when anything was lost, duplicated, quarantined or left pending.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# bench/publisher.py would shadow the publisher package: put the project root first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from activities.projection_activities import PHASE_LINES  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.boundary.facts.store import FLUSH_LINE  # noqa: E402
from formats.synth import LiveSynth, SynthConfig  # noqa: E402
from publisher import Publisher, PublisherSettings  # noqa: E402

NS = 1_000_000_000
# The workers' committer keeps versions this long (the stack's default): a data file deleted
# later than this after it was written is the version cleanup's, never a merge's.
RETAIN_S = float(ProjectionSettings.model_fields["commit_retain_s"].default)


# --- the load: one synthetic process and its publisher per stream ------------------------------------


@dataclass(frozen=True)
class StreamSpec:
    name: str
    shape: str  # "small" (SynthConfig.long_run) or "default"
    seed: int
    rate: float  # executions started per second
    profile_dir: str


def stream_config(spec: StreamSpec, minutes: float) -> SynthConfig:
    if spec.shape == "small":
        # Two meta objects per cycle when anything is pending; the second engine starts once the
        # stream has written about half the meta objects it will write in the run.
        expected_meta = max(4, int(minutes * 60 * 1.6))
        return SynthConfig.long_run(expected_meta, seed=spec.seed, rate_per_second=spec.rate)
    return SynthConfig(seed=spec.seed, processes=1, rate_per_second=spec.rate)


def plan_streams(base: Path, streams: int, rate: float, small: int, small_rate: float) -> list[StreamSpec]:
    if streams < 1 or not 0 <= small <= streams:
        raise SystemExit(f"--streams must be >= 1 and --small-streams within [0, {streams}]")
    left = rate - small * small_rate
    others = streams - small
    if others and left <= 0:
        raise SystemExit(f"--rate {rate} leaves nothing for the {others} default-shape streams")
    if not others and abs(left) > 1e-9:
        raise SystemExit("every stream is small: --rate must equal --small-streams * --small-rate")
    specs = []
    for i in range(streams):
        shape = "small" if i < small else "default"
        r = small_rate if shape == "small" else left / others
        specs.append(StreamSpec(f"s{i:02d}", shape, 9100 + i, r, str(base / "profiles" / f"s{i:02d}")))
    return specs


def run_load(
    conn: Connection, gateway_url: str, token: str, minutes: float, specs: list[StreamSpec], ship_s: float
) -> None:
    """A load-generator process: start every stream, run until told to stop, flush, report the truth.

    Each publisher gets up to ``ship_s`` to ship what its stream wrote: a process that outlives
    its load ships its backlog, and an overloaded stack leaves one (the publishers' flushes miss
    their deadline while the stack's moto and gateway share the machine)."""
    synths = [LiveSynth(s.profile_dir, stream_config(s, minutes), tick_s=0.05) for s in specs]
    pubs = [
        Publisher(PublisherSettings(gateway_url=gateway_url, token=token, profile_dir=Path(s.profile_dir)))
        for s in specs
    ]
    for p in pubs:
        p.start()
    for s in synths:
        s.start()
    conn.send("started")
    conn.recv()
    truths = [s.stop(timeout=120) for s in synths]
    # Every publisher's last flush ships what its stream wrote when it stopped.
    with ThreadPoolExecutor(len(pubs)) as pool:
        ended = list(pool.map(lambda p: p.flush_and_join(ship_s), pubs))
    out = []
    for spec, truth, pub, done in zip(specs, truths, pubs, ended, strict=True):
        stats = pub.stats()
        out.append(
            {
                "name": spec.name,
                "shape": spec.shape,
                "stream": truth.streams[0],
                "meta_segments": truth.meta_segments,
                "orphans": len(truth.orphans),
                "executions": [
                    (e.execution_id, e.ended_unix_ns, len(e.spans), e.status, e.index_state)
                    for e in truth.executions
                ],
                "publisher_ended": done,
                "publisher_errors": dict(stats.get("errors", {})),
                "publisher_skipped": dict(stats.get("skipped", {})),
            }
        )
    conn.send(out)


# --- pure figures -----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Truth:
    """The ground truth of every stream, as the load processes reported it."""

    streams: list[dict[str, Any]]

    def executions(self) -> dict[str, tuple[str, int | None, int, str, str]]:
        """execution id -> (stream, ended_unix_ns, spans, status, index_state)."""
        return {e[0]: (s["stream"], e[1], e[2], e[3], e[4]) for s in self.streams for e in s["executions"]}

    def per_stream(self) -> dict[str, tuple[int, int]]:
        """stream -> (executions, spans)."""
        return {s["stream"]: (len(s["executions"]), sum(e[2] for e in s["executions"])) for s in self.streams}


@dataclass
class Reconciled:
    written: int
    projected: int
    lost: list[str]
    duplicated: dict[str, int]  # root id -> ledger rows
    extra: list[str]  # in the ledger, not in the truth


def reconcile(truth_ids: Iterable[str], ledger_roots: list[str]) -> Reconciled:
    """Ledger rows against the truth: every execution exactly once, nothing else."""
    want = set(truth_ids)
    counts = Counter(ledger_roots)
    return Reconciled(
        written=len(want),
        projected=len(want & set(counts)),
        lost=sorted(want - set(counts)),
        duplicated={r: n for r, n in counts.items() if n > 1},
        extra=sorted(set(counts) - want),
    )


def stream_mismatches(
    truth: dict[str, tuple[int, int]], executions: dict[str, int], calls: dict[str, int]
) -> list[str]:
    """Streams whose Boundary counts differ from the truth (executions, spans)."""
    out = []
    for stream, (n_exec, n_spans) in sorted(truth.items()):
        got = (executions.get(stream, 0), calls.get(stream, 0))
        if got != (n_exec, n_spans):
            out.append(f"{stream}: truth {n_exec} executions/{n_spans} calls, Boundary {got[0]}/{got[1]}")
    out += [f"{s}: in Boundary, not in the truth" for s in sorted(set(executions) - set(truth))]
    return out


_TRIMMED = re.compile(r"malloc_trim returned (\d+) MiB")
_COMMITTED = re.compile(r'event="committed" uri="[^"]*/(\w+)\.lance"[^\n]*operation="(\w+)"')


@dataclass
class LanceEvents:
    commits: Counter[tuple[str, str]] = field(default_factory=Counter)  # (dataset, operation)
    files: Counter[str] = field(default_factory=Counter)  # "mode type"
    # Data files by name: when each was written and when each was deleted (log time, seconds).
    data_created: dict[str, float] = field(default_factory=dict)
    data_deleted: dict[str, float] = field(default_factory=dict)
    outer_retries: int = 0
    append_recommits: int = 0  # appends whose commit lost every race, committed again
    groups_split: int = 0  # committer groups whose merge lost every race, merged caller by caller
    maintenance_skipped: int = 0  # committer upkeep rounds (compaction, lookup folds) that lost a race
    compactions: int = 0  # compactions Lance started (its "compacting" event), and those whose commit lost
    compactions_lost: int = 0
    folds_skipped: int = 0  # the fold threads' folds that lost a race
    leases_missed: int = 0  # folds that found another process's index lease (or lost taking one)
    activities: int = 0  # "projected executions=..." lines: project activities that finished
    failed_attempts: int = 0  # activity attempts that failed back to Temporal (the SDK's warning)
    trims: int = 0  # malloc_trim calls that returned memory, and how much (MiB)
    trimmed_mib: float = 0.0

    def add(self, other: LanceEvents) -> None:
        """Take in another log's events: counts summed, per-file times merged."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, dict):  # Counter.update adds, dict.update merges
                mine.update(theirs)
            else:
                setattr(self, f.name, mine + theirs)


def lance_events(lines: Iterable[str]) -> LanceEvents:
    """Lance's commit and file events and the worker's own conflict lines, from a worker log."""
    ev = LanceEvents()
    for line in lines:
        if "lance::events::file_audit" in line:
            mode = re.search(r'mode="(\w+)"', line)
            kind = re.search(r'type="(\w+)"', line)
            if mode and kind:
                ev.files[f"{mode.group(1)} {kind.group(1)}"] += 1
                path, at = re.search(r'path="([^"]+)"', line), _log_time(line)
                if kind.group(1) == "data" and path and at is not None:
                    (ev.data_created if mode.group(1) == "create" else ev.data_deleted)[path.group(1)] = at
        elif 'event="committed"' in line:
            m = _COMMITTED.search(line)
            if m:
                ev.commits[(m.group(1), m.group(2))] += 1
        elif "commit conflict, retrying against the newest version" in line:
            ev.outer_retries += 1
        elif "committing its fragments again" in line:
            ev.append_recommits += 1
        elif "merging its" in line and "callers apart" in line:
            ev.groups_split += 1
        elif "Completing activity as failed" in line:
            ev.failed_attempts += 1
        elif m := _TRIMMED.search(line):
            ev.trims += 1
            ev.trimmed_mib += float(m.group(1))
        elif 'event="compacting"' in line:
            ev.compactions += 1
        elif "Compaction commit failed" in line:
            ev.compactions_lost += 1
        elif "maintenance skipped" in line:
            ev.maintenance_skipped += 1
        elif "index fold skipped" in line:
            ev.folds_skipped += 1
        elif "index lease not taken" in line or "the index lease stayed held by another" in line:
            ev.leases_missed += 1
        elif "projected executions=" in line:
            ev.activities += 1
    return ev


_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z ")


def _log_time(line: str) -> float | None:
    """Seconds since the epoch of a Rust log line's UTC timestamp (``[2026-12-04T17:40:22Z INFO ...``)."""
    m = _LOG_TIME.match(line)
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) if m else None


def rewritten_data_files(created: dict[str, float], deleted: dict[str, float], retain_s: float) -> int:
    """Data files a re-run merge rewrote: deleted less than ``retain_s`` after they were written.

    Lance's audit log reports every data file deleted, also those the committer's version cleanup
    removes once the fragments holding them were compacted away more than ``commit_retain_s``
    earlier; no file that old is a merge's. A file written by the other worker counts too (both
    logs are read), and one whose writing is not in the logs is counted as cleanup."""
    return sum(1 for path, at in deleted.items() if path in created and at - created[path] < retain_s)


def per_minute(times_s: list[float], start: float, minutes: int) -> list[int]:
    out = [0] * minutes
    for t in times_s:
        i = int((t - start) // 60)
        if 0 <= i < minutes:
            out[i] += 1
    return out


# --- sampling the running stack ------------------------------------------------------------------------


def proc_stat() -> dict[int, tuple[int, float, float]]:
    """pid -> (process group, CPU seconds, resident MB) for every process on the machine we may read."""
    tick = os.sysconf("SC_CLK_TCK")
    page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
    out: dict[int, tuple[int, float, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # Fields from the state on (proc(5) numbers them from 3): pgrp 5, utime 14, stime 15, rss 24.
            fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick
            out[int(entry.name)] = (int(fields[2]), cpu, int(fields[21]) * page_mb)
    return out


class CpuLedger:
    """CPU seconds per component, kept for processes that have died (the killed worker); and
    resident memory per process group of the live ones (``memory_groups``: group -> label), so
    each worker's own memory is seen apart."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[str, float]] = {}

    def sample(
        self, groups: dict[int, str], pids: dict[int, str], memory_groups: dict[int, str]
    ) -> tuple[dict[str, float], dict[str, float]]:
        rss: dict[str, float] = defaultdict(float)
        for pid, (pgid, cpu, mb) in proc_stat().items():
            name = pids.get(pid) or groups.get(pgid)
            if name is not None:
                self.last[pid] = (name, cpu)
            label = memory_groups.get(pgid)
            if label is not None:
                rss[label] += mb
        totals: dict[str, float] = defaultdict(float)
        for name, cpu in self.last.values():
            totals[name] += cpu
        return dict(totals), dict(rss)


@dataclass
class Sample:
    t: float
    cpu: dict[str, float]
    rss: dict[str, float]  # resident MB per process group: "worker 1" (the stack's), "worker 2", ...
    visible: int
    in_flight: int
    running: int  # ProjectMetaObject workflows running
    completed: int  # ProjectMetaObject workflows completed so far
    load1: float


class Temporal:
    """Counts of ProjectMetaObject workflows, from one client on a private event loop."""

    def __init__(self, address: str, namespace: str) -> None:
        from temporalio.client import Client

        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(Client.connect(address, namespace=namespace))

    def count(self, status: str) -> int:
        from formats.contracts import ids

        q = f"WorkflowType = '{ids.PROJECT_META}' AND ExecutionStatus = '{status}'"
        return int(self.loop.run_until_complete(self.client.count_workflows(q)).count)

    def trigger_index(self, tenant_id: str, project_id: str, environment_id: str) -> None:
        """Run the environment's IndexAndCompact schedule once now (as a tick of it would)."""
        from formats.contracts import ids

        handle = self.client.get_schedule_handle(ids.index_schedule_id(tenant_id, project_id, environment_id))
        self.loop.run_until_complete(handle.trigger())

    def index_ticks(self) -> list[tuple[str, str, float | None]]:
        """Every IndexAndCompact run so far: (start time, status, seconds it took or None if running)."""
        from formats.contracts import ids

        async def runs() -> list[tuple[str, str, float | None]]:
            out = []
            async for w in self.client.list_workflows(f"WorkflowType = '{ids.INDEX_AND_COMPACT}'"):
                took = (w.close_time - w.start_time).total_seconds() if w.close_time else None
                status = w.status.name if w.status is not None else "?"
                out.append((w.start_time.strftime("%H:%M:%S"), status, took))
            return sorted(out)

        return self.loop.run_until_complete(runs())

    def meta_starts(self, generation: int) -> dict[str, float]:
        """Meta key -> when its ProjectMetaObject workflow was first started (epoch seconds)."""
        from formats.contracts import ids

        prefix = ids.project_meta_id(generation, "")

        async def runs() -> dict[str, float]:
            out: dict[str, float] = {}
            async for w in self.client.list_workflows(f"WorkflowType = '{ids.PROJECT_META}'"):
                if w.id.startswith(prefix):
                    key, t = w.id[len(prefix) :], w.start_time.timestamp()
                    out[key] = min(t, out.get(key, t))
            return out

        return self.loop.run_until_complete(runs())

    def close(self) -> None:
        self.loop.close()


# --- the run -----------------------------------------------------------------------------------------


def start_second_worker(state: Any, log_path: Path, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A second worker process with exactly the environment the stack gives its own worker."""
    from worker.stack.launcher import _common_env  # the stack's one definition of that environment

    env = (
        _common_env(state)
        | extra_env
        | {"BAML_STUDIO_WORKER_HEARTBEAT_FILE": str(Path(state.run_dir) / "worker2.heartbeat")}
    )
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "worker.temporal_worker"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )


def stack_pids(run_dir: str) -> dict[str, int]:
    from worker.stack.state import load_stack_state

    state = load_stack_state(run_dir)
    if state is None:
        return {}
    out = {name: part.pid for name, part in state.parts.items() if part.pid}
    out["launcher"] = state.launcher_pid
    return out


def queue_depth(sqs: Any, url: str | None) -> tuple[int, int]:
    from worker.sqs_bridge import queue_counts

    if not url:
        return 0, 0
    q = queue_counts(sqs, url)
    return q["visible"], q["in_flight"]


@dataclass
class Children:
    """What the bench starts beside the stack, stopped whatever happens."""

    worker2: subprocess.Popen[bytes] | None = None
    worker2_env: dict[str, str] = field(default_factory=dict)  # the soak's settings for the stack
    loads: list[tuple[Any, Connection]] = field(default_factory=list)
    failed_starts: int = 0  # restarts of worker 2 that exited before polling

    def stop(self) -> None:
        for proc, conn in self.loads:
            conn.close()
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        w = self.worker2
        if w is not None and w.poll() is None:
            os.killpg(w.pid, signal.SIGTERM)
            try:
                w.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long the load runs")
    ap.add_argument("--streams", type=int, default=20, help="synthetic processes, each with its publisher")
    ap.add_argument("--rate", type=float, default=100.0, help="executions per second, all streams together")
    ap.add_argument("--small-streams", type=int, default=None, help="streams of the long_run shape (half)")
    ap.add_argument("--small-rate", type=float, default=1.5, help="executions/s of each small stream")
    ap.add_argument(
        "--kill-at", type=float, default=0.5, help="kill -9 a worker at this fraction (<0: never)"
    )
    ap.add_argument("--load-procs", type=int, default=2, help="OS processes running the streams")
    ap.add_argument("--sample-s", type=float, default=5.0, help="sampling period")
    ap.add_argument("--drain-timeout", type=float, default=900.0, help="seconds to wait for the drain")
    ap.add_argument(
        "--index-interval",
        type=float,
        default=None,
        help="IndexAndCompact schedule period in s (default: the deployment's, 3600)",
    )
    ap.add_argument(
        "--index-after",
        type=float,
        default=20.0,
        help="trigger the IndexAndCompact schedule once this many s into the load (<0: never)",
    )
    ap.add_argument("--keep-logs", type=Path, default=None, help="copy the stack's logs here before teardown")
    args = ap.parse_args()
    small = args.streams // 2 if args.small_streams is None else args.small_streams

    from e2e_world import CLI, World, start_stack_here

    base = Path(tempfile.mkdtemp(prefix="soak-"))
    specs = plan_streams(base, args.streams, args.rate, small, args.small_rate)
    # Lance's commit events (lance::events) in the workers' logs: the conflict figures; and the
    # workers' memory line every minute (what holds their RSS).
    env = {"LANCE_LOG": "info", "BAML_STUDIO_WORKER_MEMORY_LOG_INTERVAL_S": "60"}
    if args.index_interval is not None:
        env["BAML_STUDIO_PROJECTION_INDEX_INTERVAL_S"] = str(args.index_interval)
    state = start_stack_here(base, env=env)
    # The second worker gets them too (until 2026-12-05 its log had no Lance events, so its
    # commits and conflicts were missing from the figures).
    children = Children(worker2_env=env)
    world = World(state)
    try:
        return soak(args, specs, state, world, children)
    finally:
        children.stop()
        world.boundary.close()
        subprocess.run([*CLI, "stack", "down", "--run-dir", state.run_dir], capture_output=True, timeout=120)
        if args.keep_logs is not None:
            shutil.copytree(Path(state.run_dir) / "logs", args.keep_logs, dirs_exist_ok=True)
        shutil.rmtree(base, ignore_errors=True)


def soak(
    args: argparse.Namespace, specs: list[StreamSpec], state: Any, world: Any, children: Children
) -> int:
    from api.dataplane.lance_store import DATASETS, LEDGER, LanceStore
    from worker.cli_ops import quarantined_keys
    from worker.stack.state import load_stack_state

    run_dir = Path(state.run_dir)
    logs = run_dir / "logs"
    worker2_log = logs / "worker2.log"
    worker2 = children.worker2 = start_second_worker(state, worker2_log, children.worker2_env)

    beat = run_dir / "worker2.heartbeat"
    deadline = time.monotonic() + 60
    while not beat.exists():
        if worker2.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"second worker did not start; see {worker2_log}")
        time.sleep(0.5)

    temporal = Temporal(state.temporal_address, state.temporal_namespace)
    cpu = CpuLedger()
    me = os.getpid()
    ctx = mp.get_context("spawn")  # Lance and the clients are not fork-safe
    shares = [specs[i :: args.load_procs] for i in range(args.load_procs) if specs[i :: args.load_procs]]
    assert state.publisher_token
    for share in shares:
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=run_load,
            args=(child, state.gateway_url, state.publisher_token, args.minutes, share, args.drain_timeout),
        )
        proc.start()
        children.loads.append((proc, parent))
    loads = children.loads
    for _, conn in loads:
        if conn.recv() != "started":
            raise SystemExit("a load process did not start")
    load_pids = {proc.pid: "load" for proc, _ in loads if proc.pid}

    def components() -> tuple[dict[int, str], dict[int, str]]:
        groups = {pid: name for name, pid in stack_pids(state.run_dir).items()}
        assert children.worker2 is not None
        groups[children.worker2.pid] = "worker"
        return groups, {**load_pids, me: "bench"}

    samples: list[Sample] = []

    def take() -> Sample:
        now = load_stack_state(state.run_dir)
        if now is None or now.status == "failed":
            raise SystemExit(f"the stack failed: {now.error if now else 'no stack.json'}")
        groups, pids = components()
        visible, in_flight = queue_depth(world.sqs, state.queue_url)
        assert children.worker2 is not None
        second = children.worker2.pid
        memory_groups = {
            g: ("worker 2" if g == second else "worker 1") if name == "worker" else name
            for g, name in groups.items()
        }
        s = Sample(
            time.time(),
            *cpu.sample(groups, pids, memory_groups),
            visible,
            in_flight,
            temporal.count("Running"),
            temporal.count("Completed"),
            os.getloadavg()[0],
        )
        samples.append(s)
        return s

    t_start = time.time()
    take()

    def progress(s: Sample, tail: str) -> None:
        """One line of the run's progress table (the header below), every 30 s."""
        print(
            f"  {s.t - t_start:5.0f}  {s.visible:7d}  {s.in_flight:9d}  {s.running:10d}"
            f"  {s.completed:7d}  {s.load1:5.2f}  {tail}",
            flush=True,
        )

    duration = args.minutes * 60
    kill_at = t_start + duration * args.kill_at if args.kill_at >= 0 else None
    index_at = t_start + args.index_after if args.index_after >= 0 else None
    killed: tuple[int, float] | None = None
    restarted: tuple[int, float] | None = None
    print(
        f"soak: {len(specs)} streams ({sum(s.shape == 'small' for s in specs)} small), "
        f"{sum(s.rate for s in specs):.0f} executions/s offered, {args.minutes:g} min, 2 workers, "
        f"{len(shares)} load processes; run dir {run_dir}",
        flush=True,
    )
    print("   t(s)  SQS vis  in-flight  wf running  wf done  load1  RSS MB worker 1/2", flush=True)
    last_print = 0.0
    while time.time() < t_start + duration:
        time.sleep(max(0.0, min(args.sample_s, t_start + duration - time.time())))
        s = take()
        if index_at is not None and s.t >= index_at:
            index_at = None
            sc = world.scope
            temporal.trigger_index(sc.tenant_id, sc.project_id, sc.environment_id)
            print(f"  triggered the IndexAndCompact schedule at t={s.t - t_start:.0f} s")
        if kill_at is not None and killed is None and s.t >= kill_at:
            # The bench's own worker: the stack's supervisor gives a restarted part 30 s to become
            # healthy and otherwise stops the whole stack, which a loaded machine can exceed.
            victim = children.worker2
            assert victim is not None
            take()  # the victim's CPU up to the kill
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
            killed = (victim.pid, time.time())
            print(f"  killed worker 2 (pid {victim.pid}) with SIGKILL at t={killed[1] - t_start:.0f} s")
            beat.unlink(missing_ok=True)
            children.worker2 = start_second_worker(state, worker2_log, children.worker2_env)
        restarted = restarted or restart_seen(killed, children, beat, state, worker2_log)
        if s.t - last_print >= 30:
            last_print = s.t
            progress(s, f"{s.rss.get('worker 1', 0):6.0f}/{s.rss.get('worker 2', 0):.0f}")
    t_stop = time.time()
    for _, conn in loads:
        conn.send("stop")
    print("load stopped; the publishers ship what is left", flush=True)
    streams: list[dict[str, Any]] = []
    for proc, conn in loads:
        while not conn.poll(args.sample_s):  # the stack works on meanwhile: keep sampling it
            s = take()
            if s.t - last_print >= 30:
                last_print = s.t
                progress(s, "shipping")
        streams += conn.recv()
        proc.join(30)
    t_flushed = time.time()
    truth = Truth(streams)
    executions = truth.executions()
    print(f"last flushes done {t_flushed - t_stop:.1f} s after the load stopped; draining", flush=True)

    dep = world.deployment
    lance = LanceStore.in_bucket(dep.bucket, dep)
    scope = world.scope

    def ledger() -> Any:
        return lance.read(
            scope, LEDGER, columns=["root_id", "committed_at_ns", "meta_key"], filter="generation = 1"
        )

    drained_at = None
    drain_deadline = time.monotonic() + args.drain_timeout
    while time.monotonic() < drain_deadline:
        s = take()
        restarted = restarted or restart_seen(killed, children, beat, state, worker2_log)
        roots = set(ledger()["root_id"].to_pylist())
        if set(executions) <= roots and s.visible == 0 and s.in_flight == 0 and s.running == 0:
            drained_at = time.time()
            break
        if s.t - last_print >= 30:
            last_print = s.t
            progress(s, f"in ledger {len(roots & set(executions))}/{len(executions)}")
        time.sleep(args.sample_s)
    final = take()
    ticks = temporal.index_ticks()
    started_at = temporal.meta_starts(1)
    temporal.close()

    # --- checks against the ground truth ---
    table = ledger()
    rec = reconcile(executions, table["root_id"].to_pylist())
    lance_dups: dict[str, int] = {}
    for name, spec in DATASETS.items():
        t = lance.read(scope, name, columns=list(spec.keys))
        distinct = t.group_by(list(spec.keys)).aggregate([]).num_rows if t.num_rows else 0
        if t.num_rows != distinct:
            lance_dups[name] = t.num_rows - distinct
    by_stream_exec = resident_counts(
        world, "SELECT process_euid, count() AS n FROM threads_v1 WHERE is_root GROUP BY process_euid"
    )
    by_stream_calls = resident_counts(
        world, "SELECT process_euid, count() AS n FROM calls_v1 GROUP BY process_euid"
    )
    mismatches = stream_mismatches(truth.per_stream(), by_stream_exec, by_stream_calls)
    marked = quarantined_keys(world.s3, dep.bucket, dep.scope(scope.environment_id))
    dlq_visible, dlq_in_flight = queue_depth(world.sqs, state.dead_letter_queue_url)
    stored_at = stored_meta(world, scope)
    shipped = shipped_meta(stored_at)
    meta_written = {s["stream"]: s["meta_segments"] for s in streams}
    unshipped = {k: v - shipped.get(k, 0) for k, v in meta_written.items() if v != shipped.get(k, 0)}
    not_complete = Counter((st, ix) for _, _, _, st, ix in executions.values() if ix != "complete")
    pub_errors: Counter[str] = Counter()
    for s in streams:
        pub_errors.update(s["publisher_errors"])

    # --- figures ---
    committed = dict(zip(table["root_id"].to_pylist(), table["committed_at_ns"].to_pylist(), strict=True))
    lags = {r: committed[r] / NS - e[1] / NS for r, e in executions.items() if r in committed and e[1]}
    ended_at = {r: e[1] / NS for r, e in executions.items() if e[1]}
    minutes = max(1, int(args.minutes))
    n_exec = len(executions)
    n_meta = sum(meta_written.values())
    load_s = t_stop - t_start
    in_load = [committed[r] / NS for r in committed if t_start <= committed[r] / NS <= t_stop]
    print()
    # Without a drain an execution missing from the ledger may still be on its way: not "lost".
    missing = "lost" if drained_at else "not projected when the drain timed out"
    print(
        f"executions written {n_exec}, projected {rec.projected}, {missing}={len(rec.lost)} "
        f"duplicated={len(rec.duplicated)} extra in ledger={len(rec.extra)}"
    )
    print(
        f"  orphans in the truth: {sum(s['orphans'] for s in streams)}; not complete by the reader's rules: "
        f"{dict(not_complete) or 0}"
    )
    print(
        f"  Lance keys held twice: {lance_dups or 0}; Boundary per stream: "
        f"{mismatches or 'equal to the truth'}"
    )
    print(
        f"  meta objects written {n_meta}, shipped {sum(shipped.values())}, unshipped {unshipped or 0}; "
        f"publisher errors {dict(pub_errors) or 0}"
    )
    print(
        f"  quarantined {len(marked)} {Counter(v['reason'] for v in marked.values()) if marked else ''}; "
        f"dead-letter queue {dlq_visible + dlq_in_flight}; drained "
        f"{'after %.0f s' % (drained_at - t_flushed) if drained_at else 'NOT within the timeout'}"
        f" (queue {final.visible}+{final.in_flight}, running workflows {final.running})"
    )
    meta_in_load = samples_at(samples, t_stop).completed - samples[0].completed
    print(
        f"sustained: {len(in_load) / load_s:.1f} executions/s projected during the {load_s:.0f} s of load "
        f"(offered {n_exec / load_s:.1f}/s written); {meta_in_load / load_s:.1f} meta objects/s projected "
        f"({n_meta / load_s:.1f}/s written)"
    )
    if lags:
        xs = list(lags.values())
        print(
            f"freshness (RootEnded -> queryable): p50 {percentile(xs, 0.5):.2f} s"
            f"  p95 {percentile(xs, 0.95):.2f} s  max {max(xs):.2f} s"
        )
        meta_of = dict(zip(table["root_id"].to_pylist(), table["meta_key"].to_pylist(), strict=True))
        stages = freshness_stages(
            ended_at, meta_of, stored_at, started_at, {r: t / NS for r, t in committed.items()}
        )
        print(
            f"  by stage, p50 / p95 over {len(stages['project'])} executions: "
            + "; ".join(
                f"{k} {percentile(v, 0.5):.2f} / {percentile(v, 0.95):.2f} s" for k, v in stages.items()
            )
            + " (publish: RootEnded to the meta object stored; deliver: to its workflow started;"
            " project: to the ledger's stamp)"
        )
    if killed:
        around = [v for r, v in lags.items() if killed[1] - 30 <= ended_at.get(r, 0) <= killed[1] + 60]
        back = restarted[1] - killed[1] if restarted else float("nan")
        p50, p95 = percentile(around, 0.5), percentile(around, 0.95)
        worst = max(around, default=float("nan"))
        print(
            f"  executions ended from 30 s before to 60 s after the kill: p50 {p50:.2f} s p95 {p95:.2f} s"
            f" max {worst:.2f} s; worker restarted after {back:.1f} s"
        )
    cpu_report(samples, t_start, t_stop, final, committed, n_exec, lags, ended_at, minutes)
    memory_report(samples, t_start, t_stop, killed[1] if killed else None)
    phase_report(logs)
    conflict_report(logs)
    flush_report(logs / "boundary.log")
    bridge_report(run_dir / "bridge.heartbeat")
    runs = [f"{at} {status} {'-' if took is None else f'{took:.0f}'}" for at, status, took in ticks]
    print(f"IndexAndCompact runs (start, outcome, seconds): {'; '.join(runs) or 'none'}")
    ok = not (
        rec.lost
        or rec.duplicated
        or rec.extra
        or lance_dups
        or mismatches
        or marked
        or unshipped
        or dlq_visible
        or dlq_in_flight
        or drained_at is None
    )
    print(
        f"RESULT: {'nothing lost or duplicated' if ok else 'FAILED'}; {missing}={len(rec.lost)} "
        f"duplicated={len(rec.duplicated) + sum(lance_dups.values())}"
    )
    if rec.lost:
        print(f"  {missing} (first 10):", rec.lost[:10])
    return 0 if ok else 1


def restart_seen(
    killed: tuple[int, float] | None, children: Children, beat: Path, state: Any, log_path: Path
) -> tuple[int, float] | None:
    """(pid, time) once the restarted second worker has written its first heartbeat.

    A worker that exits before its first heartbeat is started again (seen: on a loaded machine its
    start-up schedule update hit Temporal's RPC timeout and the process exited)."""
    w = children.worker2
    if killed is None or w is None:
        return None
    if not beat.exists():
        if w.poll() is not None:
            children.failed_starts += 1
            print(f"  worker 2 exited with code {w.returncode} before polling; starting it again")
            children.worker2 = start_second_worker(state, log_path, children.worker2_env)
        return None
    after = time.time() - killed[1]
    print(
        f"  worker 2 restarted (pid {w.pid}), polling {after:.1f} s after the kill"
        f" ({children.failed_starts} start(s) that exited first)"
    )
    return w.pid, time.time()


def samples_at(samples: list[Sample], t: float) -> Sample:
    """The last sample taken at or before ``t`` (the first one if none)."""
    best = samples[0]
    for s in samples:
        if s.t <= t:
            best = s
    return best


def resident_counts(world: Any, sql: str) -> dict[str, int]:
    table = world.boundary.resident_query(sql, world.scope.environment_id, generation=1, catalog_version=1)
    return dict(zip(table["process_euid"].to_pylist(), table["n"].to_pylist(), strict=True))


def stored_meta(world: Any, scope: Any) -> dict[str, float]:
    """Meta objects in the bucket: key -> when S3 stored it (epoch seconds; moto's listing gives
    whole seconds, so this is up to a second early)."""
    from formats.object_keys import evidence_prefix
    from worker.bridge.routing import kind_of

    pages = world.s3.get_paginator("list_objects_v2").paginate(
        Bucket=world.state.bucket, Prefix=evidence_prefix(scope) + "streams/"
    )
    return {
        obj["Key"]: obj["LastModified"].timestamp()
        for page in pages
        for obj in page.get("Contents", [])
        if kind_of(obj["Key"]) == "meta"
    }


def shipped_meta(keys: Iterable[str]) -> dict[str, int]:
    """Meta objects per stream."""
    from formats.object_keys import InvalidKeyError, parse_evidence_key

    out: Counter[str] = Counter()
    for key in keys:
        with contextlib.suppress(InvalidKeyError):
            euid = parse_evidence_key(key).euid
            if euid:
                out[euid] += 1
    return dict(out)


def freshness_stages(
    ended_at: dict[str, float],
    meta_of: dict[str, str],
    stored_at: dict[str, float],
    started_at: dict[str, float],
    committed_at: dict[str, float],
) -> dict[str, list[float]]:
    """Each execution's freshness cut at the moments the stack records (seconds): RootEnded to its
    meta object stored in S3 (the writer's cycle and the publisher's flush interval), stored to its
    ProjectMetaObject workflow started (the notification, SQS and the bridge), started to the
    ledger's commit stamp (reads, assembly, Boundary, Lance). S3's stamp is in whole seconds, so
    half a second is added to it: each of the first two stages is then within half a second."""
    out: dict[str, list[float]] = {"publish": [], "deliver": [], "project": []}
    for root, done in committed_at.items():
        key = meta_of.get(root)
        if root not in ended_at or key not in stored_at or key not in started_at:
            continue
        stored = stored_at[key] + 0.5
        out["publish"].append(stored - ended_at[root])
        out["deliver"].append(started_at[key] - stored)
        out["project"].append(done - started_at[key])
    return out


def window_figures(
    samples: list[Sample],
    t0: float,
    t1: float,
    committed: dict[str, int],
    lags: dict[str, float],
    ended_at: dict[str, float],
) -> dict[str, Any]:
    """What one window cost: CPU per component, executions and meta objects projected, freshness."""
    a, b = samples_at(samples, t0), samples_at(samples, t1)
    n_exec = sum(1 for v in committed.values() if a.t < v / NS <= b.t)
    n_meta = b.completed - a.completed
    cpu = {k: b.cpu.get(k, 0.0) - a.cpu.get(k, 0.0) for k in b.cpu}
    fresh = [lags[r] for r, t in ended_at.items() if a.t < t <= b.t and r in lags]
    return {
        "t0": a.t,
        "t1": b.t,
        "executions": n_exec,
        "meta": n_meta,
        "cpu": cpu,
        "fresh": fresh,
        "depth": b.visible + b.in_flight,
        "running": b.running,
    }


def cpu_report(
    samples: list[Sample],
    t_start: float,
    t_stop: float,
    final: Sample,
    committed: dict[str, int],
    n_exec: int,
    lags: dict[str, float],
    ended_at: dict[str, float],
    minutes: int,
) -> None:
    print("per minute of load (executions and meta objects projected in it; CPU in ms per execution):")
    print("  min  exec/s  meta/s   worker boundary     moto temporal    other  fresh p50/p95  queue  running")
    rows = []
    for i in range(minutes):
        w = window_figures(samples, t_start + 60 * i, t_start + 60 * (i + 1), committed, lags, ended_at)
        rows.append(w)
        span = max(1e-9, w["t1"] - w["t0"])
        per = {k: 1000 * v / max(1, w["executions"]) for k, v in w["cpu"].items()}
        other = sum(v for k, v in per.items() if k not in ("worker", "boundary", "moto", "temporal"))
        fresh = f"{percentile(w['fresh'], 0.5):6.2f}/{percentile(w['fresh'], 0.95):6.2f}"
        cols = [per.get(k, 0.0) for k in ("worker", "boundary", "moto", "temporal")] + [other]
        print(
            f"  {i + 1:3d}  {w['executions'] / span:6.1f}  {w['meta'] / span:6.1f}  "
            + "  ".join(f"{c:7.2f}" for c in cols)
            + f"  {fresh}  {w['depth']:5d}  {w['running']:7d}"
        )
    whole = window_figures(samples, t_start, final.t, committed, lags, ended_at)
    print(
        f"whole run, load and drain ({whole['t1'] - whole['t0']:.0f} s, {whole['executions']} executions, "
        f"{whole['meta']} meta objects projected), CPU per component:"
    )
    total = 0.0
    for name, secs in sorted(whole["cpu"].items(), key=lambda kv: -kv[1]):
        total += secs
        print(
            f"  {name:12s} {secs:8.1f} s  {1000 * secs / max(1, whole['executions']):6.2f} ms/execution"
            f"  {1000 * secs / max(1, whole['meta']):6.2f} ms/meta object"
        )
    print(
        f"  {'all':12s} {total:8.1f} s  {1000 * total / max(1, whole['executions']):6.2f} ms/execution"
        f"  {1000 * total / max(1, whole['meta']):6.2f} ms/meta object"
        f"  ({total / max(1e-9, whole['t1'] - whole['t0']):.2f} cores)"
    )
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]

        def worker_ms(w: dict[str, Any]) -> float:
            return 1000 * w["cpu"].get("worker", 0.0) / max(1, w["executions"])

        def all_ms(w: dict[str, Any]) -> float:
            return 1000 * sum(w["cpu"].values()) / max(1, w["executions"])

        w0, w1 = worker_ms(first), worker_ms(last)
        print(
            f"baseline, first minute vs last minute of load: worker CPU {w0:.2f} vs "
            f"{w1:.2f} ms/execution (ratio {w1 / max(1e-9, w0):.2f}); "
            f"all processes {all_ms(first):.2f} vs {all_ms(last):.2f} "
            f"(ratio {all_ms(last) / max(1e-9, all_ms(first)):.2f}); freshness p95 "
            f"{percentile(first['fresh'], 0.95):.2f} vs {percentile(last['fresh'], 0.95):.2f} s"
        )
    seen = samples[:: max(1, len(samples) // 12)]
    print(f"load average (1 min) over the run: {', '.join(f'{s.load1:.1f}' for s in seen)}")


def memory_report(samples: list[Sample], t_start: float, t_stop: float, killed_at: float | None) -> None:
    """Resident memory per component over the load: does it level off? Worker 1 runs the whole
    load; worker 2 is restarted at the kill, so its figures start again there."""
    print("resident memory (MB) per component: at the start of load, after 1 min, at half-time, at the end;")
    print("  peak; growth per minute over the first and the second half of the load")
    half = t_start + (t_stop - t_start) / 2
    marks = [t_start, t_start + 60, half, t_stop]
    for label in sorted({k for s in samples for k in s.rss}):
        during = [s for s in samples if t_start <= s.t <= t_stop and label in s.rss]
        if len(during) < 2:
            continue
        at = [samples_at(during, m).rss.get(label, 0.0) for m in marks]
        growth = []
        for a, b in ((t_start, half), (half, t_stop)):
            if label == "worker 2" and killed_at is not None and a < killed_at <= b:
                a = killed_at + 60  # the restarted process, once it has started
            part = [s for s in during if a <= s.t <= b]
            span = (part[-1].t - part[0].t) / 60 if len(part) >= 2 else 0.0
            growth.append((part[-1].rss[label] - part[0].rss[label]) / span if span else float("nan"))
        print(
            f"  {label:10s} "
            + " ".join(f"{v:7.0f}" for v in at)
            + f"  peak {max(s.rss[label] for s in during):7.0f}"
            + f"  growth {growth[0]:+6.1f} / {growth[1]:+6.1f} MB/min"
        )


def bridge_report(heartbeat: Path) -> None:
    """The bridge's own counts, from its heartbeat file: messages handled and deleted, workflows it
    found already completed, the values_landed signals it sent (each one a workflow task for the run
    it wakes), visibility extensions. Seen on 2026-12-06: 92 signals for 849 messages."""
    try:
        beat = json.loads(heartbeat.read_text())
    except (OSError, ValueError):
        print(f"bridge: no heartbeat to read at {heartbeat}")
        return
    handled = beat.get("delivery", {}).get("handled", 0)
    counts = {k: v for k, v in beat.items() if k not in ("pid", "at", "queue", "dlq", "handling", "delivery")}
    print(f"bridge: {handled} messages handled; {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}")


def flush_report(log: Path) -> None:
    """Boundary's flushes into ClickHouse, from the store's minute lines (``FlushTally``): the
    insert rate its cadence (``fact_flush_interval_s``) held, and rows per insert. The last
    minute's flushes, not yet reported when the run ends, are not in it."""
    flushes = seconds = requests = inserts = rows = 0
    if log.exists():
        with log.open(errors="replace") as f:
            for m in filter(None, map(FLUSH_LINE.search, f)):
                n, secs, reqs, ins, per = map(int, m.groups())
                flushes, seconds, requests, inserts = (
                    flushes + n,
                    seconds + secs,
                    requests + reqs,
                    inserts + ins,
                )
                rows += ins * per
    if not flushes:
        print("Boundary flushes: no minute line in its log")
        return
    print(
        f"Boundary flushes into ClickHouse: {flushes} in {seconds} s ({flushes / max(seconds, 1):.2f}/s,"
        f" each a ClickHouse insert per relation) for {requests} batch-set requests;"
        f" {rows / max(inserts, 1):.0f} rows per fact-table insert on average"
    )


def phase_times(lines: Iterable[str]) -> dict[str, list[float]]:
    """Seconds per meta object in each phase of its activity, from the workers' timing lines
    (one of each per meta object; the patterns live beside the lines' formats)."""
    out: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        for pattern in PHASE_LINES:
            if m := pattern.search(line):
                groups = m.groups()
                for name, secs in zip(groups[::2], groups[1::2], strict=True):
                    out[name].append(float(secs))
                break
    return dict(out)


def phase_report(logs: Path) -> None:
    """Where the project stage of freshness goes, phase by phase (both workers): reading the
    objects, resolving values and assembling, Boundary (its cadence included), the datasets'
    Lance commits (the committer's cadence included), then the ledger's, after the stamp."""
    times: dict[str, list[float]] = defaultdict(list)
    for path in (logs / "worker.log", logs / "worker2.log"):
        if path.exists():
            with path.open(errors="replace") as f:
                for name, xs in phase_times(f).items():
                    times[name] += xs
    if not times:
        print("activity phases: no timing line in the workers' logs")
        return
    print(
        "activity phases per meta object, p50 / p95: "
        + "; ".join(f"{k} {percentile(v, 0.5):.2f} / {percentile(v, 0.95):.2f} s" for k, v in times.items())
    )


def conflict_report(logs: Path) -> None:
    """Lance commits and conflicts, both workers, from Lance's events in their logs."""
    total = LanceEvents()
    for path in (logs / "worker.log", logs / "worker2.log"):
        if not path.exists():
            continue
        with path.open(errors="replace") as f:
            ev = lance_events(f)
        total.add(ev)
    by_op: Counter[str] = Counter()
    for (_, op), n in total.commits.items():
        by_op[op] += n
    merges = sum(n for op, n in by_op.items() if op not in ("Overwrite", "Rewrite", "CreateIndex"))
    lost = total.files["delete transaction"]
    rewritten = rewritten_data_files(total.data_created, total.data_deleted, RETAIN_S)
    print(
        f"Lance commits (both workers): {dict(by_op)}; merge commits {merges} for {total.activities} "
        f"project_meta_object activities finished"
    )
    print(
        f"  commit attempts that lost a race and were rebased by Lance: {lost} "
        f"({lost / max(1, merges):.1%} of merge commits); data files rewritten by a re-run merge: "
        f"{rewritten} of {total.files['create data']} written ({total.files['delete data'] - rewritten} more"
        f" deleted by the version cleanup, {RETAIN_S:.0f} s or more after they were written); outer retries "
        f"{total.outer_retries}; appends committed again after losing every race "
        f"{total.append_recommits}; group merges that lost every race, merged caller by caller "
        f"{total.groups_split}; committer upkeep rounds / index folds that lost a race "
        f"{total.maintenance_skipped} / {total.folds_skipped}; folds that found another's index lease "
        f"{total.leases_missed}; compactions whose commit lost a race {total.compactions_lost} of"
        f" {total.compactions}"
    )
    print(
        f"activity attempts failed back to Temporal (both workers): {total.failed_attempts};"
        f" malloc_trim returned memory {total.trims} times, {total.trimmed_mib:.0f} MiB in all"
    )


if __name__ == "__main__":
    sys.exit(main())
