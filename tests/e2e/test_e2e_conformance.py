"""The contract's conformance set, each a named test, against the running embedded stack.

Objects are uploaded into the stack's bucket exactly as the publisher lays them out; the bucket
notifies the projection queue, the stack's SQS bridge starts the workflows, the stack's worker
projects. Every corpus has a fresh seed, so tests sharing the stack never share executions.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from e2e_world import World, wait_for
from temporalio.client import Client

from formats import meta_segment as ms
from formats.contracts import Workload, ids
from formats.contracts import projection as c
from formats.contracts import task_queue as queue_of
from formats.integrity import verify_trailer
from formats.object_keys import data_segment_key, meta_segment_key, parse_evidence_key
from formats.zstd_frame import compress_object, decompress_object
from worker.bridge.messages import replay_body
from workflows.maintenance import SweepWorkflow

pytestmark = pytest.mark.stack


def _meta_roots(body: bytes, key: str) -> tuple[set[str], set[str]]:
    seg = ms.decode_meta_segment(decompress_object(body, file=key), file=key)
    started = {r.root.execution_id for r in seg.records if isinstance(r, ms.RootStarted)}
    ended = {r.root.execution_id for r in seg.records if isinstance(r, ms.RootEnded)}
    return started, ended


async def _runs(address: str, workflow_id: str) -> int:
    client = await Client.connect(address)
    return len([w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")])


def test_duplicate_delivery(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=20)
    world.upload(corpus)
    world.wait_in_ledger(corpus.ended())
    # Deliver every meta object and pack twice more (the replay tool's shape, same as S3's).
    for key in corpus.up.meta_keys + corpus.up.pack_keys:
        for _ in range(2):
            world.sqs.send_message(
                QueueUrl=world.state.queue_url, MessageBody=replay_body(world.state.bucket, key)
            )
    wait_for(world.queue_drained, 60, "the redeliveries to be handled")
    rows = world.root_rows(corpus.ended())
    assert rows == dict.fromkeys(corpus.ended(), 1)
    for key in corpus.up.meta_keys:
        assert asyncio.run(_runs(world.state.temporal_address, ids.project_meta_id(1, key))) == 1


def test_root_ended_whose_pack_has_not_landed(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=15)
    packs = set(corpus.up.pack_keys)
    assert packs
    world.upload(corpus, skip=packs)
    # Pending: the message is held while the workflow waits for values; nothing is projected.
    wait_for(lambda: world.status()["executions"]["pending"] >= len(corpus.ended()), 30, "pending executions")
    time.sleep(3)
    assert not (set(world.ledger()) & corpus.ended())
    assert not world.queue_drained()
    for key in sorted(packs):
        world.put(key, corpus.up.bodies[key])
    world.wait_in_ledger(corpus.ended(), timeout=150)
    wait_for(world.queue_drained, 60, "the held messages to be deleted")
    assert world.root_rows(corpus.ended()) == dict.fromkeys(corpus.ended(), 1)


def test_stream_without_root_ended(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=6, unfinished_per_process=3)
    world.upload(corpus)
    world.wait_in_ledger(corpus.ended())
    assert len(corpus.open()) == 3 and not (set(world.ledger()) & corpus.open())
    time.sleep(1.5)  # the stream is now silent for longer than the test's silence limit

    async def sweep() -> c.SweepResult:
        client = await Client.connect(world.state.temporal_address)
        scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
        return await client.execute_workflow(
            SweepWorkflow.run,
            c.SweepInput(scope, silence_limit_s=1.0),
            id=f"sweep-test-{time.time_ns()}",
            task_queue=queue_of(world.state.task_queue, Workload.MAINTENANCE),
        )

    result = asyncio.run(sweep())
    assert corpus.open() <= {o.root_id for o in result.outcomes if o.outcome == c.ABANDONED}
    ledger = world.ledger()
    assert all(ledger[r].status == "abandoned" for r in corpus.open())
    assert world.root_rows(corpus.open()) == dict.fromkeys(corpus.open(), 1)


def test_segment_with_bad_trailing_checksum(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=40, segment_target_bytes=8192)
    metas = corpus.up.meta_keys
    assert len(metas) >= 3
    bad = metas[len(metas) // 2]
    earlier: set[str] = set()
    for key in metas[: len(metas) // 2]:
        earlier |= _meta_roots(corpus.up.bodies[key], key)[1]
    raw = bytearray(decompress_object(corpus.up.bodies[bad]))
    raw[-1] ^= 0xFF  # the trailing SHA-256
    _, ended = _meta_roots(corpus.up.bodies[bad], bad)
    corpus.up.bodies[bad] = compress_object(bytes(raw))
    world.upload(corpus)
    neighbours = corpus.ended() - ended
    world.wait_in_ledger(neighbours)
    wait_for(lambda: world.marker_exists(bad), 30, "the quarantine marker")
    wait_for(world.queue_drained, 30, "the queue to drain")
    marker = json.loads(
        world.s3.get_object(Bucket=world.state.bucket, Key=f"quarantine/{bad}.quarantine")["Body"].read()
    )
    assert marker["key"] == bad and marker["reason"] == "checksum_mismatch"
    assert world.s3.head_object(Bucket=world.state.bucket, Key=bad)  # the object itself is kept
    ledger = world.ledger()
    assert not (ended & set(ledger))
    # Every neighbour is done; those that ended before the bad segment are untouched by it.
    assert earlier and all(ledger[r].index_state == "complete" for r in earlier)
    dlq = [m for m in world.dead_letters() if bad in m["Body"] or bad.replace("/", "%2F") in m["Body"]]
    assert dlq, "the message was not dead-lettered"


def test_interior_gap(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=30, p_long=0.5, segment_target_bytes=4096)
    spanning = [
        e
        for e in corpus.truth.executions
        if e.status != "abandoned"
        and e.data_first_seq is not None
        and e.data_last_seq is not None
        and e.data_last_seq - e.data_first_seq >= 2
    ]
    assert spanning, "the corpus has no execution spanning three data segments"
    victim = spanning[0]
    assert victim.data_first_seq is not None
    missing_seq = victim.data_first_seq + 1
    missing = data_segment_key(world.scope, victim.stream, missing_seq)
    assert missing in corpus.up.bodies
    world.upload(corpus, skip={missing})
    ledger = world.wait_in_ledger(corpus.ended())
    hit = {
        e.execution_id
        for e in spanning
        if e.data_first_seq is not None
        and e.data_last_seq is not None
        and e.data_first_seq < missing_seq < e.data_last_seq
    }
    assert victim.execution_id in hit
    for root in hit:
        assert ledger[root].index_state == "index_corrupt"
    untouched = {
        e.execution_id
        for e in corpus.truth.executions
        if e.status != "abandoned"
        and e.data_first_seq is not None
        and e.data_last_seq is not None
        and e.data_last_seq < missing_seq - 1
    }
    assert all(ledger[r].index_state == "complete" for r in untouched)


def test_key_outside_the_deployment_scope(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=3)
    key = corpus.up.meta_keys[0]
    parsed = parse_evidence_key(key)
    assert parsed.euid is not None and parsed.sequence is not None
    from formats.object_keys import Scope

    foreign = meta_segment_key(
        Scope("tenantforeign", "projforeign", "envforeign"), parsed.euid, parsed.sequence
    )
    world.put(foreign, corpus.up.bodies[key])
    wait_for(lambda: world.marker_exists(foreign), 40, "the quarantine marker of the foreign key")
    marker = json.loads(
        world.s3.get_object(Bucket=world.state.bucket, Key=f"quarantine/{foreign}.quarantine")["Body"].read()
    )
    assert marker["reason"] == "out_of_scope"
    wait_for(world.queue_drained, 30, "the queue to drain")
    assert verify_trailer(decompress_object(corpus.up.bodies[key]))  # the bytes were fine: scope alone
