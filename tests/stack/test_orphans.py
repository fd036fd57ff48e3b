"""Parts left running by a dead launcher: found by the run directory in their environment, stopped
by the next ``stack up``; a recorded pid that now belongs to another process is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.settings import StackSettings
from worker.stack.launcher import initial_state
from worker.stack.orphans import names_run_dir, orphaned_parts, part_of, stop_orphaned_parts
from worker.stack.state import PartState, pid_alive, write_stack_state

DEAD_PID = 2**22 + 4321  # above the default pid_max: never a live process


def test_names_run_dir_matches_the_whole_variable_only() -> None:
    environ = b"HOME=/root\0BAML_STUDIO_STACK_RUN_DIR=/tmp/a/stack\0PATH=/bin\0"
    assert names_run_dir(environ, Path("/tmp/a/stack"))
    assert not names_run_dir(environ, Path("/tmp/a"))
    assert not names_run_dir(environ, Path("/tmp/a/stack2"))


@pytest.fixture
def part(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process started as the launcher starts a part: own session, the run directory in its env."""
    env = {**os.environ, "BAML_STUDIO_STACK_RUN_DIR": str(tmp_path / "stack")}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('running', flush=True); time.sleep(120)"],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    # Popen returns when exec closes the error pipe, which the kernel does before it sets the new
    # image's environment: /proc/PID/environ can still read empty then. The child's own first
    # line proves it is past exec.
    assert proc.stdout is not None and proc.stdout.readline() == b"running\n"
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()


def _record(run_dir: Path, launcher_pid: int, pid: int) -> None:
    state = initial_state(StackSettings(run_dir=run_dir, base_port=25000), run_dir)
    state.launcher_pid = launcher_pid
    state.status = "healthy"
    state.parts = {"worker": PartState(name="worker", pid=pid, log=str(run_dir / "worker.log"))}
    write_stack_state(state)


def test_a_dead_launchers_part_is_found_and_stopped(tmp_path: Path, part: subprocess.Popen[bytes]) -> None:
    run_dir = tmp_path / "stack"
    assert part_of(part.pid, run_dir) and not part_of(part.pid, tmp_path / "other")
    _record(run_dir, DEAD_PID, part.pid)
    assert orphaned_parts(run_dir) == {"worker": part.pid}
    assert stop_orphaned_parts(run_dir, 5.0) == {"worker": part.pid}
    part.wait(10)  # reaped here: the test process is its parent
    assert not pid_alive(part.pid)


def test_nothing_is_stopped_while_the_launcher_lives_or_for_a_foreign_pid(
    tmp_path: Path, part: subprocess.Popen[bytes]
) -> None:
    run_dir = tmp_path / "stack"
    _record(run_dir, os.getpid(), part.pid)  # a live launcher supervises its own parts
    assert orphaned_parts(run_dir) == {}
    _record(tmp_path / "elsewhere", DEAD_PID, part.pid)  # the pid now runs for another run directory
    assert stop_orphaned_parts(tmp_path / "elsewhere", 5.0) == {}
    assert part.poll() is None
