"""The projector-crash conformance case on a stack of its own: the worker process is killed while it
projects, and redelivery must complete with the same IDs and one row set. It runs apart from the
other conformance cases so that a failure here cannot disturb their shared stack.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from e2e_world import World, wait_for

from worker.stack.state import load_stack_state

pytestmark = pytest.mark.stack


def test_projector_crash_mid_execution(world: World, tmp_path: Path) -> None:
    corpus = world.corpus(tmp_path, executions=400, processes=2)
    world.upload(corpus)
    # The bridge holds the messages while the worker projects them: kill it a moment later.
    wait_for(lambda: not world.queue_drained(), 30, "the bridge to take the messages")
    time.sleep(1.5)
    assert not (corpus.ended() <= set(world.ledger())), "projection finished before the crash"
    pid = (load_stack_state(world.state.run_dir) or world.state).parts["worker"].pid
    assert pid
    os.killpg(pid, signal.SIGKILL)  # mid-projection; the stack's supervisor restarts it
    wait_for(
        lambda: (load_stack_state(world.state.run_dir) or world.state).parts["worker"].pid not in (None, pid),
        60,
        "the supervisor to restart the worker",
    )
    # Redelivery (the activity's heartbeat timeout, then its retry) completes with the same ids.
    ledger = world.wait_in_ledger(corpus.ended(), timeout=150)
    assert {r for r in corpus.ended() if ledger[r].status != "abandoned"} == corpus.ended()
    assert world.root_rows(corpus.ended()) == dict.fromkeys(corpus.ended(), 1)
