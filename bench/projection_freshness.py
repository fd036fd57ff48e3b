"""Projection freshness on the embedded stack: RootEnded on local disk -> rows visible to a query.

    .venv/bin/python bench/projection_freshness.py [--seconds 30] [--rate 20]

Starts a stack (tmp run dir, free ports), writes a live synthetic workload into a profile
directory, runs the publisher with the gateway's flush interval (5 s by default), and polls the
projection ledger (written after the execution's facts are visible in ClickHouse, so it is an
upper bound on "visible to a query") every 0.25 s. Freshness of an execution = first time seen
in the ledger - its RootEnded time (the synth's wall-clock end; the segment reaches disk up to one
profiler publish interval later, so the figure is conservative). Prints p50, p95 and max, and the
ratio of p95 to the flush interval (the floor every design pays). Target: p95 under 10 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/publisher.py would shadow the publisher package: put the project root first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_world import CLI, World, start_stack_here  # noqa: E402

from api.dataplane.lance_store import LEDGER, LanceStore  # noqa: E402
from formats.synth import LiveSynth, SynthConfig  # noqa: E402
from publisher import Publisher, PublisherSettings  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ledger_detail(world: World) -> dict[str, tuple[str, float]]:
    """root_id -> (meta key, ledger commit time): which object projected it, and when."""
    dep = world.deployment
    lance = LanceStore.in_bucket(dep.bucket, dep)
    t = lance.read(
        world.scope,
        LEDGER,
        columns=["root_id", "meta_key", "committed_at_ns"],
    )
    return {
        r: (k, n / 1e9)
        for r, k, n in zip(
            t["root_id"].to_pylist(), t["meta_key"].to_pylist(), t["committed_at_ns"].to_pylist(), strict=True
        )
    }


async def workflow_detail(world: World) -> dict[str, tuple[float, float, int]]:
    """meta key -> (workflow start, first project activity's start, project activities run)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    from formats.contracts import ids

    client = await Client.connect(world.state.temporal_address, namespace=world.state.temporal_namespace)
    out: dict[str, tuple[float, float, int]] = {}
    async for wf in client.list_workflows(f"WorkflowType = '{ids.PROJECT_META}'"):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        runs = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
        began = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
        first = began[0].event_time.ToDatetime(tzinfo=UTC).timestamp() if began else float("nan")
        key = wf.id.split("/", 2)[2]
        out[key] = (wf.start_time.timestamp(), first, len(runs))
    return out


def stage_report(world: World, ended: dict[str, float], seen: dict[str, float]) -> None:
    """Median/p95 of each stage: RootEnded -> meta PUT -> workflow start -> ledger commit -> seen."""
    import asyncio

    ledger = ledger_detail(world)
    wfs = asyncio.run(workflow_detail(world))
    put_at: dict[str, float] = {}
    for key in {k for k, _ in ledger.values()}:
        put_at[key] = world.s3.head_object(Bucket=world.state.bucket, Key=key)["LastModified"].timestamp()
    names = ("ended->put", "put->start", "start->activity", "activity->commit", "commit->seen")
    stages: dict[str, list[float]] = {k: [] for k in names}
    retried = 0
    for r, t in ended.items():
        if r not in ledger or r not in seen:
            continue
        key, committed = ledger[r]
        if key not in wfs or key not in put_at:
            continue
        start, began, runs = wfs[key]
        retried += runs > 1
        stages["ended->put"].append(put_at[key] - t)
        stages["put->start"].append(start - put_at[key])
        stages["start->activity"].append(began - start)
        stages["activity->commit"].append(committed - began)
        stages["commit->seen"].append(seen[r] - committed)
    for name, xs in stages.items():
        if xs:
            print(f"  {name:16s} p50 {percentile(xs, 0.5):6.2f} s  p95 {percentile(xs, 0.95):6.2f} s")
    print(f"  executions whose meta workflow ran project_meta_object more than once: {retried}")
    per_object = len(stages["put->start"]) / max(1, len(put_at))
    print(f"  meta objects: {len(put_at)}; executions per meta object: {per_object:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the workload writes")
    ap.add_argument("--rate", type=float, default=20.0, help="executions per second")
    ap.add_argument("--keep-logs", type=Path, default=None, help="copy the stack's logs here before teardown")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="freshness-"))
    state = start_stack_here(base)
    try:
        world = World(state)
        assert state.publisher_token
        root = base / "profiles-v1"
        pub = Publisher(
            PublisherSettings(gateway_url=state.gateway_url, token=state.publisher_token, profile_dir=root)
        )
        interval = None
        seen: dict[str, float] = {}

        def poll() -> None:
            now = time.time()
            for r in world.ledger():
                seen.setdefault(r, now)

        synth = LiveSynth(root, SynthConfig(seed=77, rate_per_second=args.rate, p_long=0.0), tick_s=0.02)
        pub.start()
        synth.start()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            poll()
            time.sleep(0.25)
        truth = synth.stop()
        interval = pub.flush_interval
        ended = {e.execution_id: e.ended_unix_ns / 1e9 for e in truth.executions if e.ended_unix_ns}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not set(ended) <= set(seen):
            poll()
            time.sleep(0.25)
        pub.flush_and_join(10)
        lags = [seen[r] - t for r, t in ended.items() if r in seen]
        missing = len(set(ended) - set(seen))
        print(f"executions ended: {len(ended)}  projected and seen: {len(lags)}  not seen in 60 s: {missing}")
        if lags:
            p50, p95 = percentile(lags, 0.5), percentile(lags, 0.95)
            print(
                f"freshness p50 {p50:.2f} s  p95 {p95:.2f} s  max {max(lags):.2f} s"
                f"  mean {statistics.mean(lags):.2f} s"
            )
            print(f"flush interval {interval:.1f} s; p95 / flush interval = {p95 / interval:.2f}")
            print(f"target p95 < 10 s: {'met' if p95 < 10 else 'NOT met'}")
            print("stages (per execution; S3 LastModified has 1 s resolution):")
            stage_report(world, ended, seen)
    finally:
        subprocess.run([*CLI, "stack", "down", "--run-dir", state.run_dir], capture_output=True, timeout=60)
        if args.keep_logs is not None:
            shutil.copytree(Path(state.run_dir) / "logs", args.keep_logs, dirs_exist_ok=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
