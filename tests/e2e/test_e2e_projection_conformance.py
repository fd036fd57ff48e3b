"""The projection contract's privacy, lost-response and batch-idempotency conformance tests, on an
embedded stack whose Boundary records every request it receives (``BAML_STUDIO_BOUNDARY_RECORD_
REQUESTS_PATH``, api/boundary/recording.py; docs/operations.md "Tests").

* privacy: an end-to-end run (synth → publisher → gateway → bucket → bridge → worker → Boundary)
  plus coordinator queries with private predicates; no value body and no string of a value is in
  any byte Boundary received, opened every way it can be (compressed, JSON, base64, Arrow IPC).
* lost response: a TCP proxy between a worker of our own and Boundary's workload port cuts the
  connection once, after Boundary handled a large upload and before its answer reaches the worker;
  the retry completes with the same ids and one row set.
* batch idempotency: a recorded real batch PUT again is answered with the same visible state and
  changes nothing; the same batch id with another digest is 409 ``batch_digest_conflict``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pytest
from boundary_recording import arrow_table, json_string_leaves, open_records, recorded_batches
from e2e_world import Corpus, World, stack_world
from tcp_proxy import DroppingProxy
from temporalio.client import Client

from api.boundary.recording import read_records
from api.dataplane.boundary_client import BoundaryError
from formats import cas
from formats.contracts import ids
from formats.contracts import projection as c
from formats.synth.config import SynthConfig
from formats.synth.generator import synthesize
from publisher import Publisher, PublisherSettings
from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow

pytestmark = pytest.mark.stack

RECORD_ENV = "BAML_STUDIO_BOUNDARY_RECORD_REQUESTS_PATH"
MIN_BODY_BYTES = 8


@dataclass
class Recorded:
    world: World
    path: Path

    def records(self) -> list[dict]:  # type: ignore[type-arg]
        return list(read_records(self.path))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    base = tmp_path_factory.mktemp("e2e-rec")
    path = base / "boundary-requests.jsonl"
    with stack_world(base, {RECORD_ENV: str(path)}) as world:
        yield Recorded(world, path)


# --- privacy -----------------------------------------------------------------------------------


def _cas_bodies(root: Path, cids: set[str]) -> list[bytes]:
    """Codec-1 bodies of the given CIDs, read from the profile directory's CAS files."""
    bodies = []
    for text in sorted(cids):
        cid = cas.cid_from_string(text)
        obj = cas.decode_cas_file(str(root / cas.cas_relative_path(cid)))
        assert obj.codec == cas.CODEC_VALUE and obj.cid == cid
        bodies.append(obj.body)
    return bodies


