"""The embedded stack's moto SQS patches answer what moto's own code answers, on the same fields."""

from __future__ import annotations

import time

from moto.sqs.models import Message, SQSBackend

from worker.stack import moto_sqs_speedup

ORIGINAL = (Message.visible, Message.delayed, SQSBackend.is_message_valid_based_on_retention_period)


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


def test_the_patched_checks_agree_with_moto() -> None:
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
    moto_sqs_speedup.apply()
    try:
        got = [
            (m.visible, m.delayed, SQSBackend.is_message_valid_based_on_retention_period(backend, "q", m))
            for m in cases
        ]  # type: ignore[arg-type]
    finally:
        Message.visible, Message.delayed, SQSBackend.is_message_valid_based_on_retention_period = ORIGINAL  # type: ignore[method-assign]
        moto_sqs_speedup._applied = False
    assert got == expected
    # Every combination occurs: the cases are not all alike.
    assert {g[0] for g in got} == {g[1] for g in got} == {g[2] for g in got} == {True, False}
