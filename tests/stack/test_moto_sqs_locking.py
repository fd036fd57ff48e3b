"""The stack's moto serialises changes to an SQS queue (worker/stack/moto_sqs_locking.py): moto as
released dropped messages sent while another was deleted (51 to 256 of 2,000 in three runs of the
stress below without the patch, none with it)."""

from __future__ import annotations

import threading
import time

import pytest
from moto.sqs.models import SQSBackend
from stack_fixtures import in_stack_moto


@pytest.fixture
def patched(moto_sqs_patched: SQSBackend) -> SQSBackend:
    return moto_sqs_patched


def test_a_delete_waits_for_the_queues_lock(patched: SQSBackend) -> None:
    patched.create_queue("held")
    patched.send_message("held", "a")
    (message,) = patched.receive_message("held", 1, 0, 30)
    queue = patched.get_queue("held")
    done = threading.Event()

    def delete() -> None:
        assert message.receipt_handle is not None
        patched.delete_message("held", message.receipt_handle)
        done.set()

    deleting = threading.Thread(target=delete)
    with queue._messages_lock:  # a send appending under it, as moto's add_message does
        deleting.start()
        assert not done.wait(0.3)  # moto's own delete rebuilt the list meanwhile
    deleting.join(5)
    assert done.is_set() and queue.messages == []


def test_senders_receivers_and_deleters_at_once_lose_no_message(patched: SQSBackend) -> None:
    patched.create_queue("busy")
    sent = 2 * 1000
    received: set[str] = set()
    errors: list[str] = []
    lock = threading.Lock()

    def send(k: int) -> None:
        for i in range(sent // 2):
            patched.send_message("busy", f"{k}-{i}")

    def receive() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(received) >= sent:
                    return
            # A visibility of 1 s: a message received and not deleted comes back, so only a
            # message gone from the queue is missing at the end.
            for m in patched.receive_message("busy", 10, 0, 1):
                with lock:
                    received.add(m.body)
                try:
                    patched.delete_message("busy", m.receipt_handle or "")
                except Exception as exc:  # moto's answer to a message received twice
                    errors.append(type(exc).__name__)

    threads = [threading.Thread(target=send, args=(k,)) for k in range(2)]
    threads += [threading.Thread(target=receive) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(received) == sent and errors == []


def test_the_stacks_moto_applies_it() -> None:
    got = in_stack_moto(
        "from moto.sqs.models import Queue, SQSBackend",
        "Queue.delete_message.__qualname__, SQSBackend.receive_message.__qualname__",
    )
    assert got.split() == [
        "_locked_delete.<locals>.delete_message",
        "_locked_receive.<locals>.receive_message",
    ]
