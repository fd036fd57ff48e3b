"""The sweep's cost per tick as a silent stream's history grows.

    .venv/bin/python bench/sweep.py [--sizes 500,2000,8000]

For each size, one stream of that many meta objects in the real writer's shape
(``SynthConfig.long_run``: one process, two small meta objects per publish cycle), shipped to moto
(its own process) in a bucket of its own, then three sweep ticks with a silence limit of 0 (the
stream is silent):

1. a worker that knows nothing and finds no state in the bucket: the stream's whole listing and
   every meta segment, which is what every worker start and, for every stream, every hour cost
   before the sweep kept its state in the bucket (2026-12-06, evening);
2. the same worker again (its memory);
3. a worker that starts, with the state the first tick wrote.

Per tick it prints the S3 GETs and LISTs, this process's CPU (the sweep; its few abandoned
executions are projected through the real activities, with Lance commits and Boundary left out)
and moto's, then how each tick's cost grows from the smallest stream to the largest (1.0: flat).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))
sys.path.insert(0, str(ROOT / "bench"))

import logging  # noqa: E402

import conftest as fx  # noqa: E402
from bucket_corpus import build_objects, upload  # noqa: E402
from proc_cpu import process_cpu  # noqa: E402
from projection import NullSink  # type: ignore[import-not-found]  # noqa: E402

from activities.maintenance_activities import MaintenanceActivities  # noqa: E402
from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from formats.contracts import ScopeRef  # noqa: E402
from formats.contracts import projection as c  # noqa: E402
from formats.object_keys import Scope  # noqa: E402
from formats.synth.config import SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)

TICKS = ("new worker, no state", "same worker", "new worker, state")


def sweep_ticks(m: Any, moto_pid: int, size: int, tmp: Path) -> list[dict[str, float]]:
    s3 = m.client("s3")
    bucket = f"bench-sweep-{size}"
    s3.create_bucket(Bucket=bucket)
    scope = Scope("bench", "sweep", f"env{size}")
    synthesize(tmp / f"profile{size}", SynthConfig.long_run(size, seed=size))
    up = build_objects(tmp / f"profile{size}", scope)
    upload(s3, bucket, up)
    acts = ProjectionActivities(
        s3=s3,
        bucket=bucket,
        lance=fx.make_lance(m, bucket),
        sink=NullSink(),
        settings=ProjectionSettings(),
        tenant_id=scope.tenant_id,
    )
    acts._commit_lance = lambda *a, **kw: 0  # type: ignore[method-assign]
    calls: Counter[str] = Counter()
    s3.meta.events.register("before-parameter-build.s3", lambda model, **_: calls.update([model.name]))
    ref = ScopeRef(scope.tenant_id, scope.project_id, scope.environment_id)
    first = MaintenanceActivities(acts)
    out = []
    for worker in (first, first, MaintenanceActivities(acts)):
        calls.clear()
        cpu0, moto0, wall0 = time.process_time(), process_cpu(moto_pid), time.perf_counter()
        result = worker.sweep(c.SweepInput(ref, silence_limit_s=0))
        out.append(
            {
                "meta": float(len(up.meta_keys)),
                "gets": float(calls["GetObject"]),
                "lists": float(calls["ListObjectsV2"]),
                "cpu_ms": (time.process_time() - cpu0) * 1000,
                "moto_ms": (process_cpu(moto_pid) - moto0) * 1000,
                "wall_ms": (time.perf_counter() - wall0) * 1000,
                "abandoned": float(len(result.outcomes)),
            }
        )
    acts.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="500,2000,8000", help="meta objects of the stream, per run")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp())
    port = fx.free_port()
    moto_proc = fx.start_moto_process(port)
    try:
        m = fx.Moto(f"http://127.0.0.1:{port}")
        runs = {size: sweep_ticks(m, moto_proc.pid, size, tmp) for size in sizes}
    finally:
        moto_proc.terminate()
        moto_proc.wait(10)
    header = ("meta objects", 12), ("tick", 22), ("GETs", 6), ("LISTs", 6), ("CPU ms", 8), ("moto ms", 8)
    print(" ".join(f"{name:>{width}}" for name, width in header), f"{'wall ms':>8}")
    for ticks in runs.values():
        for name, t in zip(TICKS, ticks, strict=True):
            print(
                f"{int(t['meta']):12d} {name:>22} {int(t['gets']):6d} {int(t['lists']):6d}"
                f" {t['cpu_ms']:8.1f} {t['moto_ms']:8.1f} {t['wall_ms']:8.1f}"
                + (f"  ({int(t['abandoned'])} abandoned)" if t["abandoned"] else "")
            )
    small, large = runs[sizes[0]], runs[sizes[-1]]
    grown = large[0]["meta"] / small[0]["meta"]
    print(f"growth from the smallest stream to the largest ({grown:.0f}x the meta objects), CPU + moto:")
    for i, name in enumerate(TICKS):
        before = small[i]["cpu_ms"] + small[i]["moto_ms"]
        after = large[i]["cpu_ms"] + large[i]["moto_ms"]
        print(f"  {name:>22}: {after / before:.1f}x")


if __name__ == "__main__":
    main()
