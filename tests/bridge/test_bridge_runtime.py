"""The bridge against real SQS (moto server over HTTP) and a real Temporal dev server.

The projection workflows are stand-ins with the real names and contracts (fake_workflows.py), so
what is tested is the bridge: one run per object however often it is delivered, visibility kept
while a workflow runs, deletion when done, the dead-letter queue for quarantined objects, test
events dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ConnectTimeoutError
from moto.server import ThreadedMotoServer
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).parent))
from fake_workflows import FakeIngestPack, FakeProjectMeta

from activities.settings import ProjectionSettings
from api.dataplane.boundary_client import BoundaryError
from formats.contracts import ids
from worker.bridge.messages import replay_body
from worker.settings import SqsBridgeSettings, StackSettings
from worker.sqs_bridge import (
    QUARANTINE_ATTRIBUTE,
    Bridge,
    GenerationCache,
    queue_redrive_shortfall,
    receives_to_outwait,
    redrive_shortfall,
)

TEMPORAL = Path(sys.executable).parent / "temporal"
KEY = "evidence/v1/t1/p1/e1/streams/" + "a" * 32 + "/meta/{seq}.bamlmeta.zst"
PACK = "evidence/v1/t1/p1/e1/streams/" + "a" * 32 + "/values/01HZZZZZZZZZZZZZZZZZZZZZZZ.bamlpack.zst"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@dataclass
class Queues:
    sqs: Any
    url: str
    dlq: str


def _queues(moto_url: str) -> Queues:
    sqs = boto3.client(
        "sqs",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
    )
    name = uuid.uuid4().hex[:12]
    dlq = sqs.create_queue(QueueName=f"dlq-{name}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(
        QueueName=f"q-{name}",
        Attributes={
            "VisibilityTimeout": "3",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "5"}),
        },
    )["QueueUrl"]
    return Queues(sqs, url, dlq)


def _count(sqs: Any, url: str) -> tuple[int, int]:
    a = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])


async def _until(cond: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if await cond():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


Scenario = Callable[[Client, Queues, Bridge], Awaitable[None]]


def _run(
    moto_url: str, scenario: Scenario, lookup: Callable[[str], int] = lambda _env: 1, **settings_given: Any
) -> None:
    # A started message keeps the receive's timeout unless a test asks for the longer one.
    settings_given.setdefault("started_visibility_timeout_s", settings_given.get("visibility_timeout_s", 5))

    async def main() -> None:
        env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(TEMPORAL))
        try:
            q = _queues(moto_url)
            tq = f"tq-{uuid.uuid4().hex[:8]}"
            settings = SqsBridgeSettings(
                task_queue=tq,
                wait_time_s=1,
                visibility_timeout_s=5,
                visibility_extension_s=1.0,
                retry_delay_s=1,
                poll_interval_s=0.5,
            ).model_copy(update=settings_given)
            bridge = Bridge(
                settings,
                sqs=q.sqs,
                client=env.client,
                generations=GenerationCache(lookup, 5),
                queue_url=q.url,
                dlq_url=q.dlq,
            )
            stop = asyncio.Event()
            async with Worker(env.client, task_queue=tq, workflows=[FakeProjectMeta, FakeIngestPack]):
                running = asyncio.create_task(bridge.run(stop))
                try:
                    await scenario(env.client, q, bridge)
                finally:
                    stop.set()
                    await asyncio.wait_for(running, 10)
        finally:
            await env.shutdown()

    asyncio.run(main())


async def _runs(client: Client, workflow_id: str) -> int:
    return len([w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")])


def test_duplicate_delivery_starts_one_run_and_deletes_every_copy(moto_url: str) -> None:
    key = KEY.format(seq="0" * 19 + "1")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        for _ in range(3):
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", key))
        await _until(lambda: _empty(q), 30, "every copy deleted")
        wid = ids.project_meta_id(1, key)
        await _until(lambda: _ge(_runs(client, wid), 1), 10, "the run to be listed")
        # A later copy (after completion) reuses the finished run: still one run.
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", key))
        await _until(lambda: _empty(q), 30, "the late copy deleted")
        assert await _runs(client, wid) == 1
        assert bridge.tally["delete"] == 4 and bridge.tally["reused_completed"] >= 1

    _run(moto_url, scenario)


async def _empty(q: Queues) -> bool:
    return _count(q.sqs, q.url) == (0, 0)


async def _all_held(q: Queues, n: int) -> bool:
    """All ``n`` messages received and none visible: every one in the bridge's hands."""
    return _count(q.sqs, q.url) == (0, n)


