"""Cost of erasing one stream: seconds per erasure step for a stream of N executions (default 10,000).

Real parts, as in bench/projection.py: moto (S3, versioned bucket) over HTTP in its own process,
Lance on moto, Boundary as a subprocess (chdb behind the batch-set endpoint, real mTLS). Two
streams are synthesized (distinct seeds and clock origins): the one to erase and a neighbour
(default 1,000 executions). Both are uploaded and projected with ProjectionActivities (packs, then
meta objects on --concurrency threads, like the worker), then the big stream is erased by process
euid by calling the ErasureActivities steps in the workflow's order (no Temporal: its overhead is
one workflow task per step). Prints the seconds of each step and the total, the projection time
(context: the baseline the erasure is compared with), the receipt's remaining counts (all must be
zero) and the neighbour's fact counts, Lance rows and S3 objects before and after (all unchanged).

    .venv/bin/python bench/erasure.py [--executions 10000] [--neighbours 1000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import logging  # noqa: E402

import conftest as fx  # noqa: E402
from bucket_corpus import Uploaded, build_objects, upload  # noqa: E402

from activities import contracts as c  # noqa: E402
from activities import erasure_contracts as e  # noqa: E402
from activities.erasure import ErasureActivities  # noqa: E402
from activities.fact_sink import BoundaryFactSink  # noqa: E402
from activities.lance_store import LEDGER, LanceStore  # noqa: E402
from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.common.boundary_client import BoundaryClient  # noqa: E402
from formats import object_keys  # noqa: E402
from formats.object_keys import Scope  # noqa: E402
from formats.synth.config import DEFAULT_ZERO_UNIX_NS, NS_PER_S, SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402
from formats.synth.truth import GroundTruth  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)

T = TypeVar("T")
_FACT_CHUNK = 10_000  # Boundary's limit of root_ids per fact-count request


@dataclass
class Stream:
    name: str
    truth: GroundTruth
    up: Uploaded

    @property
    def euid(self) -> str:
        (euid,) = self.truth.streams
        return euid

    @property
    def root_ids(self) -> list[str]:
        return sorted(x.execution_id for x in self.truth.executions)

    @property
    def ended(self) -> int:
        return sum(1 for x in self.truth.executions if x.status != "abandoned")


def start_moto(port: int) -> subprocess.Popen[bytes]:
    # Its own process, as S3 is in production: moto's request handling does not share our GIL.
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return proc
        if time.monotonic() > deadline:
            proc.terminate()
            raise RuntimeError("moto_server did not start")
        time.sleep(0.1)


def make_stream(tmp: Path, scope: Scope, name: str, seed: int, executions: int, day: int) -> Stream:
    # 10 spans per execution (1 root + 7 LLM + 2 selected), as in bench/projection.py; each stream
    # has its own seed (so its own euid and values) and its own clock origin.
    cfg = SynthConfig(
        seed=seed,
        executions=executions,
        llm_calls=(7, 7),
        selected_calls=(2, 2),
        rate_per_second=200,
        zero_unix_ns=DEFAULT_ZERO_UNIX_NS + day * 86_400 * NS_PER_S,
    )
    truth = synthesize(tmp / name, cfg)
    return Stream(name, truth, build_objects(tmp / name, scope))


def fact_counts(client: BoundaryClient, scope: Scope, roots: list[str]) -> dict[str, int]:
    """Boundary's fact rows of these roots per relation, every generation."""
    out: Counter[str] = Counter()
    for start in range(0, len(roots), _FACT_CHUNK):
        counts = client.projection_fact_counts(
            scope.environment_id, roots[start : start + _FACT_CHUNK], generation=None
        )
        out.update(counts.counts)
    return dict(out)


def lance_rows(lance: LanceStore, scope: Scope, euid: str) -> dict[str, int]:
    return {
        LEDGER: lance.count(scope, LEDGER, f"process_euid = '{euid}'"),
        "cid_refs_v1": lance.count(scope, "cid_refs_v1", f"process_euid = '{euid}'"),
        "calls_v1": lance.count(scope, "calls_v1", f"starts_with(execution_id, '{euid}')"),
        "value_leaves_v1": lance.count(scope, "value_leaves_v1", f"starts_with(execution_id, '{euid}')"),
    }


