"""On a real embedded stack: every command finds it with no variable set, secrets stay masked in what
``stack up|status`` print, a missing token is the gateway's 401, and after an end-to-end run (ship,
project, public and private queries, operator status) no log holds a token, the AWS secret or a
presigned URL's signature.

The stack runs from ``<home>/run/stack`` and every command runs in ``<home>`` with no
``BAML_STUDIO_*``/``BAML_PUBLISHER_*`` variable, exactly as a user next to ``stack up`` would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from stack_fixtures import CLI, free_base_port, stack_pids, start_stack, stop_stack

from api.dataplane.aws import aws_client
from formats.deployment_settings import mask_secret
from formats.synth import SynthConfig, synthesize
from publisher import Publisher, PublisherSettings
from worker.stack.state import StackState, load_stack_state, pid_alive, write_stack_state

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    run_dir = home / "run" / "stack"
    state = start_stack(run_dir, free_base_port())
    try:
        yield home
    finally:
        final = load_stack_state(run_dir) or state
        stop_stack(run_dir)
        left = [pid for pid in stack_pids(final) if pid_alive(pid)]
        assert not left, f"processes left running after stack down: {left}"


def _state(home: Path) -> StackState:
    state = load_stack_state(home / "run" / "stack")
    assert state is not None and state.publisher_token and state.user_token and state.operator_token
    return state


def bare(home: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``baml-studio ARGS`` in ``home`` with no deployment variable set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAML_STUDIO_", "BAML_PUBLISHER_"))}
    return subprocess.run(
        [*CLI, *args],
        cwd=home,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _secrets(state: StackState) -> list[str]:
    return [s for s in (state.operator_token, state.user_token, state.publisher_token) if s]


def test_publish_with_no_variables_ships_to_the_running_stack(home: Path) -> None:
    state = _state(home)
    root = home / "app" / ".baml" / "profiles-v1"
    synthesize(root, SynthConfig(seed=11, processes=1, executions=10))
    result = bare(home, "publish", str(root), "--stats")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"flush \S+: [1-9]\d* shipped", result.stderr), result.stderr
    assert not [s for s in _secrets(state) if s in result.stdout + result.stderr]
    s3 = aws_client(
        "s3", state.s3_endpoint_url, state.aws_region, state.aws_access_key_id, state.aws_secret_access_key
    )
    prefix = f"evidence/v1/{state.tenant_id}/{state.project_id}/{state.environment_id}/"
    assert s3.list_objects_v2(Bucket=state.bucket, Prefix=prefix).get("KeyCount", 0) > 0


def test_publish_next_to_a_stopped_stack_is_a_configuration_error(home: Path, tmp_path: Path) -> None:
    # The running stack's own state file, as `stack down` or a killed launcher leaves it.
    stopped = _state(home).model_copy(
        update={"status": "stopped", "run_dir": str(tmp_path / "run" / "stack")}
    )
    write_stack_state(stopped)
    root = tmp_path / "app" / ".baml" / "profiles-v1"
    synthesize(root, SynthConfig(seed=13, processes=1, executions=2))
    result = bare(tmp_path, "publish", str(root))
    assert result.returncode == 2, result.stdout + result.stderr
    for named in ("BAML_PUBLISHER_TOKEN", "--token", "baml-studio stack status --show-secrets"):
        assert named in result.stderr, result.stderr
    assert not [s for s in _secrets(stopped) if s in result.stdout + result.stderr]


def test_every_command_finds_the_stack_by_itself(home: Path) -> None:
    # The end-to-end run the log check below relies on: synth, ship, project, query.
    demo = bare(home, "demo", "--executions", "40", "--timeout", "180", timeout=300)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    query = bare(home, "query", "SELECT count() AS n FROM calls_v1")
    assert query.returncode == 0, query.stdout + query.stderr
    tokens = bare(home, "tokens", "list", "--json")
    assert tokens.returncode == 0 and json.loads(tokens.stdout)["items"], tokens.stderr
    status = bare(home, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout.splitlines()[0])["executions"]


def test_stack_status_masks_secrets_unless_asked(home: Path) -> None:
    state = _state(home)
    table, as_json = bare(home, "stack", "status"), bare(home, "stack", "status", "--json")
    for result in (table, as_json):
        assert result.returncode == 0, result.stderr
        assert not [s for s in _secrets(state) if s in result.stdout]
    assert mask_secret(state.publisher_token) in table.stdout
    assert json.loads(as_json.stdout)["operator_token"] == mask_secret(state.operator_token)
    shown = bare(home, "stack", "status", "--show-secrets")
    assert all(s in shown.stdout for s in _secrets(state))


def test_no_token_is_the_gateways_401_not_a_network_error(home: Path) -> None:
    state = _state(home)
    root = home / "no-token" / ".baml" / "profiles-v1"
    synthesize(root, SynthConfig(seed=12, processes=1, executions=3))
    pub = Publisher(PublisherSettings(gateway_url=state.gateway_url, token="", profile_dir=root))
    assert pub.run_once(20) is None
    pub.close()
    assert pub.stopped_reason == "unauthorized"
    assert pub.stats()["errors"] == {"config_401": 1}


def test_no_log_holds_a_token_the_aws_secret_or_a_presigned_signature(home: Path) -> None:
    state = _state(home)
    run_dir = home / "run" / "stack"
    logs = sorted(p for p in run_dir.rglob("*.log") if p.is_file())
    assert {p.stem for p in logs} >= {"launcher", "gateway", "coordinator", "boundary", "worker", "bridge"}
    text = {p.name: p.read_text(errors="replace") for p in logs}
    assert sum(map(len, text.values())) > 0
    needles = {f"token {mask_secret(s)}": s for s in _secrets(state)}
    # moto's placeholder secret ("test") is a common word: searched for only when it is a real one.
    if len(state.aws_secret_access_key) >= 16:
        needles["the AWS secret"] = state.aws_secret_access_key
    found = [
        (what, name) for what, needle in needles.items() for name, body in text.items() if needle in body
    ]
    # Presigned URLs (their signature and credential parameters) and revealing key/value forms.
    patterns = re.compile(
        r"X-Amz-Signature|X-Amz-Credential|Signature=|Bearer bst_|AWS_SECRET_ACCESS_KEY=|"
        r"aws_secret_access_key['\"]?\s*[:=]\s*['\"](?!\*)",
        re.IGNORECASE,
    )
    found += [(m.group(0), name) for name, body in text.items() for m in [patterns.search(body)] if m]
    assert not found, found
