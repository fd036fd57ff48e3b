"""Fixtures that start a real embedded stack on free ports.

``running_stack`` is module-scoped: one stack per test module, stopped (and checked to leave
no process behind) at the end. Lift it, with ``stack_fixtures.py``, into tests/conftest.py when
other areas need a live stack.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto.sqs.models import Message, Queue, SQSBackend, sqs_backends
from stack_fixtures import free_base_port, stack_pids, start_stack, stop_stack

from worker.stack import moto_sqs_locking, moto_sqs_speedup
from worker.stack.state import StackState, load_stack_state, pid_alive

# Every attribute moto_sqs_locking.apply() and moto_sqs_speedup.apply() replace.
MOTO_SQS_PATCHED = (
    (Queue, "delete_message"),
    (SQSBackend, "receive_message"),
    (Message, "visible"),
    (Message, "delayed"),
    (SQSBackend, "is_message_valid_based_on_retention_period"),
    (Queue, "attributes"),
    (SQSBackend, "send_message"),
    (SQSBackend, "get_queue_attributes"),
)


@pytest.fixture
def moto_sqs_patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[SQSBackend]:
    """moto's SQS in this process as the stack's moto runs it (both patches), put back as released
    afterwards; the backend, whose queues are deleted at the end."""
    for owner, name in MOTO_SQS_PATCHED:  # recorded first: the teardown puts back what apply() replaces
        monkeypatch.setattr(owner, name, owner.__dict__[name])
    monkeypatch.setattr(moto_sqs_locking, "_applied", False)
    monkeypatch.setattr(moto_sqs_speedup, "_applied", False)
    moto_sqs_locking.apply()
    moto_sqs_speedup.apply()
    backend = sqs_backends["123456789012"]["us-east-1"]
    try:
        yield backend
    finally:
        for queue in list(backend.queues):
            backend.delete_queue(queue)


@pytest.fixture(scope="module")
def running_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackState]:
    run_dir = tmp_path_factory.mktemp("stack")
    state = start_stack(run_dir, free_base_port())
    try:
        yield state
    finally:
        final = load_stack_state(run_dir) or state
        stop_stack(run_dir)
        left = [pid for pid in stack_pids(final) if pid_alive(pid)]
        assert not left, f"processes left running after stack down: {left}"
