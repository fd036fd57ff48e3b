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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/publisher.py would shadow the publisher package: put the project root first.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_world import CLI, World, start_stack_here  # noqa: E402

from formats.synth import LiveSynth, SynthConfig  # noqa: E402
from publisher import Publisher, PublisherSettings  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the workload writes")
    ap.add_argument("--rate", type=float, default=20.0, help="executions per second")
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
    finally:
        subprocess.run([*CLI, "stack", "down", "--run-dir", state.run_dir], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