async def _ge(n: Awaitable[int], k: int) -> bool:
    return await n >= k


def test_message_stays_invisible_while_pending_and_is_deleted_when_done(moto_url: str) -> None:
    # The stand-in waits for a signal when its key says "pending" (here: the environment id).
    pending_key = KEY.replace("/e1/", "/pending/").format(seq="0" * 19 + "2")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", pending_key))
        await _until(lambda: _in_flight(q), 10, "the message to be received")
        # Twice the visibility timeout: the bridge's extensions keep it invisible and undelivered.
        await asyncio.sleep(10)
        assert _count(q.sqs, q.url) == (0, 1)
        wid = ids.project_meta_id(1, pending_key)
        assert await _runs(client, wid) == 1
        await client.get_workflow_handle(wid).signal("values_landed")
        await _until(lambda: _empty(q), 20, "the message deleted once done")
        assert _count(q.sqs, q.dlq) == (0, 0)

    _run(moto_url, scenario)


async def _in_flight(q: Queues) -> bool:
    return _count(q.sqs, q.url)[1] == 1


class _CountingSqs:
    """The real SQS client, counting the calls the bridge makes by method name."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._sqs, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return call


def test_held_messages_are_extended_ten_per_call(moto_url: str) -> None:
    keys = [KEY.replace("/e1/", "/pending/").format(seq=f"{i:020d}") for i in range(1, 13)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        counting = _CountingSqs(q.sqs)
        bridge.sqs = counting
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))

        await _until(lambda: _all_held(q, len(keys)), 15, "every message received")
        single = counting.calls["change_message_visibility"]
        batches = counting.calls["change_message_visibility_batch"]
        # Past the 5 s visibility timeout: only the extensions keep the twelve invisible.
        await asyncio.sleep(6)
        assert _count(q.sqs, q.url) == (0, len(keys))
        # One loop, ten receipts per call, about once a second: two calls a tick (a call per
        # message per tick would be 12).
        assert counting.calls["change_message_visibility"] == single
        assert 2 <= counting.calls["change_message_visibility_batch"] - batches <= 2 * 8
        for k in keys:
            await client.get_workflow_handle(ids.project_meta_id(1, k)).signal("values_landed")
        await _until(lambda: _empty(q), 20, "every message deleted once done")

    _run(moto_url, scenario)


class _Stalling(_CountingSqs):
    """Real SQS whose first ``failures`` calls of ``method`` fail as a stalled endpoint's do."""

    def __init__(self, sqs: Any, method: str, failures: int) -> None:
        super().__init__(sqs)
        self.method = method
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        call = super().__getattr__(name)
        if name != self.method:
            return call

        def stalled(*args: Any, **kwargs: Any) -> Any:
            if self.failures > 0:
                self.calls[name] += 1
                self.failures -= 1
                raise ConnectTimeoutError(endpoint_url="http://stalled")
            return call(*args, **kwargs)

        return stalled


