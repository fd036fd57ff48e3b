"""The embedded stack's moto SQS patches answer what moto's own code answers, on the same fields."""

from __future__ import annotations

import json
import time

import pytest
from moto.sqs.models import Message, Queue, SQSBackend
from stack_fixtures import in_stack_moto

from worker.stack import moto_sqs_speedup

# moto's own code, taken when this module is imported (before any test applies the patches).
ORIGINAL = (Message.visible, Message.delayed, SQSBackend.is_message_valid_based_on_retention_period)
ORIGINAL_ATTRIBUTES: property = Queue.__dict__["attributes"]


class _Queue:
    def __init__(self, retention_s: int) -> None:
        self.message_retention_period = retention_s


class _Backend:
    """What the retention check reads of the backend: the queue by name, and for moto's own
    version its attributes (which read the same field)."""

    def __init__(self, retention_s: int) -> None:
        self.queue = _Queue(retention_s)

    def get_queue(self, name: str) -> _Queue:
        return self.queue

    def get_queue_attributes(self, name: str, names: list[str]) -> dict[str, int]:
        return {"MessageRetentionPeriod": self.queue.message_retention_period}


def _message(visible_in_s: float, delayed_for_s: float, sent_s_ago: float) -> Message:
    # "Now" when the test runs, not when the module was collected: in the whole suite that is
    # minutes earlier, and every message would look visible and undelayed.
    now_ms = time.time() * 1000.0
    m = Message("id", "body")
    m.visible_at = now_ms + visible_in_s * 1000
    m.delayed_until = now_ms + delayed_for_s * 1000
    m.sent_timestamp = int(now_ms - sent_s_ago * 1000)  # type: ignore[assignment]
    return m


def test_the_patched_checks_agree_with_moto(moto_sqs_patched: SQSBackend) -> None:
    cases = [
        _message(visible, delayed, sent)
        for visible in (-60.0, 60.0)
        for delayed in (-60.0, 60.0)
        for sent in (10.0, 400_000.0)
    ]
    backend = _Backend(retention_s=345_600)
    visible, delayed, retained = ORIGINAL
    # Compared with moto's own code, not with an earlier application of the patch in this process.
    assert visible.fget.__module__ == retained.__module__ == "moto.sqs.models"  # type: ignore[attr-defined]
    expected = [
        (visible.fget(m), delayed.fget(m), retained(backend, "q", m))  # type: ignore[attr-defined]
        for m in cases
    ]
    got = [
        (m.visible, m.delayed, SQSBackend.is_message_valid_based_on_retention_period(backend, "q", m))  # type: ignore[arg-type]
        for m in cases
    ]
    assert got == expected
    # Every combination occurs: the cases are not all alike.
    assert {g[0] for g in got} == {g[1] for g in got} == {g[2] for g in got} == {True, False}


QUEUES = {
    "standard": {},
    "fifo.fifo": {"FifoQueue": "true"},
    "fifo-content.fifo": {"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    "kms": {"KmsMasterKeyId": "alias/key", "KmsDataKeyReusePeriodSeconds": "600"},
    "policy": {"Policy": json.dumps({"Version": "2012-10-17", "Statement": []}), "DelaySeconds": "0"},
    "redrive": {
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:standard", "maxReceiveCount": 3}
        )
    },
}
NAMES = sorted({*Queue.BASE_ATTRIBUTES, *Queue.FIFO_ATTRIBUTES, *Queue.KMS_ATTRIBUTES, "Nope"})


def test_a_sends_attribute_lookup_agrees_with_moto(moto_sqs_patched: SQSBackend) -> None:
    assert ORIGINAL_ATTRIBUTES.fget.__module__ == "moto.sqs.models"  # type: ignore[union-attr]
    for name, attributes in QUEUES.items():
        queue = moto_sqs_patched.create_queue(name, **attributes)
        moto_sqs_patched.send_message(name, "m", group_id="g", deduplication_id="d")
        expected = ORIGINAL_ATTRIBUTES.fget(queue)  # type: ignore[misc]
        lookup = moto_sqs_speedup._Lookup(queue)
        got = {n: lookup.get(n, "absent") for n in NAMES}
        assert got == {n: expected.get(n, "absent") for n in NAMES}, name


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every time moto counts a queue's visible messages (one walk of the queue)."""
    walks: list[int] = []
    count = Queue.__dict__["approximate_number_of_messages"].fget

    def counting(self: Queue) -> int:
        walks.append(1)
        return int(count(self))

    monkeypatch.setattr(Queue, "approximate_number_of_messages", property(counting))
    return walks


def test_a_send_does_not_walk_the_queue(moto_sqs_patched: SQSBackend, counted: list[int]) -> None:
    moto_sqs_patched.create_queue("deep")
    for i in range(50):
        moto_sqs_patched.send_message("deep", f"m{i}")
    assert counted == []  # moto as released walks the queue once per send here (checked)
    # A FIFO queue with content-based deduplication still drops a repeat sent within five minutes.
    moto_sqs_patched.create_queue("dedup.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for _ in range(2):
        moto_sqs_patched.send_message("dedup.fifo", "same body", group_id="g")
    assert len(moto_sqs_patched.get_queue("dedup.fifo")._messages) == 1


def test_get_queue_attributes_builds_them_once(moto_sqs_patched: SQSBackend, counted: list[int]) -> None:
    moto_sqs_patched.create_queue("status")
    for i in range(7):
        moto_sqs_patched.send_message("status", f"m{i}")
    moto_sqs_patched.receive_message("status", 3, 0, 600)
    counted.clear()
    got = moto_sqs_patched.get_queue_attributes(
        "status", ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )
    assert got == {"ApproximateNumberOfMessages": 4, "ApproximateNumberOfMessagesNotVisible": 3}
    assert len(counted) == 1  # moto as released: 6 times for these two names (checked)
    everything = moto_sqs_patched.get_queue_attributes("status", ["All"])
    assert everything["ApproximateNumberOfMessages"] == 4 and everything["QueueArn"].endswith(":status")


def test_the_stacks_moto_applies_it() -> None:
    got = in_stack_moto(
        "from moto.sqs.models import Message, Queue, SQSBackend",
        "Message.visible.fget.__qualname__, Queue.attributes.fget.__qualname__,"
        " SQSBackend.send_message.__qualname__, SQSBackend.get_queue_attributes.__qualname__",
    )
    assert got.split() == [
        "_visible",
        "_attributes.<locals>.attributes",
        "_in_call.<locals>.call",
        "_in_call.<locals>.call",
    ]
