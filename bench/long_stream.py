"""Projection along one long-lived process's stream: does the n-th meta object cost more as n grows?

The real writer emits EngineStarted once per engine, at activation, and a publish cycle writes up to
two small meta objects (meta-pre, then meta-post). This bench synthesizes that shape
(``SynthConfig.long_run``: one process, a second engine started half-way, one or two executions per
meta-post object), ships it to moto (its own process), and projects every meta object in stream
order through the real activities at the real walk bound (2,000), so after the first 2,000 objects
every engine lookup goes through the engine registry. It prints executions per second and worker
CPU per execution for the first and the last ``--window`` executions, and their ratio (the
baseline is the first window of the same run: a flat cost gives ~1.0).

By default Boundary and the Lance commits are left out (a null sink, as bench/projection.py's
baseline does), so the figure is what the walk, the registry, the reads and the row building cost;
``--full`` includes them (Boundary subprocess, Lance on moto), whose per-meta-object cost is the
subject of the projection-at-load issue.

    .venv/bin/python bench/long_stream.py [--meta-objects 5200] [--rate 1.5] [--window 1000] [--full]
"""

from __future__ import annotations

import argparse
import contextlib
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
from projection import NullSink  # type: ignore[import-not-found]  # noqa: E402

from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.common.process_gc import tune_gc  # noqa: E402
from formats.contracts import projection as c  # noqa: E402
from formats.synth.config import SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)


def window_figures(samples: list[tuple[int, float, float]], window: int) -> tuple[dict[str, float], ...]:
    """(executions, wall s, cpu s) per meta object -> figures of the first and last ``window`` executions."""

    def take(items: list[tuple[int, float, float]]) -> dict[str, float]:
        n = wall = cpu = 0.0
        for execs, w, cp in items:
            if n >= window:
                break
            n += execs
            wall += w
            cpu += cp
        return {"executions": n, "wall_s": wall, "per_s": n / wall if wall else 0.0, "cpu_ms": 1000 * cpu / n}

    with_execs = [s for s in samples if s[0]]
    return take(with_execs), take(list(reversed(with_execs)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--meta-objects", type=int, default=5200)
    ap.add_argument("--rate", type=float, default=1.5, help="executions per second of the process")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--full", action="store_true", help="include Boundary and the Lance commits")
    args = ap.parse_args()
    tune_gc()
    tmp = Path(tempfile.mkdtemp())
    port = fx.free_port()
    moto_proc = fx.start_moto_process(port)
    gen: Any = None
    try:
        m = fx.Moto(f"http://127.0.0.1:{port}")
        s3 = m.client("s3")
        bucket = "bench-long-stream"
        s3.create_bucket(Bucket=bucket)
        cfg = SynthConfig.long_run(args.meta_objects, rate_per_second=args.rate, seed=11)
        t0 = time.perf_counter()
        truth = synthesize(tmp / "profile", cfg)
        synth_s = time.perf_counter() - t0
        if args.full:
            factory = fx.pytest.TempPathFactory(
                tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
            )  # type: ignore[call-arg]
            fx.FACT_FLUSH_INTERVAL_S = None  # Boundary's production flush cadence
            gen = fx.boundary.__wrapped__(factory)  # type: ignore[attr-defined]
            boundary = next(gen)
            scope, tenant = boundary.scope, boundary.scope.tenant_id
        else:
            from formats.object_keys import Scope

            scope, tenant = Scope("bench", "long", "env"), "bench"
        up = build_objects(tmp / "profile", scope)
        upload(s3, bucket, up)
        lance = fx.make_lance(m, bucket)
        if args.full:
            client = boundary.client()
            acts = fx.make_activities(s3, bucket, lance, client, tenant)
        else:
            acts = ProjectionActivities(
                s3=s3,
                bucket=bucket,
                lance=lance,
                sink=NullSink(),
                settings=ProjectionSettings(),
                tenant_id=tenant,
            )
        for k in up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(k))
        if not args.full:
            acts._commit_lance = lambda *a, **kw: 0  # type: ignore[method-assign]
        outcomes: Counter[str] = Counter()
        samples: list[tuple[int, float, float]] = []
        for key in up.meta_keys:
            w0, c0 = time.perf_counter(), time.process_time()
            result = acts.project_meta_object(c.ProjectMetaInput(key, 1))
            samples.append((len(result.outcomes), time.perf_counter() - w0, time.process_time() - c0))
            outcomes.update(o.outcome for o in result.outcomes)
        first, last = window_figures(samples, args.window)
        total_wall = sum(s[1] for s in samples)
        print(
            f"stream: {len(up.meta_keys)} meta objects, {len(up.data_keys)} data segments,"
            f" {len(truth.executions)} executions (synthesized in {synth_s:.1f} s), walk bound 2000,"
            f" {'Boundary + Lance' if args.full else 'null sink, no Lance commits'}"
        )
        print(f"outcomes: {dict(outcomes)}; all meta objects in {total_wall:.1f} s")
        for name, f in (("first", first), ("last", last)):
            print(
                f"  {name} {int(f['executions'])} executions: {f['per_s']:.0f} executions/s,"
                f" worker CPU {f['cpu_ms']:.2f} ms/execution"
            )
        print(
            f"ratio last/first: time per execution {first['per_s'] / last['per_s']:.2f},"
            f" CPU per execution {last['cpu_ms'] / first['cpu_ms']:.2f} (1.00 = flat)"
        )
        acts.close()
    finally:
        if gen is not None:
            with contextlib.suppress(StopIteration):
                next(gen)
        moto_proc.terminate()
        moto_proc.wait(10)


if __name__ == "__main__":
    main()