def test_a_failed_extension_is_tried_again_before_the_visibility_runs_out(moto_url: str) -> None:
    keys = [KEY.replace("/e1/", "/pending/").format(seq=f"{i:020d}") for i in range(21, 24)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        bridge.sqs = _Stalling(q.sqs, "change_message_visibility_batch", failures=2)
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))

        await _until(lambda: _all_held(q, len(keys)), 15, "every message received")
        # Extensions are due 3 s after the receive, of a 6 s timeout. The first two fail; tried
        # again a quarter interval later, the third lands before the timeout runs out. Tried only
        # at the next whole interval (6 s on), the messages became visible again (checked).
        await asyncio.sleep(7)
        # Never visible again, so never received again (the bridge polls all along).
        assert _count(q.sqs, q.url) == (0, len(keys))
        assert bridge.delivery.received == len(keys) and bridge.tally["redelivered"] == 0
        assert bridge.tally["visibility_extension_failed"] == 2 * len(keys)
        assert bridge.tally["visibility_extensions"] >= len(keys)
        assert bridge.tally["visibility_lapsed"] == 0
        for k in keys:
            await client.get_workflow_handle(ids.project_meta_id(1, k)).signal("values_landed")
        await _until(lambda: _empty(q), 20, "every message deleted once done")
        assert bridge.tally["delete"] == len(keys)

    _run(moto_url, scenario, visibility_timeout_s=6, visibility_extension_s=3.0)


class _DeletesTogether(_CountingSqs):
    """Real SQS whose deletes each wait until ``together`` of them are under way at once."""

    def __init__(self, sqs: Any, together: int) -> None:
        super().__init__(sqs)
        self.barrier = threading.Barrier(together, timeout=15)

    def delete_message(self, **kwargs: Any) -> Any:
        self.barrier.wait()
        return self._sqs.delete_message(**kwargs)


def test_the_bridge_disposes_of_as_many_messages_at_once_as_it_handles(moto_url: str) -> None:
    # Twelve finished messages whose deletes can only go on together: asyncio's default executor
    # (six threads on two cores, one of them in the receive's long poll) held them to five at a
    # time: the barrier broke and the messages were never deleted (checked).
    keys = [KEY.format(seq=f"{i:020d}") for i in range(31, 43)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        bridge.sqs = _DeletesTogether(q.sqs, len(keys))
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))

        async def all_deleted() -> bool:
            return bridge.tally["delete"] == len(keys) and await _empty(q)

        await _until(all_deleted, 30, "every message deleted")
        assert bridge.tally["internal_error"] == 0

    _run(moto_url, scenario)


def test_quarantined_object_goes_to_the_dead_letter_queue_with_its_marker(moto_url: str) -> None:
    bad = KEY.replace("/e1/", "/quarantine/").format(seq="0" * 19 + "3")
    good = KEY.format(seq="0" * 19 + "4")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        q.sqs.send_message(
            QueueUrl=q.url, MessageBody=json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent"})
        )
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", bad))
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", good))
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", PACK))
        q.sqs.send_message(QueueUrl=q.url, MessageBody="not json")
        await _until(lambda: _empty(q), 30, "the queue to drain")

        async def tallied() -> bool:
            # The bridge counts a message after SQS has deleted it: on a loaded machine the
            # queue can be empty a moment before the last count.
            return bridge.tally["delete"] + bridge.tally["dead_letter"] >= 3

        await _until(tallied, 10, "the bridge to count every message it settled")
        got = q.sqs.receive_message(QueueUrl=q.dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
        messages = got.get("Messages", [])
        assert len(messages) == 2
        by_body = {m["Body"]: m for m in messages}
        marked = by_body[replay_body("b", bad)]
        markers = json.loads(marked["MessageAttributes"][QUARANTINE_ATTRIBUTE]["StringValue"])
        assert markers == [[f"quarantine/{bad}.quarantine", "checksum_mismatch"]]
        assert "not json" in by_body
        assert bridge.tally["ignored"] == 1 and bridge.tally["unparseable"] == 1
        assert bridge.tally["delete"] == 2 and bridge.tally["dead_letter"] == 1

    _run(moto_url, scenario)


def test_many_messages_are_handled_concurrently(moto_url: str) -> None:
    keys = [KEY.replace("/e1/", "/slow/").format(seq=f"{i:020d}") for i in range(12)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        loop = asyncio.get_running_loop()
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))
        t0 = loop.time()
        await _until(lambda: _empty(q), 60, "the queue to drain")
        # Each stand-in sleeps 3 s: handled one by one this would take 36 s or more.
        assert loop.time() - t0 < 20

        # SQS shows a message gone before the bridge's delete call has returned and been counted.
        async def counted() -> bool:
            return bridge.tally["delete"] == len(keys)

        await _until(counted, 10, "every delete counted")

    _run(moto_url, scenario)


