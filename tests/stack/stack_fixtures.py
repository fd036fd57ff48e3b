"""Helpers that start and stop a real embedded stack (``baml-studio stack up --detach``) on free ports."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
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


def ledger_roots(state: StackState) -> Counter[str]:
    """root id -> rows of the stack's projection ledger (generation 1), duplicates kept.

    The ledger is the last store a projection writes (after Boundary's facts and the Lance rows),
    so a test that snapshots the stores waits on it, not on the facts.
    """
    from api.dataplane.lance_store import LEDGER, LanceStore
    from formats.object_keys import Scope
    from worker.cli_ops import load_deployment

    assert state.tenant_id and state.project_id and state.environment_id
    dep = load_deployment(Path(state.run_dir))
    scope = Scope(state.tenant_id, state.project_id, state.environment_id)
    try:
        table = LanceStore.in_bucket(dep.bucket, dep).read(
            scope, LEDGER, columns=["root_id"], filter="generation = 1"
        )
    except Exception:  # no ledger dataset before the first commit
        return Counter()
    return Counter(table["root_id"].to_pylist())


def wait_for_ledger(state: StackState, count: int, timeout_s: float) -> Counter[str]:
    """The ledger once it holds at least ``count`` roots."""
    deadline = time.monotonic() + timeout_s
    while len(ledger := ledger_roots(state)) < count:
        assert time.monotonic() < deadline, f"{len(ledger)} of {count} executions in the ledger"
        time.sleep(0.5)
    return ledger


def stack_pids(state: StackState) -> list[int]:
    return [state.launcher_pid, *(p.pid for p in state.parts.values() if p.pid)]


def stop_stack(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return cli("stack", "down", "--run-dir", str(run_dir))


def in_stack_moto(imports: str, expression: str) -> str:
    """``expression`` evaluated in a child process whose moto is patched as the stack's moto
    process patches it (``moto_app``); the patches are process-wide, and the tests' own process
    uses moto as released."""
    code = f"from worker.stack.moto_store import moto_app; moto_app(); {imports}; print({expression})"
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    ).stdout.strip()
