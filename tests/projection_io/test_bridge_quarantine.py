"""The dead-letter message names the marker the workflow wrote: the real SQS bridge, the real
projection workflows and activities (Temporal dev server, moto S3 and SQS over HTTP, Boundary).

Two objects fail verification: a meta object whose trailing checksum is wrong (an evidence key:
``quarantine/<key>.quarantine``) and a notification naming a key outside the bucket layout (filed
under a digest). For each dead-lettered message, every marker key in its
``baml-quarantine-markers`` attribute must exist in the bucket.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from corpus import make_corpus, put_all
from temporalio.client import Client

from activities.settings import ProjectionSettings
from worker.bridge.messages import replay_body
from worker.settings import SqsBridgeSettings
from worker.sqs_bridge import QUARANTINE_ATTRIBUTE, Bridge, GenerationCache
from worker.temporal_worker import build_worker


def test_every_dead_letter_marker_key_exists_in_the_bucket(temporal: Any, world: Any, tmp_path: Any) -> None:
    from test_projection_activities import _corrupt_trailer

    corpus = make_corpus(tmp_path, world.scope, executions=3)
    put_all(world, corpus)
    corrupt = corpus.up.meta_keys[0]
    world.s3.put_object(Bucket=world.bucket, Key=corrupt, Body=_corrupt_trailer(corpus.up.bodies[corrupt]))
    # Meta suffix (so it starts a projection) but no evidence key: the euid is not 32 hex.
    outside = f"evidence/v1/{world.scope.path}/streams/not-an-euid/meta/00000000000000000001.bamlmeta.zst"

    sqs = world.moto.client("sqs")
    name = uuid.uuid4().hex[:12]
    dlq = sqs.create_queue(QueueName=f"dlq-{name}")["QueueUrl"]
    queue = sqs.create_queue(QueueName=f"q-{name}", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    for key in (corrupt, outside):
        sqs.send_message(QueueUrl=queue, MessageBody=replay_body(world.bucket, key))

    async def main() -> list[dict[str, Any]]:
        client = await Client.connect(temporal.address)
        tq = f"tq-{uuid.uuid4().hex[:8]}"
        settings = SqsBridgeSettings(task_queue=tq, wait_time_s=1, retry_delay_s=1, poll_interval_s=0.5)
        bridge = Bridge(
            settings,
            sqs=sqs,
            client=client,
            generations=GenerationCache(lambda _env: 1, 5),
            queue_url=queue,
            dlq_url=dlq,
            projection=ProjectionSettings(commit_interval_s=0.0),
        )
        stop = asyncio.Event()
        got: list[dict[str, Any]] = []
        async with build_worker(client, tq, world.acts.activities()):
            running = asyncio.create_task(bridge.run(stop))
            try:
                deadline = asyncio.get_running_loop().time() + 60
                while len(got) < 2 and asyncio.get_running_loop().time() < deadline:
                    resp = await asyncio.to_thread(
                        sqs.receive_message,
                        QueueUrl=dlq,
                        MaxNumberOfMessages=10,
                        WaitTimeSeconds=1,
                        MessageAttributeNames=["All"],
                    )
                    got += resp.get("Messages", [])
            finally:
                stop.set()
                await asyncio.wait_for(running, 10)
        return got

    messages = asyncio.run(main())
    assert len(messages) == 2, messages
    named: dict[str, list[list[str]]] = {}
    for m in messages:
        key = json.loads(m["Body"])["Records"][0]["s3"]["object"]["key"]
        named[key] = json.loads(m["MessageAttributes"][QUARANTINE_ATTRIBUTE]["StringValue"])
    assert len(named) == 2
    reasons = sorted(reason for markers in named.values() for _, reason in markers)
    assert reasons == ["checksum_mismatch", "invalid_key"]
    for markers in named.values():
        for marker, reason in markers:
            body = json.loads(world.s3.get_object(Bucket=world.bucket, Key=marker)["Body"].read())
            assert body["reason"] == reason
    markers = [m for pairs in named.values() for m, _ in pairs]
    assert markers.count(f"quarantine/{corrupt}.quarantine") == 1