def _query(world: World, sql: str) -> list[dict]:  # type: ignore[type-arg]
    assert world.state.user_token
    resp = httpx.post(
        f"{world.state.coordinator_url}/v1/query",
        json={"sql": sql},
        headers={"Authorization": f"Bearer {world.state.user_token}"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    lines = [json.loads(line) for line in resp.text.splitlines() if line.strip()]
    outcome = lines[-1]["queryOutcome"]
    assert not outcome.get("error"), outcome
    return lines[:-1]


def test_privacy_no_value_crosses_into_boundary(recorded: Recorded, tmp_path: Path) -> None:
    world = recorded.world
    root = tmp_path / "profiles"
    truth = synthesize(root, SynthConfig(seed=7301, executions=20, p_large_value=0.1))
    spans = [(e, s) for e in truth.executions for s in e.spans]
    cids = {v.cid for _, s in spans for v in s.values if v.cid}
    # Read before publishing: the publisher's retention may remove shipped CAS files.
    bodies = _cas_bodies(root, cids)
    strings = set().union(*(json_string_leaves(v.json, 6) for _, s in spans for v in s.values))
    assert len(bodies) == len(cids) > 20 and len(strings) > 50

    assert world.state.publisher_token
    pub = Publisher(
        PublisherSettings(
            gateway_url=world.state.gateway_url, token=world.state.publisher_token, profile_dir=root
        )
    )
    report = pub.run_once(60)
    assert report is not None and report.ok, pub.stopped_reason
    exec_ids = {e.execution_id for e in truth.executions}
    world.wait_in_ledger(exec_ids, timeout=120)

    # Coordinator queries whose private predicates carry literals taken from the values.
    invoice = next(
        (e, s, v.json["invoice"]["id"])
        for e, s in spans
        for v in s.values
        if v.role == "input" and isinstance(v.json, dict) and isinstance(v.json.get("invoice"), dict)
    )
    inv_exec, inv_span, inv_id = invoice
    reply = next(
        (e, s, v.json["reply"])
        for e, s in spans
        for v in s.values
        if v.role == "output" and isinstance(v.json, dict) and isinstance(v.json.get("reply"), str)
    )
    rep_exec, _rep_span, rep_text = reply
    word = max(rep_text.split(), key=len).strip(".,!?")
    assert len(word) >= 6
    private_literals = {inv_id, word}
    exact = _query(
        world,
        f"SELECT execution_id, args['invoice']['id'] AS inv FROM calls_v1 "
        f"WHERE function_name = '{inv_span.function}' AND args['invoice']['id'] = '{inv_id}' LIMIT 50",
    )
    assert (inv_exec.execution_id, inv_id) in {(r["execution_id"], r["inv"]) for r in exact}
    like = _query(
        world,
        f"SELECT execution_id, output['reply'] AS reply FROM calls_v1 "
        f"WHERE execution_id = '{rep_exec.execution_id}' AND output['reply'] LIKE '%{word}%' LIMIT 20",
    )
    assert rep_text in {r["reply"] for r in like}
    public = _query(world, "SELECT function_name, count() AS n FROM calls_v1 GROUP BY function_name")
    assert sum(r["n"] for r in public) >= len(spans)

    records = recorded.records()
    resident = [r for r in records if r["path"] == "/resident-queries"]
    assert len(resident) >= 3, "the coordinator's resident subqueries were not recorded"
    # Non-vacuous: the recording holds every projected call of this run, exactly as sent.
    call_rows: set[tuple[str, str]] = set()
    for batch in recorded_batches(records):
        if batch.headers.relation == "calls_v1" and batch.headers.root_id in exec_ids:
            table = arrow_table(batch.body)
            assert table is not None
            call_rows |= set(
                zip(table["execution_id"].to_pylist(), table["call_id"].to_pylist(), strict=True)
            )
    assert len(call_rows) == len(spans) == truth.spans

    opened = open_records(records)
    assert opened.arrow_tables > 0 and opened.json_bodies > 0
    raw, text = opened.byte_haystack(), opened.text_haystack()
    # A body of a few bytes (a bool, an empty list: `\x12\x00`) occurs by chance in any binary
    # stream and holds no string; every body long enough to be identifying is searched for.
    searched = [b for b in bodies if len(b) >= MIN_BODY_BYTES]
    assert len(searched) >= 0.8 * len(bodies)
    leaked_bodies = [b[:24] for b in searched if b in raw]
    assert not leaked_bodies, f"{len(leaked_bodies)} value bodies reached Boundary"
    leaked = sorted(s for s in strings | private_literals if s in text or s.encode() in raw)
    assert not leaked, f"value strings reached Boundary: {leaked[:10]}"


# --- lost response -----------------------------------------------------------------------------


def _worker_env(world: World, task_queue: str, boundary_url: str) -> dict[str, str]:
    s = world.state
    p = "BAML_STUDIO_WORKER_"
    return {
        **os.environ,
        "BAML_STUDIO_STACK_RUN_DIR": s.run_dir,
        "BAML_STUDIO_EMBEDDED_STACK": "1",  # a second worker of the embedded stack (its "test" keys)
        p + "TEMPORAL_ADDRESS": s.temporal_address,
        p + "TEMPORAL_NAMESPACE": s.temporal_namespace,
        p + "TASK_QUEUE": task_queue,
        p + "S3_ENDPOINT_URL": s.s3_endpoint_url,
        p + "AWS_REGION": s.aws_region,
        p + "AWS_ACCESS_KEY_ID": s.aws_access_key_id,
        p + "AWS_SECRET_ACCESS_KEY": s.aws_secret_access_key,
        p + "BUCKET": s.bucket,
        p + "BOUNDARY_WORKLOAD_URL": boundary_url,
        p + "TLS_DIR": str(Path(s.run_dir) / "tls"),
        # The stack's environment, with no project: keys in scope, but no Sweep/Index schedules
        # (the stack's worker owns those; ours would re-point them at this task queue).
        "BAML_STUDIO_PROJECTION_ENVIRONMENT_IDS": json.dumps([world.scope.environment_id]),
    }


def _upload_quietly(world: World, corpus: Corpus) -> None:
    """Upload without bucket notifications, so the stack's bridge and worker never see the objects."""
    bucket = world.state.bucket
    saved = world.s3.get_bucket_notification_configuration(Bucket=bucket)
    saved.pop("ResponseMetadata", None)
    world.s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
    try:
        world.upload(corpus)
    finally:
        world.s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=saved)


async def _project(
    world: World, corpus: Corpus, task_queue: str, generation: int, prefix: str
) -> list[c.WorkflowOutcomes]:
    client = await Client.connect(world.state.temporal_address, namespace=world.state.temporal_namespace)
    packs = [
        client.execute_workflow(
            IngestValuePackWorkflow.run,
            c.PackWorkflowInput(key),
            id=prefix + ids.ingest_pack_id(key),
            task_queue=task_queue,
        )
        for key in corpus.up.pack_keys
    ]
    await asyncio.gather(*packs)
    pending = c.PendingPolicy(initial_s=1.0, max_s=2.0, deadline_s=90.0)
    metas = [
        client.execute_workflow(
            ProjectMetaObjectWorkflow.run,
            c.ProjectMetaWorkflowInput(key, generation, pending=pending),
            id=prefix + ids.project_meta_id(generation, key),
            task_queue=task_queue,
        )
        for key in corpus.up.meta_keys
    ]
    return list(await asyncio.gather(*metas))


@contextmanager
def _own_worker(world: World, boundary_url: str, log_path: Path) -> Iterator[str]:
    """A worker of our own on a fresh task queue talking to Boundary at ``boundary_url``; stopped after."""
    queue = f"e2e-own-{time.time_ns()}"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "worker.temporal_worker"],
            env=_worker_env(world, queue, boundary_url),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield queue
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)


