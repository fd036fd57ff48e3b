"""A background query job of a million rows on the 15 M corpus: progress while it runs, the result
streamed back in bounded memory.

Runs the job activity itself (activities/query_job.py, ``run_query_job``) over the corpus that
bench/query.py built, with its result written to a moto S3 server in its own process, then reads
the result back the way ``GET /v1/query-jobs/{id}/result`` does (``iter_chunks`` of 64 KiB).
Temporal carries the
activity's heartbeats to ``GET /v1/query-jobs/{id}`` (tests/coordinator/test_query_jobs.py); here
the heartbeats are recorded as the activity sends them. Prints the job's time, rows and bytes,
the progress heartbeats over time, and the process's resident memory while the job runs and while
the result streams back.

    .venv/bin/python bench/query_job.py --work /work/bq/15m [--rows 1000000]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
import query as corpus  # noqa: E402  # bench/query.py: the corpus and its in-process Boundary

from activities import query_job  # noqa: E402
from activities.query_job import QueryJobActivities  # noqa: E402
from api.boundary.facts.store import FactStore  # noqa: E402
from api.coordinator.executor import Budget  # noqa: E402
from api.coordinator.runtime import PreparedQuery  # noqa: E402
from api.coordinator.value_cache import DiskValueCache  # noqa: E402
from api.dataplane.lance_store import LanceStore  # noqa: E402
from formats.contracts.query_job import QueryJobInput  # noqa: E402
from formats.object_keys import Scope  # noqa: E402

BUCKET = "bench-jobs"
SQL = (
    "SELECT execution_id, call_id, function_name, started_at_ns, duration_ns, status FROM calls_v1 "
    "ORDER BY started_at_ns, call_id, execution_id LIMIT {rows}"
)


class CorpusRuntime:
    """What the job activity asks of the coordinator runtime, over the bench corpus (in-process
    Boundary: the guard and the fact store, as bench/query.py runs every class)."""

    def __init__(self, facts: corpus.DirectFacts, lance: LanceStore, cache: DiskValueCache) -> None:
        self.facts, self.lance, self.cache = facts, lance, cache

    def budget(self, *, wall_ms: int | None, rows: int | None, bytes: int | None, **_: object) -> Budget:
        return Budget(wall_ms=wall_ms or 600_000, rows=rows or 10_000_000, bytes=bytes or 1 << 34)

    def start_query(self, sql: str, scope: Scope, budget: Budget, *, interactive: bool) -> PreparedQuery:
        assert scope == corpus.SCOPE and not interactive  # the corpus's one scope; a job
        return corpus.prepare(sql, self.facts, self.lance, self.cache, budget=budget)


class RssPeak:
    """The process's resident memory, sampled every 20 ms while it runs: the peak, in MB."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def now() -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(0.02)

    def __enter__(self) -> RssPeak:
        self.peak = self.now()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="a corpus bench/query.py built (--build-only)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    store = FactStore.open(path=args.work / "chdb", database=corpus.DB)
    lance = LanceStore(root=args.work / "lance")
    runtime = CorpusRuntime(
        corpus.DirectFacts(store), lance, DiskValueCache(args.work / "value-cache", 4 << 30)
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    # moto in its own process: its in-memory bucket would otherwise count as this process's memory.
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port)
        s3: Any = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        s3.create_bucket(Bucket=BUCKET)
        beats: list[tuple[float, int, float, int]] = []  # (seconds, rows, progress, bytes)
        started = time.perf_counter()

        def record(rows: int, progress: float, size: int = 0) -> None:
            beats.append((time.perf_counter() - started, rows, progress, size))

        query_job._beat = record  # the heartbeat, as Temporal would receive it
        inp = QueryJobInput(
            job_id="qj_bench",
            tenant_id=corpus.SCOPE.tenant_id,
            project_id=corpus.SCOPE.project_id,
            environment_id=corpus.SCOPE.environment_id,
            sql=SQL.format(rows=args.rows),
            request_digest="bench",
            expires_at_unix=time.time() + 3600,
            rows=args.rows + 1,
        )
        before = RssPeak.now()
        with RssPeak() as job_rss:
            result = QueryJobActivities(runtime, s3, BUCKET).run_query_job(inp)
        took = time.perf_counter() - started
        print(f"job: {result.rows:,} rows, {result.bytes / 1e6:.1f} MB of NDJSON in {took:.1f} s")
        print(f"  outcome: {result.outcome.get('status')}, error {result.outcome.get('error')}")
        print(f"  heartbeats: {len(beats)}, every 1,000 rows; at 10%, 50%, 90% of them:")
        for i in (len(beats) // 10, len(beats) // 2, len(beats) * 9 // 10, len(beats) - 1):
            t, rows, progress, size = beats[i]
            print(f"    {t:6.1f} s  rows_so_far {rows:>9,}  bytes_so_far {size:>11,}  progress {progress}")
        print(f"  resident memory: {before:.0f} MB before, peak {job_rss.peak:.0f} MB while the job ran")
        started = time.perf_counter()
        received = lines = 0
        with RssPeak() as read_rss:
            start_rss = RssPeak.now()
            body = s3.get_object(Bucket=BUCKET, Key=result.result_key)["Body"]
            for chunk in body.iter_chunks(chunk_size=1 << 16):  # as GET .../result streams it
                received += len(chunk)
                lines += chunk.count(b"\n")
        print(
            f"result streamed back: {received / 1e6:.1f} MB, {lines:,} lines in "
            f"{time.perf_counter() - started:.1f} s; resident memory {start_rss:.0f} MB at the start,"
            f" peak {read_rss.peak:.0f} MB"
        )
        assert received == result.bytes and lines == result.rows + 1
    finally:
        moto.terminate()
        moto.wait(10)


def _wait_for(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


if __name__ == "__main__":
    main()
