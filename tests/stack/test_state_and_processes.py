"""Pure parts of the stack: port layout, the state file, process-group stopping, health endpoints."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from formats.deployment_settings import EMBEDDED_STACK_ENV
from worker.settings import StackSettings
from worker.stack.launcher import initial_state
from worker.stack.ports import StackPorts
from worker.stack.state import load_stack_state, pid_alive, write_stack_state
from worker.stack.supervisor import stop_groups


def test_port_layouts_on_two_bases_never_overlap() -> None:
    a, b = StackPorts.layout(21000), StackPorts.layout(21050)
    assert len(set(a.as_dict().values())) == len(a.as_dict())
    assert not set(a.as_dict().values()) & set(b.as_dict().values())
    default = StackPorts.layout(None)
    assert (default.temporal, default.temporal_ui, default.boundary_control) == (7233, 8233, 8710)


def test_state_file_round_trips_and_is_private(tmp_path: Path) -> None:
    state = initial_state(StackSettings(run_dir=tmp_path, base_port=30000), tmp_path)
    state.operator_token = "op-secret"
    path = write_stack_state(state)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = load_stack_state(tmp_path)
    assert loaded == state
    assert loaded is not None and loaded.gateway_url == "http://127.0.0.1:30000"
    assert loaded.temporal_address == "127.0.0.1:30020"


def test_load_stack_state_without_a_stack_is_none(tmp_path: Path) -> None:
    assert load_stack_state(tmp_path / "nothing-here") is None


def test_stop_groups_stops_the_whole_process_group() -> None:
    # A shell that forks two children: both must die with the group, and one ignores SIGTERM.
    # The subshell says so once its trap is set, after both forks: then all three are in the group
    # (a fixed sleep was a guess that a loaded machine can beat).
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & (trap '' TERM; echo trapped; sleep 60) & wait"],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert leader.stdout is not None and leader.stdout.readline() == b"trapped\n"
    leader.stdout.close()
    members = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == leader.pid]
    assert len(members) >= 3
    killed = stop_groups([leader.pid], timeout_s=1.0, reap=lambda pid: leader.poll() is not None)
    assert killed == [leader.pid]  # the TERM-ignoring child needed SIGKILL
    assert not [pid for pid in members if pid_alive(pid)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_gateway_and_coordinator_answer_healthz(monkeypatch: pytest.MonkeyPatch) -> None:
    # The module-level apps read the processes' settings: the default (moto) keys are placeholders,
    # accepted only inside the embedded stack.
    monkeypatch.setenv(EMBEDDED_STACK_ENV, "1")
    from api.coordinator import settings as coordinator_settings
    from api.coordinator.app import create_app as coordinator_app
    from api.gateway import settings as gateway_settings
    from api.gateway.app import create_app as gateway_app

    gateway_settings.get_settings.cache_clear()
    coordinator_settings.get_settings.cache_clear()
    assert TestClient(gateway_app()).get("/healthz").json() == {"status": "ok", "service": "gateway"}
    assert TestClient(coordinator_app()).get("/healthz").json() == {"status": "ok", "service": "coordinator"}
