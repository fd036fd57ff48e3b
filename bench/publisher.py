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
(c) ``--backlog N``: a backlog of about N small segments in the real writer's shape (one long
    process, two small meta objects per one-second cycle: ``SynthConfig.long_run``), as after an
    hour offline. Prints objects per second, flushes, the time until the cursor first advances,
    and where the time went (per phase, authorize calls, fsyncs), next to moto's raw
    ``put_object`` rate for the same objects at the same concurrency (the ceiling) and zstd +
    SHA-256 alone, measured in the same run. ``--backlog-old`` also runs the previous flush
    (everything in one flush, meta one PUT at a time). Target: >= 200 objects/s.
(b) LiveSynth writes 50 executions per second; process CPU is measured without the publisher, then
    with it at the default 5 s flush interval and at 1 s. ``--profile`` prints the publisher
    threads' hottest functions (cProfile) for the 1 s run. Target: under 2% of one core.

    .venv/bin/python bench/publisher.py [--executions N] [--rate R] [--seconds S] [--profile]
        [--skip-throughput] [--skip-cpu]
    .venv/bin/python bench/publisher.py --backlog 10000 [--backlog-old]
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
from publisher.flush import FlushReport  # noqa: E402
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
    # One stream's metas land one at a time: the serial PUT rate bounds that lane.
    metas = [compress_object(f.read_bytes()) for f in files if f.suffix == ".bamlmeta"][:500]
    raw1 = raw_puts(servers.s3, metas, 1)
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


class _FsyncCounter:
    """Counts ``os.fsync`` calls in this process (the publisher's and the store's; the servers run
    in their own processes)."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = os.fsync

    def __enter__(self) -> _FsyncCounter:
        def counted(fd: int) -> None:
            self.calls += 1
            self._real(fd)

        os.fsync = counted  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real  # type: ignore[assignment]


class _CursorWatch:
    """Polls the streams' ``publisher.cursor`` files: when each first moves, and how often."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.first_advance: float | None = None
        self.advances = 0
        self._seen: dict[Path, bytes] = {}
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.poll()

    def poll(self) -> None:
        for path in (self.root / "streams").glob("*/publisher.cursor"):
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            if self._seen.get(path) != raw:
                self._seen[path] = raw
                self.advances += 1
                if self.first_advance is None:
                    self.first_advance = time.perf_counter() - self._started

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()


def _ship_backlog(root: Path, gateway: str, label: str, **settings: object) -> float:
    """Ship the whole backlog with the publisher thread (a flush that leaves ``more`` is followed
    by the next at once). Prints the figures; returns objects per second."""
    pub = Publisher(PublisherSettings(gateway_url=gateway, token=TOKEN, profile_dir=root, **settings))  # type: ignore[arg-type]
    reports: list[FlushReport] = []
    flush = pub._flusher.flush

    def recorded(*args: Any, **kw: Any) -> FlushReport:
        report = flush(*args, **kw)
        reports.append(report)
        return report

    pub._flusher.flush = recorded  # type: ignore[method-assign]
    with _FsyncCounter() as fsyncs:
        watch = _CursorWatch(root)
        started = time.perf_counter()
        pub.start()
        while not reports or reports[-1].more:
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        assert pub.flush_and_join(60)
        watch.stop()
    stats = pub.stats()
    assert not stats["errors"], stats["errors"]
    phases: dict[str, float] = {}
    for report in reports:
        for name, seconds in getattr(report, "phases", {}).items():
            phases[name] = phases.get(name, 0.0) + seconds
    objects = sum(r.shipped + r.stored for r in reports)
    longest = max(r.duration_seconds for r in reports)
    calls = stats["authorize_latency"]["count"]
    entries = sum(stats["authorize_outcomes"].values())
    first = f"{watch.first_advance:.2f} s" if watch.first_advance is not None else "never"
    print(
        f"{label:<34} {objects / elapsed:8.1f} objects/s ({objects} objects in {elapsed:.2f} s); "
        f"{len(reports)} flushes, longest {longest:.2f} s; cursor first advanced after {first}, "
        f"{watch.advances} cursor writes seen"
    )
    print(
        f"{'':<34} authorize: {calls} calls for {entries} entries, "
        f"{stats['authorize_latency']['total_seconds']:.2f} s summed; "
        f"fsyncs {fsyncs.calls} ({fsyncs.calls / max(1, objects):.3f} per object)"
    )
    if phases:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        print(f"{'':<34} phases (wall, summed over flushes): {parts}")
    return objects / elapsed