def test_a_landed_pack_wakes_the_waiting_meta_objects_of_its_stream(moto_url: str) -> None:
    # The stand-in meta waits for values_landed ("pending" environment); nobody signals it but the
    # bridge itself, once the same stream's pack workflow has completed.
    stream = "evidence/v1/t1/p1/pending/streams/" + "c" * 32
    meta = f"{stream}/meta/{'0' * 19}7.bamlmeta.zst"
    other = "evidence/v1/t1/p1/pending/streams/" + "d" * 32 + f"/meta/{'0' * 19}8.bamlmeta.zst"
    pack = f"{stream}/values/01HZZZZZZZZZZZZZZZZZZZZZZZ.bamlpack.zst"

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", meta))
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", other))
        await _until(lambda: _ge(_runs(client, ids.project_meta_id(1, meta)), 1), 10, "the meta to start")
        await asyncio.sleep(2)
        assert _count(q.sqs, q.url) == (0, 2)  # both metas held, waiting for values
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", pack))
        await _until(lambda: _ge(_count_async(q, q.url, 1), 1), 20, "the pack and its stream's meta done")
        assert bridge.tally["values_landed"] == 1  # only the pack's own stream was woken
        assert _count(q.sqs, q.url) == (0, 1)  # the other stream's meta still waits
        await client.get_workflow_handle(ids.project_meta_id(1, other)).signal("values_landed")
        await _until(lambda: _empty(q), 20, "the other meta deleted once signalled")

    _run(moto_url, scenario)


async def _count_async(q: Queues, url: str, in_flight: int) -> int:
    visible, held = _count(q.sqs, url)
    return int(visible == 0 and held == in_flight)


class _Bug(Exception):
    """An exception no component is expected to raise: a programming error."""


def _lookup(environment_id: str) -> int:
    if environment_id == "bug":
        raise _Bug("a bug in the generation lookup")
    if environment_id == "down":
        raise BoundaryError(503, None, path=f"/environments/{environment_id}/active-generation")
    return 1


def test_a_bug_is_logged_and_counted_while_boundary_down_is_retried(
    moto_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="baml_studio.sqs_bridge")
    bug = KEY.replace("/e1/", "/bug/").format(seq="0" * 19 + "5")
    down = KEY.replace("/e1/", "/down/").format(seq="0" * 19 + "6")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", bug))
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", down))

        async def both_seen() -> bool:
            return bridge.tally["internal_error"] >= 1 and bridge.tally["retry"] >= 1

        await _until(both_seen, 20, "the bug counted and the Boundary failure retried")
        # Neither message is gone: the bug's stays for SQS to redeliver (and to dead-letter after
        # maxReceiveCount), the other is retried after retry_delay_s.
        assert sum(_count(q.sqs, q.url)) == 2 and _count(q.sqs, q.dlq) == (0, 0)

    _run(moto_url, scenario, _lookup)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and all(r.exc_info and r.exc_info[0] is _Bug for r in errors), errors
    assert all("internal error" in r.getMessage() for r in errors)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("generation lookup failed" in m and "BoundaryError" in m for m in warned), warned
    # The bug is not passed off as a Boundary failure.
    assert not any("generation lookup failed" in m and "_Bug" in m for m in warned), warned


