"""Publisher benchmarks: (a) shipping throughput, (b) CPU added to an application at 50 executions/s.

(a) A synthetic backlog (formats.synth) is shipped by one ``run_once`` flush to moto + the real
    gateway app, both in a separate process so their CPU is not ours. Baseline in the same run:
    zstd (reference settings) + SHA-256 alone over the same files. Target: at least 0.5x.
(b) LiveSynth writes 50 executions per second for ``--seconds``; process CPU time is measured
    without the publisher and then with it (1 s flush interval). Target: under 2% of one core.

    .venv/bin/python bench/publisher.py [--executions N] [--seconds S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "publisher"))
sys.path.insert(0, str(ROOT))

from formats.synth import LiveSynth, SynthConfig, synthesize  # noqa: E402
from formats.zstd_frame import compress_object  # noqa: E402
from publisher import Publisher, PublisherSettings  # noqa: E402

_SERVERS = """
import json, sys, time
sys.path.insert(0, {harness!r})
from publisher_harness import Moto, Gateway, FaultProxy
from formats.upload_wire import PublisherConfig
moto = Moto()
bucket = moto.fresh_bucket("bench")
gw = Gateway(moto, bucket)
gw.control.config = PublisherConfig(flush_interval_seconds=1)
print(json.dumps({{"gateway": gw.url}}), flush=True)
sys.stdin.read()
"""


def start_servers() -> tuple[subprocess.Popen[str], str]:
    code = _SERVERS.format(harness=str(ROOT / "tests" / "publisher"))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, json.loads(line)["gateway"]


def baseline(files: list[Path]) -> float:
    started = time.perf_counter()
    for f in files:
        body = compress_object(f.read_bytes())
        hashlib.sha256(body).hexdigest()
    return time.perf_counter() - started


def bench_throughput(gateway: str, executions: int) -> None:
    root = Path(tempfile.mkdtemp()) / "profiles-v1"
    synthesize(root, SynthConfig(seed=3, executions=executions, processes=2, p_large_value=0.01))
    files = [
        p for p in root.rglob("*") if p.is_file() and p.suffix in (".bamlmeta", ".bamldata", ".bamlvalue")
    ]
    total = sum(p.stat().st_size for p in files)
    base = baseline(files)
    pub = Publisher(PublisherSettings(gateway_url=gateway, token="bench", profile_dir=root))
    started = time.perf_counter()
    report = pub.run_once(600)
    elapsed = time.perf_counter() - started
    pub.close()
    assert report is not None and report.ok, report
    mb = total / 1e6
    print(f"backlog: {len(files)} files, {mb:.1f} MB raw")
    print(f"zstd + SHA-256 alone:  {mb / base:8.1f} MB/s ({base:.2f} s)")
    print(f"publisher to moto+gw:  {mb / elapsed:8.1f} MB/s ({elapsed:.2f} s, {report.shipped} objects)")
    print(f"ratio publisher/baseline: {base / elapsed:.2f} (target >= 0.5)")


def cpu_over(seconds: float, root: Path, gateway: str | None) -> float:
    synth = LiveSynth(root, SynthConfig(seed=5, rate_per_second=50.0, executions=10**9))
    pub = (
        Publisher(PublisherSettings(gateway_url=gateway, token="bench", profile_dir=root, lambda_mode=True))
        if gateway
        else None
    )
    synth.start()
    if pub:
        pub.start()
    cpu0 = time.process_time()
    time.sleep(seconds)
    cpu = time.process_time() - cpu0
    if pub:
        pub.flush_and_join(10)
    synth.stop()
    return cpu


def bench_cpu(gateway: str, seconds: float) -> None:
    base = cpu_over(seconds, Path(tempfile.mkdtemp()) / "profiles-v1", None)
    with_pub = cpu_over(seconds, Path(tempfile.mkdtemp()) / "profiles-v1", gateway)
    added = (with_pub - base) / seconds * 100
    print(f"application alone (50 exec/s): {base / seconds * 100:6.2f}% of one core")
    print(f"with publisher (1 s interval): {with_pub / seconds * 100:6.2f}% of one core")
    print(f"publisher adds: {added:.2f}% of one core (target < 2%)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    proc, gateway = start_servers()
    try:
        bench_throughput(gateway, args.executions)
        bench_cpu(gateway, args.seconds)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