def bench_backlog(servers: Servers, n: int, with_old: bool, cache: Path | None) -> None:
    work = Path(tempfile.mkdtemp())
    root = work / "new" / "profiles-v1"
    # The real writer's shape: two meta objects per one-second cycle and a data segment every
    # other one, so about 2/3 of N are meta. Each run starts its own moto, so keys are fresh.
    config = SynthConfig.long_run(meta_objects=-(-2 * n // 3), seed=12)
    t0 = time.perf_counter()
    source = cache / f"backlog-{n}" / "profiles-v1" if cache is not None else root
    if not source.is_dir():
        synthesize(source, config, keep_truth=False)
    if source != root:
        shutil.copytree(source, root)
    synth_s = time.perf_counter() - t0
    if with_old:
        shutil.copytree(root, work / "old" / "profiles-v1")
    files = ship_files(root)
    counts = {s: sum(1 for f in files if f.suffix == s) for s in (".bamlmeta", ".bamldata", ".bamlvalue")}
    mean = sum(f.stat().st_size for f in files) / max(1, len(files))
    print(
        f"backlog: {len(files)} files ({counts['.bamlmeta']} meta, {counts['.bamldata']} data, "
        f"{counts['.bamlvalue']} CAS), mean {mean / 1e3:.1f} kB; synthesized (or copied) in {synth_s:.1f} s"
    )
    base = baseline(files)
    bodies = publisher_bodies(files)
    concurrency = PublisherSettings().upload_concurrency
    rawn = raw_puts(servers.s3, bodies, concurrency)
    # One stream's metas land one at a time: the serial PUT rate bounds that lane.
    metas = [compress_object(f.read_bytes()) for f in files if f.suffix == ".bamlmeta"][:500]
    raw1 = raw_puts(servers.s3, metas, 1)
    print(f"{'zstd + SHA-256 alone (1 thread):':<34} {len(files) / base:8.1f} files/s ({base:.2f} s)")
    print(
        f"{f'moto raw put_object, {concurrency} at a time:':<34} {len(bodies) / rawn:8.1f} objects/s "
        f"({rawn:.2f} s, {len(bodies)} PUTs; the ceiling)"
    )
    print(
        f"{'moto raw put_object, 1 at a time:':<34} {len(metas) / raw1:8.1f} objects/s "
        f"({len(metas)} metas; one stream's meta lane)"
    )
    if with_old:
        _ship_backlog(
            work / "old" / "profiles-v1",
            servers.urls["backlog-old"],
            "publisher, previous flush:",
            **_OLD_FLUSH,
        )
    rate = _ship_backlog(root, servers.urls["backlog"], "publisher:")
    print(
        f"target >= 200 objects/s: {'met' if rate >= 200 else 'NOT met'}; "
        f"{rate / (len(bodies) / rawn):.2f} of moto's raw rate"
    )
    shutil.rmtree(work, ignore_errors=True)


# The flush before issue 12: one flush for the whole backlog, nothing pipelined (the gateway's
# segment listing cannot be turned off from here: run the bench at the commit before for that).
_OLD_FLUSH: dict[str, object] = {"max_flush_objects": 10**9, "pipeline_flushes": False}


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
    parser.add_argument("--backlog", type=int, default=0, help="ship a backlog of N small segments only")
    parser.add_argument("--backlog-old", action="store_true", help="also run the previous flush on it")
    parser.add_argument(
        "--backlog-cache", type=Path, default=None, help="keep the synthesized backlog here for reruns"
    )
    args = parser.parse_args()
    servers = Servers(
        [
            ("main", "bench-main", 5.0),
            ("seq", "bench-seq", 5.0),
            ("cpu5", "bench-cpu5", 5.0),
            ("cpu1", "bench-cpu1", 1.0),
            ("backlog", "bench-backlog", 5.0),
            ("backlog-old", "bench-backlog-old", 5.0),
        ]
    )
    try:
        if args.backlog:
            bench_backlog(servers, args.backlog, args.backlog_old, args.backlog_cache)
            return
        if not args.skip_throughput:
            bench_throughput(servers, args.executions, args.rate)
        if not args.skip_cpu:
            bench_cpu(servers, args.seconds, args.profile)
    finally:
        servers.close()


if __name__ == "__main__":
    main()