def test_lost_response_from_boundary_is_repaired(recorded: Recorded, tmp_path: Path) -> None:
    world = recorded.world
    corpus = world.corpus(tmp_path, executions=16)
    roots = sorted(corpus.ended())
    env_id = world.scope.environment_id
    generation = world.boundary.active_generation(env_id).generation
    _upload_quietly(world, corpus)
    target = urlsplit(world.state.boundary_workload_url)
    assert target.hostname and target.port
    before = len(recorded.records())
    with (
        DroppingProxy((target.hostname, target.port), drop_after_upload_bytes=16 << 10) as proxy,
        _own_worker(world, f"https://{target.hostname}:{proxy.port}", tmp_path / "worker.log") as queue,
    ):
        results = asyncio.run(asyncio.wait_for(_project(world, corpus, queue, generation, ""), 180))
        assert proxy.log.dropped, "no response was lost: the proxy saw no upload above its threshold"
        assert all(r.done and r.quarantined is None for r in results), results
        first = world.boundary.projection_fact_counts(env_id, roots, generation=generation).counts
        # The same objects projected again (an explicit re-run) change nothing: same ids.
        again = asyncio.run(asyncio.wait_for(_project(world, corpus, queue, generation, "rerun/"), 180))
        assert all(r.done for r in again)
        second = world.boundary.projection_fact_counts(env_id, roots, generation=generation).counts
    assert len(proxy.log.dropped) == 1
    projected = {o.root_id for r in results for o in r.outcomes if o.outcome != c.PENDING}
    assert set(roots) <= projected
    spans = sum(len(e.spans) for e in corpus.truth.executions if e.execution_id in set(roots))
    assert first["calls_v1"] == spans
    assert world.root_rows(set(roots), generation) == dict.fromkeys(roots, 1)
    assert second == first
    # The lost request reached Boundary and was sent again whole: a batch request body twice.
    ours = [
        r
        for r in recorded.records()[before:]
        if r["path"].startswith("/projection-batch") and any(root.encode() in r["body"] for root in roots)
    ]
    repeats = Counter(r["body"] for r in ours)
    assert max(repeats.values()) >= 2, "no batch request was repeated after the lost response"


