"""One embedded stack per e2e test module (``stack up --detach`` on free ports, tmp run dir)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from e2e_world import CLI, World, start_stack_here

from worker.stack.state import load_stack_state, pid_alive


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("e2e")
    state = start_stack_here(base)
    w = World(state)
    try:
        yield w
    finally:
        w.boundary.close()
        final = load_stack_state(state.run_dir) or state
        subprocess.run([*CLI, "stack", "down", "--run-dir", state.run_dir], capture_output=True, timeout=60)
        pids = [final.launcher_pid, *(p.pid for p in final.parts.values() if p.pid)]
        left = [pid for pid in pids if pid_alive(pid)]
        assert not left, f"processes left running after stack down: {left}"
