"""Bulk synthetic profiler throughput: calls/s and segment MB/s for ~1 M calls.

Baseline measured in the same run: writing the same segment bytes as plain files
(open/write/fsync/rename, no encoding), i.e. the raw file-write floor. The ratio says how
far the synthesizer's encoding and bookkeeping are from only writing its bytes.

    .venv/bin/python bench/synth.py [--executions N] [--processes P]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from formats.synth import SynthConfig, synthesize


def raw_write(files: list[Path], dest: Path) -> float:
    dest.mkdir(parents=True)
    started = time.perf_counter()
    for i, src in enumerate(files):
        data = src.read_bytes()
        tmp = dest / f"{i}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, dest / f"{i}.seg")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=125_000)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-synth-"))
    try:
        config = SynthConfig(
            seed=7, executions=args.executions, processes=args.processes, rate_per_second=500.0
        )
        started = time.perf_counter()
        truth = synthesize(work / "profiles-v1", config, keep_truth=False)
        elapsed = time.perf_counter() - started
        segments = sorted((work / "profiles-v1" / "streams").glob("*/*/*.baml*"))
        seg_bytes = sum(p.stat().st_size for p in segments)
        raw = raw_write(segments, work / "raw")
        print(f"executions          {args.executions:,}")
        print(f"calls               {truth.calls:,} ({truth.spans:,} spans)")
        print(f"segments            {len(segments):,} files, {seg_bytes / 1e6:,.1f} MB")
        print(f"CAS objects         {truth.cas_objects:,}")
        rate, mbps = truth.calls / elapsed, seg_bytes / 1e6 / elapsed
        print(f"synthesize          {elapsed:,.2f} s  {rate:,.0f} calls/s  {mbps:,.1f} MB/s")
        print(
            f"baseline raw write  {raw:,.2f} s  {seg_bytes / 1e6 / raw:,.1f} MB/s (same bytes, plain files)"
        )
        print(f"ratio synth/raw     {elapsed / raw:,.1f}x the raw write time")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
