"""Cost of erasing one stream: seconds per erasure step for a stream of N executions (default 10,000).

Real parts, as in bench/projection.py: moto (S3, versioned evidence bucket) over HTTP in its own
process, Lance on moto, Boundary as a subprocess (chdb behind the batch-set endpoint, real mTLS),
and the Temporal dev server. Two streams are synthesized (distinct seeds and clock origins): the
one to erase and a neighbour (default 1,000 executions). Both are uploaded and projected with
ProjectionActivities (packs, then meta objects on --concurrency threads, like the worker), then
the big stream is erased by process euid through the real ErasureWorkflow (a worker in this
process runs the ErasureActivities). Prints the workflow's wall time, each step's time (from the
workflow history: activity start to completion, with its attempts and S3 listings), the
projection time (context: the baseline the erasure is compared with), the receipt's remaining
counts (all must be zero), the neighbour's fact counts, Lance rows and S3 objects before and
after (all unchanged), and moto's size (objects, bytes, resident and peak memory).

Lance lives under ``derived/`` in the versioned evidence bucket, as on the stack
(``--lance-bucket evidence``, the default). moto answers every ``list_object_versions`` call (one
per 1,000 entries) by deep-copying every version of every key in the bucket, bodies included, and
a versioned bucket keeps every Lance file ever written (deletes only add markers): the erasure's
former two listings per candidate CID (~3,200 at 10,000 executions) took moto to 22 GB. With one
listing per step moto peaks near 1 GiB at 10,000. ``--lance-bucket separate`` puts Lance in an
unversioned bucket of its own, so listings copy only the evidence (moto's cost, not S3's: S3 lists
a prefix), for larger runs.

    .venv/bin/python bench/erasure.py [--executions 10000] [--neighbours 1000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import logging  # noqa: E402

import conftest as fx  # noqa: E402
from bucket_corpus import Uploaded, build_objects, upload  # noqa: E402
from temporalio import activity  # noqa: E402
from temporalio.client import Client, WorkflowHandle  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from activities.erasure import ErasureActivities  # noqa: E402
from api.dataplane.boundary_client import BoundaryClient  # noqa: E402
from api.dataplane.lance_store import LEDGER, LanceStore  # noqa: E402
from formats import object_keys  # noqa: E402
from formats.contracts import erasure as e  # noqa: E402
from formats.contracts import projection as c  # noqa: E402
from formats.object_keys import Scope  # noqa: E402
from formats.synth.config import DEFAULT_ZERO_UNIX_NS, NS_PER_S, SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402
from formats.synth.truth import GroundTruth  # noqa: E402
from workflows.erasure import ErasureWorkflow  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)

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


def moto_memory(proc: subprocess.Popen[bytes]) -> str:
    """moto_server's resident and peak resident memory."""
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
        if ":" in line
    )
    gib = {k: int(fields[k].split()[0]) / 2**20 for k in ("VmRSS", "VmHWM")}
    return f"moto RSS {gib['VmRSS']:.2f} GiB (peak {gib['VmHWM']:.2f} GiB)"


def bucket_usage(s3: Any, bucket: str, *, versions: bool) -> str:
    """Objects and bytes per area (a stream, cas/, a Lance dataset), noncurrent versions apart."""
    n: Counter[str] = Counter()
    size: Counter[str] = Counter()

    def area(key: str) -> str:
        parts = key.split("/")
        return "/".join(parts[5:7] if parts[5] == "streams" else parts[5:6])

    if versions:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for v in page.get("Versions", []):
                name = area(v["Key"]) + ("" if v["IsLatest"] else " (noncurrent)")
                n[name] += 1
                size[name] += v["Size"]
            for m in page.get("DeleteMarkers", []):
                n[area(m["Key"]) + " (markers)"] += 1
    else:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for o in page.get("Contents", []):
                n[area(o["Key"])] += 1
                size[area(o["Key"])] += o["Size"]
    total = f"{sum(n.values())} objects, {sum(size.values()) / 2**20:.0f} MiB"
    return f"{total}: " + ", ".join(f"{k} {n[k]}/{size[k] / 2**20:.1f} MiB" for k in sorted(n))


