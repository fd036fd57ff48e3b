"""The Temporal worker, the SQS bridge and the projection runtime find their deployment through the
one resolver (flag → BAML_STUDIO_* → the running stack's stack.json → default), on real state files;
a missing identity is a configuration error that names the variables, before any request; the
Boundary URLs that may hold a password never show in a repr or a dump."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from activities.settings import ProjectionSettings
from api.boundary.settings import BoundarySettings
from formats.deployment_settings import ConfigurationError
from worker.settings import SqsBridgeSettings, StackSettings, TemporalWorkerSettings
from worker.sqs_bridge import resolve_identity as bridge_identity
from worker.stack.launcher import initial_state
from worker.stack.state import StackState, TlsPaths, write_stack_state
from worker.temporal_worker import missing_identity_message
from worker.temporal_worker import resolve_identity as worker_identity

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "bst_op_" + "a" * 48 + "op12"


def _state(run_dir: Path, *, status: str = "healthy", pid: int | None = None) -> StackState:
    """A stack.json as a stack on base port 24000 writes it, with this process as its launcher."""
    state = initial_state(StackSettings(run_dir=run_dir, base_port=24000), run_dir)
    state.status = status  # type: ignore[assignment]
    state.launcher_pid = os.getpid() if pid is None else pid
    state.tenant_id, state.project_id, state.environment_id = "ten_1", "prj_1", "env_1"
    state.deployment_id, state.cell = "dep_1", "cell-1"
    state.operator_token = OPERATOR
    state.queue_url = "http://127.0.0.1:24002/123456789012/baml-projection"
    tls = run_dir / "tls"
    state.tls = TlsPaths(
        dir=str(tls),
        ca_cert=str(tls / "ca.pem"),
        server_cert=str(tls / "server.pem"),
        server_key=str(tls / "server-key.pem"),
        client_cert=str(tls / "client-dep_1.pem"),
        client_key=str(tls / "client-dep_1-key.pem"),
    )
    write_stack_state(state)
    return state


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("BAML_STUDIO_", "BAML_PUBLISHER_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # ./run/stack is this test's own


def test_worker_bridge_and_projection_settings_come_from_the_running_stack(tmp_path: Path) -> None:
    state = _state(tmp_path / "run" / "stack")
    worker, bridge, projection = TemporalWorkerSettings(), SqsBridgeSettings(), ProjectionSettings()

    # The stack's ports (base 24000), not the defaults' (8702, 7233, 8711).
    assert worker.temporal_address == bridge.temporal_address == state.temporal_address == "127.0.0.1:24020"
    assert worker.s3_endpoint_url == state.s3_endpoint_url
    assert bridge.sqs_endpoint_url == state.sqs_endpoint_url
    assert worker.boundary_workload_url == bridge.boundary_workload_url == state.boundary_workload_url
    assert worker.tls_dir == bridge.tls_dir == tmp_path / "run" / "stack" / "tls"

    assert bridge_identity(bridge).deployment_id == "dep_1"
    assert bridge_identity(bridge).cell == "cell-1"
    identity = worker_identity(projection)
    assert identity is not None
    assert (identity.deployment_id, identity.cell, identity.tenant_id) == ("dep_1", "cell-1", "ten_1")
    assert identity.environments == (("prj_1", "env_1"),)
    assert identity.queue_url == state.queue_url and identity.control_url == state.boundary_control_url
    assert identity.operator_token == SecretStr(OPERATOR)
    assert OPERATOR not in repr(identity)


def test_variables_and_arguments_win_over_the_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _state(tmp_path / "run" / "stack")
    monkeypatch.setenv("BAML_STUDIO_BRIDGE_DEPLOYMENT_ID", "dep_env")
    monkeypatch.setenv("BAML_STUDIO_WORKER_TEMPORAL_ADDRESS", "temporal.example:7233")
    monkeypatch.setenv("BAML_STUDIO_PROJECTION_ENVIRONMENT_IDS", '["env_a", "env_b"]')
    monkeypatch.setenv("BAML_STUDIO_PROJECTION_PROJECT_IDS", '{"env_a": "prj_a"}')
    assert bridge_identity(SqsBridgeSettings()).deployment_id == "dep_env"
    assert bridge_identity(SqsBridgeSettings(cell="cell-arg")).cell == "cell-arg"
    assert TemporalWorkerSettings().temporal_address == "temporal.example:7233"
    identity = worker_identity(ProjectionSettings())
    # Listed environments replace the stack's one; one without a project gets no schedules.
    assert identity is not None and identity.environments == (("prj_a", "env_a"),)


@pytest.mark.parametrize("status,pid", [("stopped", None), ("healthy", 2**22 + 12345)])
def test_a_stopped_stack_lends_nothing_and_the_gap_names_the_variables(
    tmp_path: Path, status: str, pid: int | None
) -> None:
    """A stopped stack, or one whose launcher is gone (kill -9), lends no identity to a new process."""
    run_dir = tmp_path / "run" / "stack"
    _state(run_dir, status=status, pid=pid)

    with pytest.raises(ConfigurationError) as raised:
        bridge_identity(SqsBridgeSettings())
    text = str(raised.value)
    for name in ("BOUNDARY_WORKLOAD_URL", "TLS_DIR", "DEPLOYMENT_ID", "CELL"):
        assert f"BAML_STUDIO_BRIDGE_{name}" in text
    assert str(run_dir) in text

    projection = ProjectionSettings()
    assert worker_identity(projection) is None
    message = missing_identity_message(projection)
    for name in ("DEPLOYMENT_ID", "CELL", "TENANT_ID"):
        assert f"BAML_STUDIO_PROJECTION_{name}" in message
    # Defaults again, not the stopped stack's ports.
    assert TemporalWorkerSettings().temporal_address == "127.0.0.1:7233"


def test_the_bridge_without_identity_exits_2_naming_the_settings_before_any_request(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAML_STUDIO_")}
    env |= {
        "BAML_STUDIO_EMBEDDED_STACK": "1",
        "BAML_STUDIO_STACK_RUN_DIR": str(tmp_path / "no-stack"),
        # Nothing listens here: reaching for it first would end in a connection error, not exit 2.
        "BAML_STUDIO_BRIDGE_SQS_ENDPOINT_URL": "http://127.0.0.1:9",
        "BAML_STUDIO_BRIDGE_TEMPORAL_ADDRESS": "127.0.0.1:9",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "worker.sqs_bridge"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "configuration error" in done.stderr and "BAML_STUDIO_BRIDGE_DEPLOYMENT_ID" in done.stderr
    assert "Traceback" not in done.stderr and "Connect" not in done.stderr
    assert time.monotonic() - started < 30


def test_boundary_urls_with_passwords_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    metastore = "mysql+pymysql://baml:hunter2-metastore@mysql:3306/boundary"
    clickhouse = "clickhouse://baml:hunter2-clickhouse@clickhouse:8123/"
    monkeypatch.setenv("BAML_STUDIO_BOUNDARY_METASTORE_URL", metastore)
    monkeypatch.setenv("BAML_STUDIO_BOUNDARY_CLICKHOUSE_URL", clickhouse)
    settings = BoundarySettings()
    shown = f"{settings!r} {settings} {settings.model_dump()} {settings.model_dump_json()}"
    assert "hunter2" not in shown
    assert settings.resolved_metastore_url() == metastore
    assert settings.resolved_clickhouse_url() == clickhouse
    # Unset, they keep meaning "embedded": SQLite under run_dir, chdb.
    monkeypatch.delenv("BAML_STUDIO_BOUNDARY_METASTORE_URL")
    monkeypatch.delenv("BAML_STUDIO_BOUNDARY_CLICKHOUSE_URL")
    embedded = BoundarySettings()
    assert embedded.resolved_metastore_url().startswith("sqlite:///")
    assert embedded.resolved_clickhouse_url() == ""
