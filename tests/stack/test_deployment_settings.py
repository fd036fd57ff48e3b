"""The one resolver (flags → BAML_STUDIO_* → the running stack's stack.json → default), secret
masking, and the placeholder-credential rule, on real state files and real settings classes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from pydantic import SecretStr
from typer.testing import CliRunner

from api.coordinator.settings import get_settings as coordinator_settings
from api.gateway.settings import get_settings as gateway_settings
from formats.deployment_settings import (
    EMBEDDED_STACK_ENV,
    SHOW_SECRETS_COMMAND,
    MissingSettingError,
    PlaceholderCredentialsError,
    mask_secret,
    running_stack_document,
)
from publisher import PublisherSettings
from worker import cli_publish
from worker.settings import (
    CliSettings,
    OpsCliSettings,
    StackSettings,
    get_bridge_settings,
    get_worker_settings,
)
from worker.stack.launcher import initial_state
from worker.stack.report import stack_report, state_document
from worker.stack.state import StackState, write_stack_state

OPERATOR = "bst_op_" + "a" * 48 + "op12"
USER = "bst_usr_" + "b" * 48 + "us34"
PUBLISHER = "bst_pub_" + "c" * 48 + "pb56"


def _state(run_dir: Path, *, status: str = "healthy", pid: int | None = None) -> StackState:
    state = initial_state(StackSettings(run_dir=run_dir, base_port=23000), run_dir)
    state.status = status  # type: ignore[assignment]
    state.launcher_pid = os.getpid() if pid is None else pid
    state.operator_token, state.user_token, state.publisher_token = OPERATOR, USER, PUBLISHER
    state.tenant_id, state.project_id, state.environment_id = "ten_1", "prj_1", "env_1"
    state.queue_url = "http://127.0.0.1:1/queue/baml-projection"
    write_stack_state(state)
    return state


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("BAML_STUDIO_", "BAML_PUBLISHER_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # ./run/stack is this test's own


def test_a_running_stack_fills_what_no_flag_or_variable_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _state(tmp_path / "run" / "stack")  # the default run directory (cwd is tmp_path)
    cli = CliSettings()
    assert cli.boundary_url == state.boundary_control_url
    assert cli.token == SecretStr(OPERATOR) and cli.user_token == SecretStr(USER)
    assert cli.coordinator_url == state.coordinator_url and cli.gateway_url == state.gateway_url

    publisher = PublisherSettings()
    assert publisher.gateway_url == state.gateway_url
    assert publisher.require_token() == PUBLISHER

    ops = OpsCliSettings()
    assert (ops.bucket, ops.tenant_id, ops.environment_id) == (state.bucket, "ten_1", "env_1")
    assert ops.queue_url == state.queue_url and ops.operator_token == SecretStr(OPERATOR)

    # A variable beats the stack; a flag (constructor argument) beats the variable.
    monkeypatch.setenv("BAML_STUDIO_CLI_TOKEN", "bst_op_from_env")
    monkeypatch.setenv("BAML_PUBLISHER_GATEWAY_URL", "http://gateway.example:1")
    assert CliSettings().token == SecretStr("bst_op_from_env")
    assert CliSettings(token="bst_op_from_flag").token == SecretStr("bst_op_from_flag")  # type: ignore[arg-type]
    assert PublisherSettings().gateway_url == "http://gateway.example:1"
    assert PublisherSettings().require_token() == PUBLISHER  # the token still comes from the stack


def test_the_run_directory_comes_from_the_flag_then_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = _state(tmp_path / "elsewhere")
    assert CliSettings().boundary_url is None  # nothing in ./run/stack
    assert CliSettings(stack_run_dir=tmp_path / "elsewhere").boundary_url == elsewhere.boundary_control_url
    monkeypatch.setenv("BAML_STUDIO_STACK_RUN_DIR", str(tmp_path / "elsewhere"))
    assert PublisherSettings().require_token() == PUBLISHER


def test_a_stopped_or_dead_stack_lends_nothing(tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    _state(stopped, status="stopped")
    assert running_stack_document(stopped) is None
    dead = tmp_path / "dead"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    _state(dead, pid=child.pid)  # a launcher that exited
    assert running_stack_document(dead) is None
    for run_dir in (stopped, dead):
        assert CliSettings(stack_run_dir=run_dir).token is None
        with pytest.raises(MissingSettingError) as missing:
            PublisherSettings(stack_run_dir=run_dir).require_token()
        text = str(missing.value)
        assert "BAML_PUBLISHER_TOKEN" in text and "--token" in text and SHOW_SECRETS_COMMAND in text


def test_an_empty_variable_is_a_value_and_still_a_missing_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _state(tmp_path / "run" / "stack")
    monkeypatch.setenv("BAML_PUBLISHER_TOKEN", "")
    with pytest.raises(MissingSettingError, match="set but empty"):
        PublisherSettings().require_token()


def test_publish_without_a_token_exits_2_before_any_request(tmp_path: Path) -> None:
    # A listening socket that must never see a connection: the check comes first.
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    app = typer.Typer()
    cli_publish.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["publish", str(tmp_path / "profiles"), "--gateway-url", url])
    assert result.exit_code == 2, result.output
    assert "BAML_PUBLISHER_TOKEN" in result.output and "--token" in result.output
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()


def test_masked_secrets_keep_the_kind_prefix_and_last_four() -> None:
    assert mask_secret(OPERATOR) == "bst_op_…op12"
    assert mask_secret(SecretStr(USER)) == "bst_usr_…us34"
    assert mask_secret("test") == "…"  # too short: its last four would be all of it
    assert mask_secret("x" * 36 + "wxyz") == "…wxyz"
    assert mask_secret(None) == "-"


def test_reports_mask_every_secret_unless_asked(tmp_path: Path) -> None:
    from rich.console import Console

    state = _state(tmp_path / "s")
    state.aws_secret_access_key = "s3cr3t-" + "k" * 30 + "9876"

    def render(show: bool) -> str:
        console = Console(width=250, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(stack_report(state, show_secrets=show))
        return console.export_text()

    secrets = (OPERATOR, USER, PUBLISHER, state.aws_secret_access_key)
    masked = render(False)
    assert not [s for s in secrets if s in masked]
    assert "bst_op_…op12" in masked and "…9876" in masked
    shown = render(True)
    assert all(s in shown for s in secrets)
    document = json.dumps(state_document(state))
    assert not [s for s in secrets if s in document]
    assert PUBLISHER in json.dumps(state_document(state, show_secrets=True))


def test_processes_refuse_placeholder_credentials_outside_the_embedded_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    getters = (gateway_settings, coordinator_settings, get_worker_settings, get_bridge_settings)
    for getter in getters:
        getter.cache_clear()
        with pytest.raises(PlaceholderCredentialsError, match="AWS_SECRET_ACCESS_KEY") as refused:
            getter()
        assert EMBEDDED_STACK_ENV in str(refused.value)
    # Inside the embedded stack (the launcher's flag), or with real keys, they start.
    monkeypatch.setenv(EMBEDDED_STACK_ENV, "1")
    for getter in getters:
        getter.cache_clear()
        assert getter().aws_secret_access_key.get_secret_value() == "test"
    monkeypatch.delenv(EMBEDDED_STACK_ENV)
    monkeypatch.setenv("BAML_STUDIO_GATEWAY_AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    monkeypatch.setenv("BAML_STUDIO_GATEWAY_AWS_SECRET_ACCESS_KEY", "a-real-secret-value")
    gateway_settings.cache_clear()
    assert gateway_settings().aws_access_key_id == "AKIAREALKEY"
    assert "a-real-secret-value" not in repr(gateway_settings())  # SecretStr hides it
    for getter in getters:
        getter.cache_clear()