async def step_seconds(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, float, int]]:
    """(activity, seconds from its last attempt's start to completion, attempts), in order."""
    names: dict[int, str] = {}
    started: dict[int, tuple[int, int]] = {}
    out: list[tuple[str, float, int]] = []
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            names[ev.event_id] = ev.activity_task_scheduled_event_attributes.activity_type.name
        elif ev.HasField("activity_task_started_event_attributes"):
            a = ev.activity_task_started_event_attributes
            started[ev.event_id] = (ev.event_time.ToNanoseconds(), a.attempt)
        elif ev.HasField("activity_task_completed_event_attributes"):
            a2 = ev.activity_task_completed_event_attributes
            t0, attempt = started[a2.started_event_id]
            out.append((names[a2.scheduled_event_id], (ev.event_time.ToNanoseconds() - t0) / 1e9, attempt))
    return out


async def erase_through_workflow(
    address: str, erasure: ErasureActivities, inp: e.ErasureInput
) -> tuple[e.ErasureStatus, list[tuple[str, float, int]], float]:
    client = await Client.connect(address)
    task_queue = f"bench-erasure-{time.time_ns()}"
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="activity") as pool:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ErasureWorkflow],
            activities=erasure.activities(),
            activity_executor=pool,
            max_concurrent_activities=4,
        ):
            t0 = time.perf_counter()
            handle = await client.start_workflow(
                ErasureWorkflow.run, inp, id=e.erasure_workflow_id(inp.erasure_id), task_queue=task_queue
            )
            status = await handle.result()
            wall = time.perf_counter() - t0
    return status, await step_seconds(handle), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--executions", type=int, default=10_000, help="executions of the erased stream")
    ap.add_argument("--neighbours", type=int, default=1_000, help="executions of the neighbouring stream")
    ap.add_argument("--concurrency", type=int, default=8, help="meta objects projected at once (worker: 8)")
    ap.add_argument(
        "--lance-bucket",
        choices=("separate", "evidence"),
        default="evidence",
        help="Lance under derived/ in the evidence bucket (default, as deployed) or in an unversioned bucket",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    moto_proc = fx.start_moto_process(port := fx.free_port())
    factory = fx.pytest.TempPathFactory(
        tmp, retention_count=1, retention_policy="none", trace=lambda *a: None, _ispytest=True
    )  # type: ignore[call-arg]
    fx.FACT_FLUSH_INTERVAL_S = None  # Boundary's production flush cadence
    fixtures = [fx.boundary.__wrapped__(factory), fx.temporal.__wrapped__(factory)]  # type: ignore[attr-defined]
    try:
        boundary, temporal = (next(f) for f in fixtures)
        run(args, tmp, fx.Moto(f"http://127.0.0.1:{port}"), moto_proc, boundary, temporal.address)
    finally:
        for f in fixtures:
            with contextlib.suppress(StopIteration):
                next(f)
        moto_proc.terminate()
        try:
            moto_proc.wait(10)
        except subprocess.TimeoutExpired:
            moto_proc.kill()
            moto_proc.wait(5)


def run(
    args: argparse.Namespace,
    tmp: Path,
    moto: Any,
    moto_proc: subprocess.Popen[bytes],
    boundary: Any,
    temporal_address: str,
) -> None:
    scope: Scope = boundary.scope
    ref = c.ScopeRef(scope.tenant_id, scope.project_id, scope.environment_id)
    s3 = moto.client("s3")
    bucket = "bench-erasure"
    s3.create_bucket(Bucket=bucket)
    # Versioned, as the evidence bucket is: the erasure deletes every version.
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    lance_bucket = bucket if args.lance_bucket == "evidence" else "bench-erasure-lance"
    if lance_bucket != bucket:
        s3.create_bucket(Bucket=lance_bucket)

    t0 = time.perf_counter()
    big = make_stream(tmp, scope, "erased", 701, args.executions, 0)
    near = make_stream(tmp, scope, "neighbour", 702, args.neighbours, 1)
    synth_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in (big, near):
        upload(s3, bucket, s.up)
    upload_s = time.perf_counter() - t0

    lance = fx.make_lance(moto, lance_bucket)
    client = boundary.client()
    acts = fx.make_activities(s3, bucket, lance, client, scope.tenant_id)
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
        print(f"after projection: {moto_memory(moto_proc)}", flush=True)
        print(f"  evidence bucket: {bucket_usage(s3, bucket, versions=True)}")
        if lance_bucket != bucket:
            print(f"  lance bucket:    {bucket_usage(s3, lance_bucket, versions=False)}")
        before_big = snapshot(client, lance, s3, bucket, scope, big)
        before_near = snapshot(client, lance, s3, bucket, scope, near)
        print(f"before: erased stream {before_big}")
        print(f"before: neighbour     {before_near}")

        # S3 listing calls per step (every erasure step lists object versions by prefix).
        listing: Counter[str] = Counter()
        listing_s: dict[str, float] = {}
        inner_list = s3.list_object_versions

        def counted_list(**kw: Any) -> Any:
            step = activity.info().activity_type if activity.in_activity() else "-"
            t0 = time.perf_counter()
            try:
                return inner_list(**kw)
            finally:
                listing[step] += 1
                listing_s[step] = listing_s.get(step, 0.0) + time.perf_counter() - t0

        s3.list_object_versions = counted_list
        inp = e.ErasureInput(
            f"ers_bench{time.time_ns()}", ref, e.Selector(process_euids=(big.euid,)), requested_by="bench"
        )
        print(
            f"erasure of 1 stream by process euid ({args.executions} executions), ErasureWorkflow:",
            flush=True,
        )
        status, steps, wall = asyncio.run(erase_through_workflow(temporal_address, erasure, inp))
        for name, secs, attempts in steps:
            print(
                f"  {name.removeprefix('erasure_'):24s} {secs:8.2f} s  attempts {attempts};"
                f" S3 list_object_versions: {listing[name]} calls, {listing_s.get(name, 0.0):.2f} s"
            )
        in_steps = sum(secs for _, secs, _ in steps)
        receipt = status.receipt or {}
        roots = int(receipt.get("root_ids", 0))
        print(
            f"  {'workflow (wall)':24s} {wall:8.2f} s  ({1000 * wall / max(1, roots):.2f} ms/execution;"
            f" steps {in_steps:.2f} s, Temporal {wall - in_steps:.2f} s;"
            f" ratio erasure/projection of all {n_proj} executions = {wall / project_s:.2f})"
        )
        print(f"after erasure: {moto_memory(moto_proc)}")
        r_s3, r_facts, r_lance = receipt.get("s3", {}), receipt.get("boundary", {}), receipt.get("lance", {})
        print(
            f"state {status.state}, error {status.error};"
            f" plan: {status.streams_matched} stream, {roots} roots"
        )
        print(
            f"deleted: {r_s3.get('object_versions_deleted')} object versions,"
            f" {r_s3.get('delete_markers_deleted')} markers; facts"
            f" {sum(r_facts.get('fact_rows_deleted', {}).values())} rows {r_facts.get('fact_rows_deleted')};"
            f" lance {sum(r_lance.get('rows_deleted', {}).values())} rows {r_lance.get('rows_deleted')};"
            f" shared objects deleted {r_s3.get('shared_objects_deleted')},"
            f" kept {r_s3.get('shared_cids_kept')};"
            f" old lance versions removed {sum(r_lance.get('old_versions_removed', {}).values())}"
        )
        print(
            "receipt remaining (must all be 0):"
            f" s3 {r_s3.get('remaining_object_versions')}, boundary {r_facts.get('remaining_total')},"
            f" lance current {sum(r_lance.get('remaining_rows_current', {}).values())},"
            f" lance all versions {sum(r_lance.get('remaining_rows_all_versions', {}).values())}"
            f" -> verified={receipt.get('verified')}"
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
        if not (status.state == e.SUCCEEDED and receipt.get("verified") and big_gone and near_kept):
            raise SystemExit("erasure bench: the erasure did not verify or the neighbour changed")
    finally:
        acts.close()
        client.close()


if __name__ == "__main__":
    main()
