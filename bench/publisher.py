"""Publisher benchmarks: (a) shipping throughput, (b) CPU the publisher adds at 50 executions/s.

Servers run as separate processes, so their CPU is not ours: moto (``moto_server``) and the real
gateway app (tests/publisher/publisher_harness.Gateway; only Boundary's token check is replaced).

(a) A synthetic backlog with realistic segments (2 MiB target, 3,000 executions/s per process so
    they fill to 1-4 MiB; the synth's default value mix) is shipped by ``run_once`` flushes.
    Measured in the same run:
    - zstd (reference settings) + SHA-256 alone over the same files, one thread (the target's base);
    - moto's raw PUT rate: boto3 ``put_object`` of the same compressed bodies, same concurrency;
    - the publisher sequential (1 PUT at a time, compression inline: the previous design);
    - the publisher as configured (concurrent PUTs, compression on worker threads).
    Target: publisher / (zstd + SHA-256) >= 0.5.
(b) LiveSynth writes 50 executions per second; process CPU is measured without the publisher, then
    with it at the default 5 s flush interval and at 1 s. ``--profile`` prints the publisher
    threads' hottest functions (cProfile) for the 1 s run. Target: under 2% of one core.

    .venv/bin/python bench/publisher.py [--executions N] [--rate R] [--seconds S] [--profile]
        [--skip-throughput] [--skip-cpu]
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import io
import json
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "publisher"))
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
import ulid  # noqa: E402
from publisher_harness import TOKEN, free_port, wait_port  # noqa: E402

from formats import cas  # noqa: E402
from formats.synth import LiveSynth, SynthConfig, synthesize  # noqa: E402
from formats.value_pack import build_pack, pack_flush_ids  # noqa: E402
from formats.zstd_frame import compress_object  # noqa: E402
from publisher import Publisher, PublisherSettings  # noqa: E402
from publisher.plan import split_packs  # noqa: E402

_GATEWAYS = """
import json, sys
sys.path.insert(0, {harness!r})
from publisher_harness import Gateway
from formats.upload_wire import PublisherConfig
class M: url = {moto!r}
out = {{}}
for name, bucket, interval in {specs!r}:
    gw = Gateway(M, bucket)
    gw.control.config = PublisherConfig(flush_interval_seconds=interval)
    out[name] = gw.url
