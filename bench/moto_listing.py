"""moto's S3 listing under a prefix as the bucket grows: as released, and with the stack's patch
(worker/stack/moto_listing_speedup.py).

    .venv/bin/python bench/moto_listing.py [--objects 10000,30000,100000] [--versions 600]

The customer's bucket holds the evidence objects and every Lance dataset. Lance lists a
dataset's ``_versions/`` at each commit; this lists ``--versions`` manifests under that prefix in a
bucket of ``--objects`` other keys (evidence-like), and a prefix holding 10 keys (the gateway's
sequence range), both ways in the same run, and prints CPU per listing and the ratio at each size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ACCOUNT = "123456789012"
VERSIONS = "lance/calls_v1.lance/_versions/"
SEQUENCES = "evidence/s0000/meta/"


def listing_ms(backend: object, bucket: object, prefix: str, rounds: int) -> float:
    started = time.process_time()
    for _ in range(rounds):
        backend.list_objects_v2(bucket, prefix, None, None, None, 1000)  # type: ignore[attr-defined]
    return (time.process_time() - started) / rounds * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--objects", default="10000,30000,100000", help="other keys in the bucket, per row")
    ap.add_argument("--versions", type=int, default=600, help="manifests under the listed prefix")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()

    from moto import mock_aws
    from moto.s3.models import S3Backend, s3_backends

    from worker.stack import moto_listing_speedup

    original = S3Backend.list_objects
    print(f"{'objects':>9} {'prefix':>20} {'moto ms':>9} {'patched ms':>11} {'ratio':>6}")
    for n in (int(x) for x in args.objects.split(",")):
        with mock_aws():
            backend = s3_backends[ACCOUNT]["aws"]
            name = f"bench-{n}"
            backend.create_bucket(name, "us-east-1")
            for i in range(n):
                # 1,000 streams of meta objects: the 10 first sequences of stream 0 under SEQUENCES
                backend.put_object(name, f"evidence/s{i % 1000:04d}/meta/{i // 1000:08d}", b"x")
            for v in range(args.versions):
                backend.put_object(name, f"{VERSIONS}{18446744073709551615 - v:020d}.manifest", b"m")
            bucket = backend.get_bucket(name)
            for prefix in (VERSIONS, SEQUENCES):
                S3Backend.list_objects = original  # type: ignore[method-assign]
                before = listing_ms(backend, bucket, prefix, args.rounds)
                S3Backend.list_objects = moto_listing_speedup.prefixed(original)  # type: ignore[method-assign]
                after = listing_ms(backend, bucket, prefix, args.rounds)
                size = n + args.versions
                print(f"{size:>9,} {prefix:>20.20} {before:9.2f} {after:11.2f} {after / before:6.2f}")
    S3Backend.list_objects = original  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
