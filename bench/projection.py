"""Projection throughput of one worker process: executions per second (10 spans each, target >= 500).

Real parts: moto (S3) over HTTP, Lance on moto, Boundary as a subprocess (chdb behind
PUT /projection-batches, real mTLS). Runs the activities directly (no Temporal: its overhead is
one workflow + activity task per meta object) and prints where the time goes, with a baseline
measured in the same run: reading + decoding + assembling rows alone (no Boundary, no Lance).

    .venv/bin/python bench/projection.py [--executions 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import logging  # noqa: E402

import conftest as fx  # noqa: E402
from bucket_corpus import build_objects, upload  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from activities import contracts as c  # noqa: E402
from activities.fact_sink import BoundaryFactSink  # noqa: E402
from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from formats.synth.config import SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)


class Timed:
    """Wraps a method and adds its wall time to a bucket."""

    def __init__(self, totals: dict[str, float]) -> None:
        self.totals = totals

    def wrap(self, obj: Any, name: str, bucket: str) -> None:
        inner = getattr(obj, name)

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                self.totals[bucket] += time.perf_counter() - t0

        setattr(obj, name, timed)


class NullSink:
    def active_generation(self, environment_id: str) -> int:
        return 1

    def put_batch(self, scope: Any, batch: Any) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--executions", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    port = fx.free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )  # type: ignore[call-arg]
    gen = fx.boundary.__wrapped__(factory)  # type: ignore[attr-defined]
    boundary = next(gen)
    try:
        m = fx.Moto(f"http://127.0.0.1:{port}")
        s3 = m.client("s3")
        bucket = "bench-projection"
        s3.create_bucket(Bucket=bucket)
        # 10 spans per execution: 1 root + 6-7 LLM + 2 selected calls.
        cfg = SynthConfig(
            seed=7, executions=args.executions, llm_calls=(7, 7), selected_calls=(2, 2), rate_per_second=200
        )
        truth = synthesize(tmp / "profile", cfg)
        spans = sum(len(e.spans) for e in truth.executions) / max(1, len(truth.executions))
        up = build_objects(tmp / "profile", boundary.scope)
        upload(s3, bucket, up)
        lance = fx.make_lance(m, bucket)
        totals: dict[str, float] = defaultdict(float)
        client = boundary.client()
        acts = ProjectionActivities(
            s3=s3,
            bucket=bucket,
            lance=lance,
            sink=BoundaryFactSink(client),
            settings=ProjectionSettings(),
            tenant_id=boundary.scope.tenant_id,
        )
        t = Timed(totals)
        t.wrap(acts, "_send_batches", "boundary PUT batches")
        t.wrap(acts, "_commit_lance", "lance commit")
        t.wrap(acts, "_value_lookup", "values prefetch")
        t0 = time.perf_counter()
        for k in up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(k))
        packs_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        outcomes: Counter[str] = Counter()
        for k in up.meta_keys:
            for o in acts.project_meta_object(c.ProjectMetaInput(k, 1)).outcomes:
                outcomes[o.outcome] += 1
        total = time.perf_counter() - t0
        n = sum(outcomes.values())

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
        t0 = time.perf_counter()
        for k in up.meta_keys:
            base.project_meta_object(c.ProjectMetaInput(k, 1))
        base_s = time.perf_counter() - t0

        print(f"executions projected: {n} ({dict(outcomes)}), mean spans/execution {spans:.1f}")
        print(f"meta objects: {len(up.meta_keys)}, packs: {len(up.pack_keys)} (pack ingest {packs_s:.2f} s)")
        print(f"projection: {total:.2f} s -> {n / total:.0f} executions/s (target >= 500)")
        rest = total - sum(totals.values())
        for name, secs in sorted(totals.items(), key=lambda x: -x[1]):
            print(f"  {name:24s} {secs:7.2f} s  {100 * secs / total:5.1f}%")
        print(f"  {'read+decode+assemble':24s} {rest:7.2f} s  {100 * rest / total:5.1f}%")
        print(
            f"baseline (read+assemble only, no Boundary/Lance): {base_s:.2f} s -> {n / base_s:.0f} executions/s;"
            f" ratio full/baseline = {total / base_s:.2f}"
        )
        acts.close()
        base.close()
        client.close()
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)
        moto.stop()


if __name__ == "__main__":
    main()
