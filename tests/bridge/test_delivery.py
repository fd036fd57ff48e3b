"""The delivery verdict (worker/bridge/delivery.py) on heartbeat documents, and a real bridge that
keeps heartbeating after its receive loop stopped: unhealthy, then healthy again once it consumes.

The live test runs the real Bridge against SQS on a moto server over HTTP and the session's
Temporal dev server; its receive loop is stopped the way a hung dependency stops it: the
environment's generation lookup (Boundary) blocks, so the one receive slot is never freed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from temporalio.client import Client
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).parent))
from fake_workflows import FakeIngestPack, FakeProjectMeta

from worker.bridge.delivery import DeliveryClock, figures, verdict
from worker.bridge.messages import replay_body
from worker.settings import SqsBridgeSettings
from worker.sqs_bridge import Bridge, GenerationCache
from worker.stack.health import bridge_ok, read_heartbeat

NOW = 1_000_000.0
KEY = "evidence/v1/t1/p1/{env}/streams/" + "d" * 32 + "/meta/{seq:020d}.bamlmeta.zst"


def beat(visible: int, *, at: float = NOW, **delivery: float | None) -> dict[str, object]:
    return {"at": at, "queue": {"visible": visible, "in_flight": 0}, "delivery": delivery}


def judge(document: dict[str, object]) -> str | None:
    return verdict(document, NOW, max_heartbeat_age_s=15, stall_after_s=60)


def test_an_idle_bridge_with_an_empty_queue_is_healthy_however_long_ago_it_received() -> None:
    assert judge(beat(0, last_received_at=NOW - 86_400, visible_since=None)) is None


def test_a_backlog_being_consumed_is_healthy() -> None:
    # Messages visible for ten minutes, but one was taken two seconds ago.
    document = beat(500, visible_since=NOW - 600, last_received_at=NOW - 2)
    assert judge(document) is None
    assert figures(document, NOW).oldest_visible_wait_s == 2.0


def test_visible_messages_untaken_past_the_threshold_are_unhealthy_with_a_fresh_heartbeat() -> None:
    document = beat(3, visible_since=NOW - 90, last_received_at=NOW - 300, last_handled_at=NOW - 299)
    reason = judge(document)
    assert reason is not None and "not consuming" in reason and "3 messages visible for 90s" in reason
    f = figures(document, NOW)
    assert (f.heartbeat_age_s, f.last_received_age_s, f.last_handled_age_s) == (0.0, 300.0, 299.0)


def test_a_bridge_that_never_received_is_unhealthy_once_messages_wait_past_the_threshold() -> None:
    assert judge(beat(1, visible_since=NOW - 30)) is None
    reason = judge(beat(1, visible_since=NOW - 61))
    assert reason is not None and "last message received never" in reason


def test_a_stale_heartbeat_is_unhealthy_whatever_it_says() -> None:
    reason = judge(beat(0, at=NOW - 16))
    assert reason is not None and reason.startswith("heartbeat 16s old")
    assert judge({"queue": {"visible": 0}}) == "heartbeat no (limit 15s)"


def test_a_bridge_that_cannot_read_its_queue_is_unhealthy() -> None:
    reason = judge({"at": NOW, "error": "EndpointConnectionError"})
    assert reason is not None and "EndpointConnectionError" in reason


def test_the_clock_tracks_since_when_messages_wait() -> None:
    clock = DeliveryClock()
    clock.saw_queue(2, 10.0)
    clock.saw_queue(5, 20.0)  # still the wait that began at 10
    assert clock.visible_since == 10.0
    clock.took(0, 21.0)  # an empty receive is no delivery
    assert clock.last_received_at is None
    clock.took(3, 22.0)
    clock.finished(23.0)
    clock.saw_queue(0, 24.0)
    assert clock.as_dict() == {
        "last_received_at": 22.0,
        "last_handled_at": 23.0,
        "visible_since": None,
        "received": 3,
        "handled": 1,
    }


# --- a real bridge -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_a_bridge_that_heartbeats_but_stopped_consuming_shows_unhealthy(
    moto_url: str, temporal: object, tmp_path: Path
) -> None:
    sqs = boto3.client(
        "sqs",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
    )
    name = uuid.uuid4().hex[:10]
    dlq = sqs.create_queue(QueueName=f"dlq-{name}")["QueueUrl"]
    queue = sqs.create_queue(QueueName=f"q-{name}", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    heartbeat = tmp_path / "bridge.heartbeat"
    released = threading.Event()

    def generation(environment_id: str) -> int:
        if environment_id == "hang":
            released.wait(60)  # a Boundary call that does not come back
        return 1

    tq = f"tq-{uuid.uuid4().hex[:8]}"
    settings = SqsBridgeSettings(
        task_queue=tq,
        wait_time_s=1,
        visibility_timeout_s=30,
        poll_interval_s=0.3,
        max_in_flight=1,
        heartbeat_file=heartbeat,
    )
    stall_after_s = 3.0

    def health() -> str | None:
        return bridge_ok(heartbeat, max_age_s=5, stall_after_s=stall_after_s)

    async def until(cond: object, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():  # type: ignore[operator]
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; bridge health: {health()}")

    async def main() -> None:
        client = await Client.connect(temporal.address)  # type: ignore[attr-defined]
        bridge = Bridge(
            settings,
            sqs=sqs,
            client=client,
            generations=GenerationCache(generation, 0.0),
            queue_url=queue,
            dlq_url=dlq,
        )
        stop = asyncio.Event()
        async with Worker(client, task_queue=tq, workflows=[FakeProjectMeta, FakeIngestPack]):
            running = asyncio.create_task(bridge.run(stop))
            try:
                sqs.send_message(QueueUrl=queue, MessageBody=replay_body("b", KEY.format(env="e1", seq=1)))
                await until(lambda: bridge.delivery.handled == 1, 20, "the first message handled")
                await until(lambda: health() is None, 5, "a healthy bridge")

                # The receive slot is taken by a message whose handling hangs; the next one waits.
                sqs.send_message(QueueUrl=queue, MessageBody=replay_body("b", KEY.format(env="hang", seq=2)))
                await until(lambda: bridge.delivery.received == 2, 10, "the hanging message received")
                sqs.send_message(QueueUrl=queue, MessageBody=replay_body("b", KEY.format(env="e1", seq=3)))
                started = time.monotonic()
                await until(lambda: health() is not None, 15, "the stalled bridge to show unhealthy")
                waited = time.monotonic() - started
                reason = health()
                document = read_heartbeat(heartbeat)
                assert document is not None
                assert time.time() - float(document["at"]) < 2  # type: ignore[arg-type]
                assert reason is not None and "not consuming: 1 messages visible" in reason
                # Unhealthy within the threshold plus one heartbeat interval (and a poll's slack).
                assert waited < stall_after_s + 2 * settings.poll_interval_s + settings.wait_time_s + 1

                released.set()
                await until(lambda: bridge.delivery.handled == 3, 20, "both waiting messages handled")
                await until(lambda: health() is None, 5, "the bridge healthy again")
            finally:
                released.set()
                stop.set()
                await asyncio.wait_for(running, 15)

    asyncio.run(main())


def test_baml_studio_status_carries_the_same_figures_and_verdict(tmp_path: Path) -> None:
    import json

    from worker.cli_ops import bridge_status, stack_bridge_heartbeat

    assert stack_bridge_heartbeat(tmp_path) is None  # no stack was started there
    (tmp_path / "stack.json").write_text("{}")
    path = stack_bridge_heartbeat(tmp_path)
    assert path == tmp_path.resolve() / "bridge.heartbeat"
    missing = bridge_status(path, now=NOW)
    assert (
        missing is not None and missing["healthy"] is False and "no readable heartbeat" in missing["reason"]
    )
    path.write_text(json.dumps(beat(4, visible_since=NOW - 120, last_received_at=NOW - 200)))
    doc = bridge_status(path, now=NOW)
    assert doc is not None and doc["healthy"] is False and doc["visible"] == 4
    assert doc["oldest_visible_wait_s"] == 120.0 and doc["last_received_age_s"] == 200.0
    assert doc["reason"] == judge(beat(4, visible_since=NOW - 120, last_received_at=NOW - 200))