def test_a_message_received_again_is_counted_as_redelivered(moto_url: str) -> None:
    down = KEY.replace("/e1/", "/down/").format(seq="0" * 19 + "8")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", down))

        async def received_again() -> bool:
            return bridge.tally["redelivered"] >= 1

        # Boundary is down for its environment: left for retry, visible again after 1 s.
        await _until(received_again, 20, "the retried message received again")
        assert bridge.tally["retry"] >= bridge.tally["redelivered"] >= 1
        assert bridge.delivery.received >= 2

    _run(moto_url, scenario, _lookup)


class _Throttled:
    """A started workflow's handle whose first result waits the server refuses, as Temporal does
    past its long polls per namespace."""

    def __init__(self, handle: Any, refusals: int) -> None:
        self._handle = handle
        self.refusals = refusals

    async def result(self) -> Any:
        if self.refusals:
            self.refusals -= 1
            refused = RPCStatusCode.RESOURCE_EXHAUSTED
            raise RPCError("namespace concurrent poller limit exceeded", refused, b"")
        return await self._handle.result()


def test_a_refused_result_wait_is_asked_again_with_the_message_in_hand(moto_url: str) -> None:
    key = KEY.format(seq="0" * 19 + "7")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        start = bridge.start

        async def throttled_start(r: Any) -> Any:
            return _Throttled(await start(r), refusals=3)

        bridge.start = throttled_start  # type: ignore[method-assign]
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", key))
        await _until(lambda: _empty(q), 30, "the message deleted once its workflow is done")
        # Waited again three times, never given back to SQS (each receive counts towards the
        # dead-letter queue): without the retry the message is left for redelivery (checked).
        assert bridge.tally["result_throttled"] == 3
        assert bridge.tally["retry"] == 0 and bridge.tally["delete"] == 1
        assert _count(q.sqs, q.dlq) == (0, 0)

    _run(moto_url, scenario)


def test_results_past_the_long_polls_are_found_by_a_visibility_query(moto_url: str) -> None:
    # With one long poll allowed, the first message's result is long-polled; the other three
    # meta objects' runs are found closed by the bridge's visibility query, and their messages
    # deleted. Without the query they stay in hand (checked: the wait times out).
    keys = [KEY.replace("/e1/", "/pending/").format(seq=f"{i:020d}") for i in range(21, 25)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))
        await _until(lambda: _all_held(q, len(keys)), 20, "every message in hand")
        await _until(lambda: _ge(_started(client, keys), len(keys)), 20, "every run started")
        for k in keys:
            await client.get_workflow_handle(ids.project_meta_id(1, k)).signal("values_landed")
        await _until(lambda: _empty(q), 30, "every message deleted once its run is done")
        assert bridge.tally["delete"] == len(keys)
        assert bridge.tally["results_by_query"] == len(keys) - 1

    _run(moto_url, scenario, result_long_polls=1, completion_poll_s=0.2)


async def _started(client: Client, keys: list[str]) -> int:
    return sum([await _runs(client, ids.project_meta_id(1, k)) for k in keys])


def test_a_started_message_is_held_with_the_longer_timeout_and_extended_less_often(moto_url: str) -> None:
    keys = [KEY.replace("/e1/", "/pending/").format(seq=f"{i:020d}") for i in range(31, 34)]

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        counting = _CountingSqs(q.sqs)
        bridge.sqs = counting
        for k in keys:
            q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", k))
        await _until(lambda: _all_held(q, len(keys)), 15, "every message in hand")
        await _until(lambda: _ge(_started(client, keys), len(keys)), 15, "every run started")
        batches = counting.calls["change_message_visibility_batch"]
        # Past the receive's 5 s timeout: the one lengthening to 30 s keeps them invisible, where
        # the 5 s timeout took an extension call a second (test_held_messages_are_extended_ten_per_call).
        await asyncio.sleep(8)
        assert _count(q.sqs, q.url) == (0, len(keys))
        assert bridge.tally["redelivered"] == 0 and bridge.tally["visibility_lapsed"] == 0
        # At most one lengthening each (their runs may start a look apart); about eight at 5 s.
        assert counting.calls["change_message_visibility_batch"] - batches <= len(keys)
        assert bridge.tally["visibility_extensions"] >= len(keys)
        for k in keys:
            await client.get_workflow_handle(ids.project_meta_id(1, k)).signal("values_landed")
        await _until(lambda: _empty(q), 20, "every message deleted once done")

    _run(moto_url, scenario, started_visibility_timeout_s=30)