print(json.dumps(out), flush=True)
sys.stdin.read()
"""


class Servers:
    def __init__(self, specs: list[tuple[str, str, float]]) -> None:
        port = free_port()
        self.moto_url = f"http://127.0.0.1:{port}"
        self.moto = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(port)
        self.s3 = boto3.client(
            "s3",
            endpoint_url=self.moto_url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        for _, bucket, _ in specs:
            self.s3.create_bucket(Bucket=bucket)
        self.s3.create_bucket(Bucket="raw-puts")
        code = _GATEWAYS.format(harness=str(ROOT / "tests" / "publisher"), moto=self.moto_url, specs=specs)
        self.gw = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        assert self.gw.stdout is not None
        self.urls: dict[str, str] = json.loads(self.gw.stdout.readline())

    def close(self) -> None:
        assert self.gw.stdin is not None
        self.gw.stdin.close()
        for proc in (self.gw, self.moto):
            proc.terminate()
            proc.wait(10)


def ship_files(root: Path) -> list[Path]:
    return [
        p for p in root.rglob("*") if p.is_file() and p.suffix in (".bamlmeta", ".bamldata", ".bamlvalue")
    ]


def baseline(files: list[Path]) -> float:
    started = time.perf_counter()
    for f in files:
        hashlib.sha256(compress_object(f.read_bytes())).hexdigest()
    return time.perf_counter() - started


def publisher_bodies(files: list[Path]) -> list[bytes]:
    """The objects the publisher sends for these files: segments, tables and large values each on
    their own, small values in packs (8 MiB of entries each)."""
    bodies: list[bytes] = []
    small: list[bytes] = []
    for f in files:
        raw = f.read_bytes()
        if f.suffix == ".bamlvalue" and len(raw) < 32 * 1024 and cas.read_cas_header(raw).codec == 1:
            small.append(raw)
        else:
            bodies.append(compress_object(raw))
    groups = split_packs([len(r) for r in small], 8 << 20)
    for pack_id, group in zip(pack_flush_ids(str(ulid.ULID()), len(groups)), groups, strict=True):
        raw = build_pack([small[i] for i in group], flush_id=pack_id, process_euid="0" * 32)
        bodies.append(compress_object(raw))
    return bodies


def raw_puts(s3: object, bodies: list[bytes], concurrency: int) -> float:
    def put(item: tuple[int, bytes]) -> None:
        i, body = item
        digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
        s3.put_object(  # type: ignore[attr-defined]
            Bucket="raw-puts", Key=f"obj/{concurrency}/{i}", Body=body, ChecksumSHA256=digest, IfNoneMatch="*"
        )

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(put, enumerate(bodies)))
    return time.perf_counter() - started


def publish_all(root: Path, gateway: str, **settings: object) -> tuple[float, int]:
    pub = Publisher(PublisherSettings(gateway_url=gateway, token=TOKEN, profile_dir=root, **settings))  # type: ignore[arg-type]
    shipped = 0
    started = time.perf_counter()
    while True:
        report = pub.run_once(600)
        assert report is not None and report.ok, report
        shipped += report.shipped
        if not report.more:
            break
    elapsed = time.perf_counter() - started
    pub.close()
    return elapsed, shipped


def bench_throughput(servers: Servers, executions: int, rate: float) -> None:
    work = Path(tempfile.mkdtemp())
    root = work / "a" / "profiles-v1"
    # A process under load: enough executions per 1 s publish interval that data segments fill to
    # 1-4 MiB as a real profiler's do (at 600/s they were a third of a megabyte, so per-object costs
    # dominated unrealistically).
    config = SynthConfig(
        seed=3, executions=executions, processes=2, rate_per_second=rate, segment_target_bytes=2 << 20
    )
    synthesize(root, config, keep_truth=False)
    shutil.copytree(root, work / "b" / "profiles-v1")
    files = ship_files(root)
    sizes = sorted(p.stat().st_size for p in files if p.suffix == ".bamldata")
    total = sum(p.stat().st_size for p in files)
    mb = total / 1e6
    base = baseline(files)
    bodies = publisher_bodies(files)
    concurrency = PublisherSettings().upload_concurrency
    raw1 = raw_puts(servers.s3, bodies, 1)
    rawn = raw_puts(servers.s3, bodies, concurrency)
    seq, n_seq = publish_all(
        work / "b" / "profiles-v1", servers.urls["seq"], upload_concurrency=1, compress_workers=1
    )
    par, n_par = publish_all(root, servers.urls["main"])
    print(
        f"backlog: {len(files)} files, {mb:.1f} MB raw; data segments {len(sizes)}, "
        f"median {sizes[len(sizes) // 2] / 1e6:.2f} MB, max {sizes[-1] / 1e6:.2f} MB"
    )
    print(f"zstd + SHA-256 alone (1 thread):        {mb / base:8.1f} MB/s ({base:.2f} s)")
    print(f"moto raw put_object, 1 at a time:       {mb / raw1:8.1f} MB/s ({raw1:.2f} s, {len(bodies)} PUTs)")
    print(f"moto raw put_object, {concurrency} at a time:       {mb / rawn:8.1f} MB/s ({rawn:.2f} s)")
    print(f"publisher sequential (old design):      {mb / seq:8.1f} MB/s ({seq:.2f} s, {n_seq} objects)")
    print(
        f"publisher (concurrency {concurrency}):         {mb / par:8.1f} MB/s ({par:.2f} s, {n_par} objects)"
    )
    print(f"ratio publisher / (zstd + SHA-256): {base / par:.2f} (target >= 0.5)")
    print(f"ratio publisher / moto raw PUTs at {concurrency}: {rawn / par:.2f}")


def _thread_cpu(prefix: str) -> float:
    """CPU seconds of this process's threads whose name starts with ``prefix`` (Linux /proc)."""
    total = 0.0
    ticks = 100.0
    ids = {t.native_id for t in threading.enumerate() if t.name.startswith(prefix) and t.native_id}
    for tid in ids:
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def cpu_run(seconds: float, gateway: str | None, profile: bool = False) -> tuple[float, float]:
    root = Path(tempfile.mkdtemp()) / "profiles-v1"
    synth = LiveSynth(root, SynthConfig(seed=5, rate_per_second=50.0, executions=10**9))
    pub = (
        Publisher(PublisherSettings(gateway_url=gateway, token=TOKEN, profile_dir=root)) if gateway else None
    )
    prof = cProfile.Profile() if profile else None
    if pub is not None and prof is not None:
        original = pub._flush_once  # profile the flushes, in the publisher thread

        def profiled(deadline: float):  # type: ignore[no-untyped-def]
            prof.enable()
            try:
                return original(deadline)
            finally:
                prof.disable()

        pub._flush_once = profiled  # type: ignore[method-assign]
    synth.start()
    if pub:
        pub.start()
    time.sleep(0.5)  # threads and pools started
    cpu0 = time.process_time()
    pub_cpu0 = _thread_cpu("baml-publisher")
    time.sleep(seconds)
    cpu = time.process_time() - cpu0
    pub_cpu = _thread_cpu("baml-publisher") - pub_cpu0
    if pub:
        pub.flush_and_join(10)
    synth.stop()
    if prof is not None:
        out = io.StringIO()
        # Own time, not cumulative: the flush waits on locks and sockets, which is not CPU.
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())
    return cpu, pub_cpu


def bench_cpu(servers: Servers, seconds: float, profile: bool) -> None:
    base, _ = cpu_run(seconds, None)
    print(f"application alone (50 exec/s):   {base / seconds * 100:6.2f}% of one core")
    for name, label in (("cpu5", "5 s"), ("cpu1", "1 s")):
        with_pub, pub_threads = cpu_run(seconds, servers.urls[name], profile and name == "cpu1")
        added = (with_pub - base) / seconds * 100
        print(
            f"with publisher ({label} interval):   {with_pub / seconds * 100:6.2f}% of one core; "
            f"adds {added:.2f}% (target < 2%); publisher threads alone {pub_threads / seconds * 100:.2f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=3000.0, help="executions/s per process (throughput)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-cpu", action="store_true")
    args = parser.parse_args()
    servers = Servers(
        [
            ("main", "bench-main", 5.0),
            ("seq", "bench-seq", 5.0),
            ("cpu5", "bench-cpu5", 5.0),
            ("cpu1", "bench-cpu1", 1.0),
        ]
    )
    try:
        if not args.skip_throughput:
            bench_throughput(servers, args.executions, args.rate)
        if not args.skip_cpu:
            bench_cpu(servers, args.seconds, args.profile)
    finally:
        servers.close()


if __name__ == "__main__":
    main()
