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

The send side had the same cost (2026-12-06, a 10-minute soak at 100 executions/s whose queue
held 14,000 messages): every S3 notification is a ``SendMessage`` inside moto's PutObject, and
``SQSBackend.send_message`` reads ``queue.attributes.get("ContentBasedDeduplication")``, which
builds every attribute, the three message counts included: each PUT walked the queue three times.
py-spy on the stack's moto: 33% of its samples there, moto at 60% of a core, and the drain slowed
as the queue grew. A send now looks its attributes up one by one (:class:`_Lookup`, the same
values as moto's dict for every name, checked by the tests), and ``GetQueueAttributes`` builds the
dict once per call instead of three times per name asked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

_applied = False
# What the SQS call running on this thread reads of a queue's attributes: "send" looks them up one
# by one, "read" builds moto's dict once per queue for the call.
_call = threading.local()


def _visible(self: Any) -> bool:
    return time.time() * 1000.0 > self.visible_at


def _delayed(self: Any) -> bool:
    return time.time() * 1000.0 < self.delayed_until


def _retained(self: Any, queue_name: str, message: Any) -> bool:
    retention_s = self.get_queue(queue_name).message_retention_period
    return bool(retention_s + message.sent_timestamp / 1000 > time.time())


class _Lookup:
    """A queue's attributes as a send reads them (``get`` by name), each one alone: moto's
    ``Queue.attributes`` (which this mirrors) counts the queue's messages three times to build all."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def get(self, name: str, default: Any = None) -> Any:
        from moto.core.utils import camelcase_to_underscores

        q = self._queue
        if name == "RedrivePolicy" and q.redrive_policy:
            value = json.dumps(q.redrive_policy)
        elif name == "Policy" and q.policy:
            value = q.policy
        elif (
            name in q.BASE_ATTRIBUTES
            or (q.fifo_queue and name in q.FIFO_ATTRIBUTES)
            or (q.kms_master_key_id and name in q.KMS_ATTRIBUTES)
        ):
            value = getattr(q, camelcase_to_underscores(name))
        else:
            return default
        return str(value).lower() if isinstance(value, bool) else value


def _attributes(original: property) -> property:
    def attributes(self: Any) -> Any:
        mode = getattr(_call, "mode", None)
        if mode == "send":
            return _Lookup(self)
        if mode == "read":
            memo: dict[int, Any] = _call.memo
            if id(self) not in memo:
                memo[id(self)] = original.fget(self)  # type: ignore[misc]
            return memo[id(self)]
        return original.fget(self)  # type: ignore[misc]

    return property(attributes)


def _in_call(mode: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_call, "mode", None), getattr(_call, "memo", None)
        _call.mode, _call.memo = mode, {}
        try:
            return fn(self, *args, **kwargs)
        finally:
            _call.mode, _call.memo = outer

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def apply() -> None:
    """Patch moto's SQS models in this process (idempotent)."""
    global _applied
    if _applied:
        return
    apply_message_checks()
    apply_attribute_reads()
    _applied = True


def apply_message_checks() -> None:
    """The message-state checks (the first patch; bench/moto_sqs.py measures each apart)."""
    from moto.sqs.models import Message, SQSBackend

    Message.visible = property(_visible)  # type: ignore[method-assign,assignment]
    Message.delayed = property(_delayed)  # type: ignore[method-assign,assignment]
    SQSBackend.is_message_valid_based_on_retention_period = _retained  # type: ignore[method-assign]


def apply_attribute_reads() -> None:
    """A send's attribute lookups and GetQueueAttributes' one build per call."""
    from moto.sqs.models import Queue, SQSBackend

    Queue.attributes = _attributes(Queue.__dict__["attributes"])  # type: ignore[method-assign,assignment]
    SQSBackend.send_message = _in_call("send", SQSBackend.send_message)  # type: ignore[method-assign]
    SQSBackend.get_queue_attributes = _in_call("read", SQSBackend.get_queue_attributes)  # type: ignore[method-assign]