# --- batch idempotency -------------------------------------------------------------------------


def test_batch_idempotency_and_digest_conflict(recorded: Recorded, tmp_path: Path) -> None:
    world = recorded.world
    corpus = world.corpus(tmp_path, executions=6)
    env_id = world.scope.environment_id
    roots = sorted(corpus.ended())
    # Projected by a worker of our own (the bridge path is covered by the privacy test).
    _upload_quietly(world, corpus)
    generation = world.boundary.active_generation(env_id).generation
    with _own_worker(world, world.state.boundary_workload_url, tmp_path / "worker.log") as queue:
        results = asyncio.run(asyncio.wait_for(_project(world, corpus, queue, generation, ""), 180))
    assert all(r.done for r in results)
    sent = [b for b in recorded_batches(recorded.records()) if b.headers.root_id in set(roots)]
    calls = next(b for b in sent if b.headers.relation == "calls_v1")
    table = arrow_table(calls.body)
    assert table is not None and table.num_rows >= 2
    before = world.boundary.projection_fact_counts(env_id, roots, generation=calls.headers.generation)

    # The same batch twice more: each answered with the same visible state, nothing added.
    states = [
        world.boundary.put_projection_batch(calls.batch_id, calls.headers, calls.body) for _ in range(2)
    ]
    assert states[0] == states[1]
    assert states[0].state == "visible" and states[0].rows == table.num_rows
    assert states[0].content_digest == calls.headers.content_digest
    after = world.boundary.projection_fact_counts(env_id, roots, generation=calls.headers.generation)
    assert after.counts == before.counts

    # Same batch id, another digest (one row fewer): a conflict, and still nothing changes.
    other = _ipc(table.slice(0, table.num_rows - 1))
    headers = calls.headers.model_copy(
        update={
            "content_digest": "sha256:" + hashlib.sha256(other).hexdigest(),
            "row_count": table.num_rows - 1,
        }
    )
    with pytest.raises(BoundaryError) as conflict:
        world.boundary.put_projection_batch(calls.batch_id, headers, other)
    assert conflict.value.status == 409 and conflict.value.code == "batch_digest_conflict"

    # The bulk endpoint: the repeat is visible with the same state, the conflict refused alone.
    result = world.boundary.put_projection_batch_set(
        [(calls.batch_id, calls.headers, calls.body), (calls.batch_id, headers, other)]
    )
    assert [r.status for r in result.results] == [200, 409]
    assert result.results[0].state == states[0]
    assert result.results[1].problem is not None and result.results[1].problem.code == "batch_digest_conflict"
    final = world.boundary.projection_fact_counts(env_id, roots, generation=calls.headers.generation)
    assert final.counts == before.counts
    assert before.counts["calls_v1"] == sum(
        len(e.spans) for e in corpus.truth.executions if e.execution_id in roots
    )


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
