"""Fixtures that start a real embedded stack on free ports.

``running_stack`` is module-scoped: one stack per test module, stopped (and checked to leave
no process behind) at the end. Lift it, with ``stack_fixtures.py``, into tests/conftest.py when
other areas need a live stack.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from stack_fixtures import free_base_port, stack_pids, start_stack, stop_stack

from worker.stack.state import StackState, load_stack_state, pid_alive


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