def s3_versions(s3: Any, bucket: str, prefix: str) -> int:
    n = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        n += len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))
    return n


def snapshot(
    client: BoundaryClient, lance: LanceStore, s3: Any, bucket: str, scope: Scope, stream: Stream
) -> dict[str, Any]:
    facts = fact_counts(client, scope, stream.root_ids)
    return {
        "fact_rows": sum(facts.values()),
        "facts": facts,
        "lance": lance_rows(lance, scope, stream.euid),
        "s3_object_versions": s3_versions(s3, bucket, object_keys.stream_prefix(scope, stream.euid)),
    }


def timed(steps: dict[str, float], name: str, fn: Callable[[], T], listing: dict[str, Any]) -> T:
    calls, secs = listing["calls"], listing["seconds"]
    t0 = time.perf_counter()
    out = fn()
    steps[name] = time.perf_counter() - t0
    print(
        f"  {name:24s} {steps[name]:8.2f} s  (S3 list_object_versions: {listing['calls'] - calls} calls,"
        f" {listing['seconds'] - secs:.2f} s)",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--executions", type=int, default=10_000, help="executions of the erased stream")
    ap.add_argument("--neighbours", type=int, default=1_000, help="executions of the neighbouring stream")
    ap.add_argument("--concurrency", type=int, default=8, help="meta objects projected at once (worker: 8)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    moto_proc = start_moto(port := fx.free_port())
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )  # type: ignore[call-arg]
    gen = fx.boundary.__wrapped__(factory)  # type: ignore[attr-defined]
    boundary = next(gen)
    try:
        run(args, tmp, fx.Moto(f"http://127.0.0.1:{port}"), boundary)
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)
        moto_proc.terminate()
        try:
            moto_proc.wait(10)
        except subprocess.TimeoutExpired:
            moto_proc.kill()
            moto_proc.wait(5)


