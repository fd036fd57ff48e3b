"""Serialise moto's SQS queue changes: a message sent while another is deleted was lost.

moto's ``Queue.delete_message`` rebuilds the queue's message list without the queue's lock and
then assigns it, while ``Queue.add_message`` appends under that lock. A message added (an S3
notification of a new meta object, sent inside moto's PutObject) while a delete rebuilt the list
was dropped with the old list: in a soak of 5,709 meta objects (2026-12-06), two never reached a
workflow, with the queue, the dead-letter queue and the workflows all empty at the end. A receive
also walks the queue's pending set while a delete changes it, and failed with "Set changed size
during iteration" (an HTTP 500 the bridge retried).

:func:`apply` runs ``Queue.delete_message`` and ``SQSBackend.receive_message`` under the queue's
own lock (a condition on a re-entrant lock: a long poll's wait inside a receive releases it, so
senders are not held up by a waiting receiver). Real SQS needs none of this; only the stack's moto
process applies it (tests/stack/test_moto_sqs_locking.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_applied = False


def _locked_delete(original: Callable[..., Any]) -> Callable[..., Any]:
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            original(self, receipt_handle)

    return delete_message


def _locked_receive(original: Callable[..., Any]) -> Callable[..., Any]:
    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        with self.get_queue(queue_name)._messages_lock:
            return original(self, queue_name, *args, **kwargs)

    return receive_message


def apply() -> None:
    """Patch moto's SQS models in this process (idempotent)."""
    global _applied
    if _applied:
        return
    from moto.sqs.models import Queue, SQSBackend

    Queue.delete_message = _locked_delete(Queue.delete_message)  # type: ignore[method-assign]
    SQSBackend.receive_message = _locked_receive(SQSBackend.receive_message)  # type: ignore[method-assign]
    _applied = True
