"""``kill -9`` of the launcher in the middle of projecting a corpus (issue 13).

On a real stack: a corpus shipped through the gateway, and while the worker and the bridge are
projecting it the launcher is killed with SIGKILL, in two ways:

- ``tree``: together with every part's process group (what a ``kill -9`` of the whole tree, or the
  OOM killer taking it all, does: no part stops cleanly, moto's queue in memory is lost);
- ``launcher``: alone; its parts run on, orphaned, holding the ports, and ``stack up`` stops them
  first (worker/stack/orphans.py).

``stack up`` again on the same run directory and ports: every execution of the corpus ends
projected exactly once: one ledger row per root, one root thread and the synthetic profiler's
number of calls per execution in Boundary, nothing pending, nothing quarantined, no dead letter.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from stack_fixtures import free_base_port, ledger_roots, start_stack, stop_stack

from formats.synth import SynthConfig, synthesize
from formats.synth.truth import GroundTruth
from worker.cli_demo import run_query, ship
from worker.cli_ops import environment_status, load_deployment
from worker.stack.state import StackState, load_stack_state, pid_alive

NS_PER_S = 1_000_000_000
# Seconds for `stack up` to become healthy: twice the default, as this test's restart replays the
# journal while other suites load the machine (measured 41-52 s there).
UP_TIMEOUT_S = 150.0
CORPORA = 3  # corpora shipped at most, until the kill lands while one is being projected


def _corpus(run_dir: Path, executions: int) -> tuple[Path, GroundTruth]:
    now = time.time_ns()
    root = run_dir / "corpus" / f"profiles-{now}" / ".baml" / "profiles-v1"
    config = SynthConfig(
        seed=random.SystemRandom().randrange(1, 2**31),
        processes=2,
        executions=executions,
        # Inside the queries' recent window, and stream ids of this run only.
        zero_unix_ns=now - 60 * NS_PER_S,
    )
    return root, synthesize(root, config)


def _kill(state: StackState, *, tree: bool) -> list[int]:
    """SIGKILL the launcher, and with ``tree`` every part's process group at once; returns the
    parts' pids once the killed processes are gone."""
    groups = [p.pid for p in state.parts.values() if p.pid]
    os.kill(state.launcher_pid, signal.SIGKILL)
    killed = [state.launcher_pid]
    if tree:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        killed += groups
    deadline = time.monotonic() + 20
    while any(pid_alive(p) for p in killed):
        assert time.monotonic() < deadline, f"alive after SIGKILL: {[p for p in killed if pid_alive(p)]}"
        time.sleep(0.1)
    return groups


def _in(ids: set[str]) -> str:
    return ", ".join(f"'{i}'" for i in sorted(ids))


def _per_execution(state: StackState, sql: str) -> dict[str, int]:
    rows = run_query(state, sql).rows
    return {str(r["execution_id"]): int(r["n"]) for r in rows}


@pytest.mark.parametrize("kill", ["tree", "launcher"])
def test_kill_9_of_the_launcher_mid_projection_then_stack_up_projects_every_execution_once(
    tmp_path: Path, kill: str
) -> None:
    run_dir = tmp_path / "stack"
    base = free_base_port()
    state = start_stack(run_dir, base, UP_TIMEOUT_S)
    try:
        # Mid-projection: some executions of a corpus in the ledger, not all. Projection keeps pace
        # with the shipping, so once in a while a corpus is done before the first look (seen in a
        # full suite run): another corpus is shipped then, and every corpus shipped is checked.
        ended: dict[str, Any] = {}
        for _ in range(CORPORA):
            root, truth = _corpus(run_dir, 640)  # 160 finished before the kill with 256 activities
            batch = {e.execution_id: e for e in truth.executions if e.status not in ("abandoned", "running")}
            assert len(batch) == len(truth.executions), "the corpus has no open execution"
            ended.update(batch)
            ship(state, root)
            deadline = time.monotonic() + 240
            while (done := len(set(ledger_roots(state)) & set(batch))) < 5:
                assert time.monotonic() < deadline, "projection did not start"
                time.sleep(0.2)
            if done < len(batch):
                break
        else:
            pytest.fail(f"projection finished before the kill {CORPORA} times: make the corpus larger")
        parts = _kill(load_stack_state(run_dir) or state, tree=kill == "tree")
        print(f"kill -9 ({kill}) with {done} of {len(batch)} executions of the last corpus in the ledger")
        if kill == "launcher":
            assert all(pid_alive(p) for p in parts), "the parts run on without their launcher"

        state = start_stack(run_dir, base, UP_TIMEOUT_S)
        assert not any(pid_alive(p) for p in parts), "the old parts were stopped, not joined"
        dep = load_deployment(run_dir)
        deadline = time.monotonic() + 400
        while not set(ended) <= set(ledger := ledger_roots(state)):
            missing = len(set(ended) - set(ledger))
            assert time.monotonic() < deadline, f"{missing} of {len(ended)} executions never projected"
            time.sleep(2)

        # Exactly once: one ledger row per root, nothing else in the ledger.
        ledger = ledger_roots(state)
        assert {r for r, n in ledger.items() if n != 1} == set()
        assert set(ledger) == set(ended)
        # Boundary's facts equal the ground truth: one root thread, every call, per execution.
        ids = set(ended)
        roots = _per_execution(
            state,
            "SELECT execution_id, count() AS n FROM threads_v1 "
            f"WHERE is_root AND execution_id IN ({_in(ids)}) GROUP BY execution_id",
        )
        assert roots == dict.fromkeys(ids, 1)
        calls = _per_execution(
            state,
            f"SELECT execution_id, count() AS n FROM calls_v1 WHERE execution_id IN ({_in(ids)}) "
            "GROUP BY execution_id",
        )
        assert calls == {e: len(x.spans) for e, x in ended.items()}
        # Nothing pending, quarantined or dead-lettered.
        assert state.environment_id
        status: dict[str, Any] = environment_status(dep, state.environment_id)
        assert status["executions"]["pending"] == 0, status
        assert status["executions"]["quarantined"] == 0, status
        assert status["executions"]["projected"] == len(ended), status
        assert status["objects"]["quarantined"] == 0 and status["objects"]["waiting"] == 0, status
        assert status["dead_letter_queue"] == {"visible": 0, "in_flight": 0}, status
    finally:
        stop_stack(run_dir)