def run(args: argparse.Namespace, tmp: Path, moto: Any, boundary: Any) -> None:
    scope: Scope = boundary.scope
    ref = c.ScopeRef(scope.tenant_id, scope.project_id, scope.environment_id)
    s3 = moto.client("s3")
    bucket = "bench-erasure"
    s3.create_bucket(Bucket=bucket)
    # Versioned, as the evidence bucket is: the erasure deletes every version.
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})

    t0 = time.perf_counter()
    big = make_stream(tmp, scope, "erased", 701, args.executions, 0)
    near = make_stream(tmp, scope, "neighbour", 702, args.neighbours, 1)
    synth_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in (big, near):
        upload(s3, bucket, s.up)
    upload_s = time.perf_counter() - t0

    lance = fx.make_lance(moto, bucket)
    client = boundary.client()
    acts = ProjectionActivities(
        s3=s3,
        bucket=bucket,
        lance=lance,
        sink=BoundaryFactSink(client),
        settings=ProjectionSettings(),
        tenant_id=scope.tenant_id,
    )
    erasure = ErasureActivities(s3=s3, bucket=bucket, boundary=client, lance=lance)
    try:
        t0 = time.perf_counter()
        for s in (big, near):
            for k in s.up.pack_keys:
                acts.ingest_pack(c.IngestPackInput(k))
        outcomes: Counter[str] = Counter()
        meta = big.up.meta_keys + near.up.meta_keys
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            for result in pool.map(lambda k: acts.project_meta_object(c.ProjectMetaInput(k, 1)), meta):
                outcomes.update(o.outcome for o in result.outcomes)
        project_s = time.perf_counter() - t0
        n_proj = sum(outcomes.values())
        print(
            f"corpus: erased stream {args.executions} executions ({big.ended} ended), neighbour"
            f" {args.neighbours} ({near.ended} ended); synth {synth_s:.1f} s, upload {upload_s:.1f} s"
        )
        print(
            f"objects: erased stream {len(big.up.meta_keys)} meta, {len(big.up.data_keys)} data,"
            f" {len(big.up.pack_keys)} packs; shared {len(big.up.table_keys) + len(near.up.table_keys)}"
            f" tables, {len(big.up.value_keys) + len(near.up.value_keys)} large values"
        )
        print(
            f"projection ({args.concurrency} threads): {n_proj} executions in {project_s:.2f} s"
            f" -> {n_proj / project_s:.0f} executions/s ({dict(outcomes)})"
        )
        before_big = snapshot(client, lance, s3, bucket, scope, big)
        before_near = snapshot(client, lance, s3, bucket, scope, near)
        print(f"before: erased stream {before_big}")
        print(f"before: neighbour     {before_near}")

        # S3 listing calls per step (every erasure step lists object versions by prefix).
        listing = {"calls": 0, "seconds": 0.0}
        inner_list = s3.list_object_versions

        def counted_list(**kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner_list(**kw)
            finally:
                listing["calls"] += 1
                listing["seconds"] += time.perf_counter() - t0

        s3.list_object_versions = counted_list
        steps: dict[str, float] = {}
        eid = "ers_bench"
        print(f"erasure of 1 stream by process euid ({args.executions} executions):", flush=True)
        plan = timed(
            steps,
            "resolve",
            lambda: erasure.resolve(e.ResolveInput(eid, ref, e.Selector(process_euids=(big.euid,)))),
            listing,
        )
        step = e.PlanInput(eid, plan)
        deleted = timed(steps, "delete_stream_objects", lambda: erasure.delete_stream_objects(step), listing)
        facts = timed(steps, "erase_facts", lambda: erasure.erase_facts(step), listing)
        rows = timed(steps, "erase_lance_rows", lambda: erasure.erase_lance_rows(step), listing)
        shared = timed(steps, "delete_unreferenced", lambda: erasure.delete_unreferenced(step), listing)
        cleanup = timed(
            steps,
            "cleanup_lance_versions",
            lambda: erasure.cleanup_lance_versions(e.CleanupInput(eid, ref)),
            listing,
        )
        check = timed(steps, "verify", lambda: erasure.verify(step), listing)
        total = sum(steps.values())
        print(
            f"  {'total':24s} {total:8.2f} s  ({1000 * total / max(1, len(plan.root_ids)):.2f} ms/execution;"
            f" ratio erasure/projection of all {n_proj} executions = {total / project_s:.2f})"
        )

        print(
            f"plan: {len(plan.streams)} stream, {len(plan.root_ids)} roots,"
            f" {len(plan.candidate_cids)} candidate CIDs"
        )
        print(
            f"deleted: {deleted.versions_deleted} object versions, {deleted.delete_markers_deleted} markers;"
            f" facts {sum(facts.deleted.values())} rows {facts.deleted};"
            f" lance {sum(rows.rows_deleted.values())} rows {rows.rows_deleted};"
            f" shared objects deleted {shared.objects_deleted}, kept {shared.objects_kept},"
            f" values_v1 rows deleted {shared.values_rows_deleted};"
            f" old lance versions removed {sum(cleanup.versions_removed.values())}"
        )
        print(
            "receipt remaining (must all be 0):"
            f" s3 {check.s3_object_versions}, boundary {check.boundary_fact_total},"
            f" lance current {sum(check.lance_rows_current.values())},"
            f" lance all versions {sum(check.lance_rows_retained_versions.values())}"
            f" -> verified={check.clean}"
        )
        after_big = snapshot(client, lance, s3, bucket, scope, big)
        after_near = snapshot(client, lance, s3, bucket, scope, near)
        print(f"after:  erased stream {after_big}")
        print(f"after:  neighbour     {after_near}")
        big_gone = after_big["fact_rows"] == 0 and not any(after_big["lance"].values())
        near_kept = after_near == before_near and before_near["lance"][LEDGER] == near.ended
        print(
            f"erased stream gone: {big_gone and after_big['s3_object_versions'] == 0};"
            f" neighbour unchanged with all {near.ended} ended executions: {near_kept}"
        )
        if not (check.clean and big_gone and near_kept):
            raise SystemExit("erasure bench: the erasure did not verify or the neighbour changed")
    finally:
        acts.close()
        client.close()


if __name__ == "__main__":
    main()
