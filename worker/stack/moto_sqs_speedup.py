"""Make moto's SQS cost O(1) per message check instead of pages of datetime arithmetic.

The embedded stack's S3 and SQS are one moto process (S3 notifications reach the queue inside it).
Profiled under ``bench/soak.py`` (20 streams, about 2,000 messages in the projection queue), 54% of
moto's CPU went to ``Queue.attributes`` and the message-state checks under it:

* ``SQSBackend.is_message_valid_based_on_retention_period`` runs for every message a receive looks
  at, and each call builds every queue attribute (three of them count the queue's messages by
  state), three times (``get_queue_attributes`` reads the dict three times per name): a receive
  cost O(n^2) in the queue's depth;
* ``Message.visible`` and ``Message.delayed`` compute "now" with ``moto.core.utils.unix_time_millis``
  (a naive UTC datetime minus the epoch, several object allocations) once per message per check.

Once moto spent most of its time there, every S3 request waited behind the queue, so the whole
stack slowed as the backlog grew, and the backlog grew faster.

:func:`apply` replaces those three functions with equivalents that read the same fields: the
queue's retention period from the attribute ``_set_attributes`` stores, and "now" from
``time.time()`` (the same epoch milliseconds, since ``unix_time`` is UTC now minus the epoch). The
semantics (visible after ``visible_at``, delayed until ``delayed_until``, retained for
``MessageRetentionPeriod`` seconds after ``sent_timestamp``) are moto's own, checked against the
originals by tests/stack/test_moto_sqs_speedup.py. Only the stack's moto process applies it.
"""

from __future__ import annotations

import time
from typing import Any

_applied = False


def _visible(self: Any) -> bool:
    return time.time() * 1000.0 > self.visible_at


def _delayed(self: Any) -> bool:
    return time.time() * 1000.0 < self.delayed_until


def _retained(self: Any, queue_name: str, message: Any) -> bool:
    retention_s = self.get_queue(queue_name).message_retention_period
    return bool(retention_s + message.sent_timestamp / 1000 > time.time())


def apply() -> None:
    """Patch moto's SQS models in this process (idempotent)."""
    global _applied
    if _applied:
        return
    from moto.sqs.models import Message, SQSBackend

    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    SQSBackend.is_message_valid_based_on_retention_period = _retained  # type: ignore[method-assign]
    _applied = True
