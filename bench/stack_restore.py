"""How long the embedded stack's S3 takes to come back: moto_store restoring a journal of N MB.

Writes ``--mb`` megabytes of evidence-sized objects (``--object-kb`` each, random bytes, so no
compression helps) into ``python -m worker.stack.moto_store`` over HTTP, kills it with SIGKILL,
starts it again on the same journal and times until S3 answers, then checks every object's
size. Baseline, measured in the same run: uploading the same objects into the empty store
(what re-shipping the evidence would cost at best, without projection).

    .venv/bin/python bench/stack_restore.py --mb 200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import httpx
from botocore.config import Config

BUCKET = "baml-evidence"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(port: int, journal: Path) -> tuple[subprocess.Popen[bytes], float]:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.stack.moto_store", "--port", str(port), "--journal", str(journal)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}", timeout=1)
            return proc, time.monotonic() - started
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise SystemExit("moto_store exited") from None
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--object-kb", type=int, default=512)
    args = parser.parse_args()
    count = args.mb * 1024 // args.object_kb
    body = os.urandom(args.object_kb * 1024)
    work = Path(tempfile.mkdtemp(prefix="stack-restore-"))
    journal = work / "s3" / "journal"
    port = _port()
    try:
        proc, cold = _start(port, journal)
        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=8),
        )
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        keys = [f"evidence/v1/t/p/e/streams/{i:032x}/values/{i:026d}.bamlpack.zst" for i in range(count)]
        t0 = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=BUCKET, Key=k, Body=body), keys))
        upload_s = time.monotonic() - t0
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        journal_mb = journal.stat().st_size / 1e6

        proc, restore_s = _start(port, journal)
        figures = json.loads(Path(f"{journal}.restore.json").read_text())
        sizes = [
            o["Size"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", [])
        ]
        assert len(sizes) == count and set(sizes) == {len(body)}, "restore lost objects"
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        total_mb = count * len(body) / 1e6
        print(f"objects: {count} x {args.object_kb} KiB = {total_mb:.0f} MB; journal {journal_mb:.0f} MB")
        print(f"cold start of an empty store:        {cold:6.2f} s")
        print(f"baseline, uploading them (4 threads): {upload_s:6.2f} s ({total_mb / upload_s:.0f} MB/s)")
        print(
            f"restart until S3 answers:             {restore_s:6.2f} s "
            f"(replay {figures['seconds']:.2f} s, {figures['entries']} entries, {figures['refused']} refused)"
        )
        print(f"ratio restart / upload:               {restore_s / upload_s:6.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
