"""Helpers that start and stop a real embedded stack (``baml-studio stack up --detach``) on free ports."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from worker.stack.health import port_free
from worker.stack.ports import StackPorts
from worker.stack.state import StackState, load_stack_state

CLI = [sys.executable, "-m", "worker.cli"]


def free_base_port(avoid: set[int] | None = None) -> int:
    """A base port whose whole layout is free now (random, so parallel runs rarely collide)."""
    rng = random.Random()
    for _ in range(200):
        # Below the kernel's ephemeral range (32768+), where outgoing connections take ports at random.
        base = rng.randrange(20000, 32000, 50)
        ports = StackPorts.layout(base).as_dict().values()
        if avoid and avoid & set(ports):
            continue
        if all(port_free("127.0.0.1", p) for p in ports):
            return base
    raise RuntimeError("no free port range found")


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def start_stack(run_dir: Path, base_port: int, timeout_s: float | None = None) -> StackState:
    """``stack up --detach``; ``timeout_s`` is its ``--timeout`` (a restore, or a loaded machine)."""
    extra = ["--timeout", str(timeout_s)] if timeout_s is not None else []
    result = cli(
        "stack",
        "up",
        "--detach",
        "--run-dir",
        str(run_dir),
        "--base-port",
        str(base_port),
        *extra,
        timeout=120 + (timeout_s or 60),
    )
    state = load_stack_state(run_dir)
    if result.returncode != 0 or state is None:
        logs = "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(run_dir.glob("**/*.log")))
        raise AssertionError(f"stack up failed: {result.stdout}\n{result.stderr}\n{logs}")
    return state


def stack_pids(state: StackState) -> list[int]:
    return [state.launcher_pid, *(p.pid for p in state.parts.values() if p.pid)]


def stop_stack(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return cli("stack", "down", "--run-dir", str(run_dir))