def test_a_delete_that_did_not_reach_sqs_is_tried_again_in_place(moto_url: str) -> None:
    # Left to SQS, the message would come back only when its visibility ran out (600 s once its
    # run has started): without the retry it is counted dispose_failed and redelivered (checked).
    key = KEY.format(seq="0" * 18 + "41")

    async def scenario(client: Client, q: Queues, bridge: Bridge) -> None:
        bridge.sqs = _Stalling(q.sqs, "delete_message", failures=2)
        q.sqs.send_message(QueueUrl=q.url, MessageBody=replay_body("b", key))
        await _until(lambda: _empty(q), 20, "the message deleted")
        assert bridge.tally["delete_retried"] == 2 and bridge.tally["delete"] == 1
        assert bridge.tally["dispose_failed"] == 0 and bridge.tally["redelivered"] == 0

    _run(moto_url, scenario)


# --- the queue's dead-letter policy against the pending deadline ---------------------------------


def test_a_queue_that_would_dead_letter_a_meta_object_still_waiting_for_its_values_is_named(
    moto_url: str,
) -> None:
    """A meta object waits up to ``pending_deadline_s`` for its values, its message held at most
    ``hold_max_s`` per receive: a smaller ``maxReceiveCount`` dead-letters it while its run waits."""
    q = _queues(moto_url)  # maxReceiveCount 5
    hold, deadline = 11 * 3600.0, 7 * 24 * 3600.0
    found = queue_redrive_shortfall(q.sqs, q.url, hold, deadline)
    assert found is not None
    assert "maxReceiveCount is 5" in found and "after about 55 h" in found and "waits 168 h" in found
    assert "at least 17" in found and "BAML_STUDIO_PROJECTION_PENDING_DEADLINE_S" in found

    policy = json.loads(
        q.sqs.get_queue_attributes(QueueUrl=q.url, AttributeNames=["RedrivePolicy"])["Attributes"][
            "RedrivePolicy"
        ]
    )
    policy["maxReceiveCount"] = "17"
    q.sqs.set_queue_attributes(QueueUrl=q.url, Attributes={"RedrivePolicy": json.dumps(policy)})
    assert queue_redrive_shortfall(q.sqs, q.url, hold, deadline) is None
    # A shorter deadline needs fewer receives; a queue without a dead-letter queue dead-letters nothing.
    assert redrive_shortfall(json.dumps({"maxReceiveCount": 5}), hold, 36 * 3600.0) is None
    bare = q.sqs.create_queue(QueueName=f"bare-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    assert queue_redrive_shortfall(q.sqs, bare, hold, deadline) is None
    assert "no readable maxReceiveCount" in (redrive_shortfall("{}", hold, deadline) or "")


def test_the_stack_and_compose_queues_wait_out_the_default_pending_deadline() -> None:
    needed = receives_to_outwait(SqsBridgeSettings().hold_max_s, ProjectionSettings().pending_deadline_s)
    assert needed == 17  # 7 days of 11 h holds, and the receive that finds the run closed
    assert StackSettings().max_receive_count >= needed
    compose = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()
    counts = [int(n) for n in re.findall(r"maxReceiveCount = (\d+)", compose)]
    assert counts and all(n >= needed for n in counts)
