"""The embedded stack for real: every part healthy, the S3/SQS wiring, status, supervision, a second
stack at the same time, and nothing left running after ``stack down``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from stack_fixtures import cli, free_base_port, stack_pids, start_stack, stop_stack

from api.dataplane.aws import aws_client
from worker.settings import StackSettings
from worker.stack.health import run_health_workflow
from worker.stack.state import StackState, load_stack_state, pid_alive
from worker.stack.supervisor import signal_group

pytestmark = pytest.mark.stack

PARTS = {"temporal", "moto", "boundary", "gateway", "coordinator", "worker", "bridge"}


def _s3(state: StackState):  # type: ignore[no-untyped-def]
    return aws_client(
        "s3", state.s3_endpoint_url, state.aws_region, state.aws_access_key_id, state.aws_secret_access_key
    )


def _sqs(state: StackState):  # type: ignore[no-untyped-def]
    return aws_client(
        "sqs", state.sqs_endpoint_url, state.aws_region, state.aws_access_key_id, state.aws_secret_access_key
    )


def test_stack_up_records_every_part_healthy_with_ids_and_tokens(running_stack: StackState) -> None:
    state = running_stack
    assert state.status == "healthy"
    assert set(state.parts) == PARTS
    assert all(part.status == "up" and pid_alive(part.pid) for part in state.parts.values())
    assert state.ready_after_s is not None and state.ready_after_s < 60
    assert state.operator_token and state.operator_token.startswith("bst_op_")
    assert state.user_token and state.user_token.startswith("bst_usr_")
    assert state.publisher_token and state.publisher_token.startswith("bst_pub_")
    assert state.tenant_id and state.project_id and state.environment_id and state.deployment_id
    assert state.tls is not None and all(
        Path(p).is_file()
        for p in (state.tls.ca_cert, state.tls.server_cert, state.tls.client_cert, state.tls.client_key)
    )
    run_dir = Path(state.run_dir)
    assert {p.name for p in (run_dir / "logs").iterdir()} >= {f"{name}.log" for name in PARTS}


def test_http_parts_answer_healthz_and_temporal_ui_is_served(running_stack: StackState) -> None:
    for url in (running_stack.gateway_url, running_stack.coordinator_url, running_stack.boundary_control_url):
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    assert httpx.get(f"{running_stack.temporal_ui_url}/api/v1/namespaces", timeout=5).status_code == 200
    assert "text/html" in httpx.get(running_stack.temporal_ui_url, timeout=5).headers["content-type"]


def test_boundary_workload_api_requires_a_client_certificate(running_stack: StackState) -> None:
    assert running_stack.tls is not None
    host, port = running_stack.host, running_stack.ports["boundary_workload"]
    with socket.create_connection((host, port), timeout=5):
        pass  # the TLS port is open; plain HTTP to it must not work
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{host}:{port}/healthz", timeout=5).raise_for_status()


def test_worker_runs_the_health_check_workflow(running_stack: StackState) -> None:
    result = asyncio.run(
        run_health_workflow(
            running_stack.temporal_address, running_stack.temporal_namespace, running_stack.task_queue
        )
    )
    assert result.worker_identity.endswith(f":{running_stack.parts['worker'].pid}")


def test_temporals_store_is_in_write_ahead_log_mode(running_stack: StackState) -> None:
    # SQLite's default journal cost the server a quarter of its CPU (docs/stack.md, "Temporal's store").
    db = Path(running_stack.run_dir) / "temporal.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_bucket_is_versioned_and_queue_has_redrive_to_dlq(running_stack: StackState) -> None:
    s3, sqs = _s3(running_stack), _sqs(running_stack)
    assert s3.get_bucket_versioning(Bucket=running_stack.bucket)["Status"] == "Enabled"
    attributes = sqs.get_queue_attributes(QueueUrl=running_stack.queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    redrive = json.loads(attributes["RedrivePolicy"])
    dlq_arn = sqs.get_queue_attributes(
        QueueUrl=running_stack.dead_letter_queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dlq_arn
    assert int(redrive["maxReceiveCount"]) == StackSettings().max_receive_count == 17
    assert int(attributes["VisibilityTimeout"]) == 300


def test_meta_and_pack_objects_notify_the_queue_and_nothing_else_does(running_stack: StackState) -> None:
    """The stack's own bridge consumes the queue, so the notifications are observed through it: these
    objects lie outside the deployment's scope, and each notified one is quarantined with a marker."""
    s3 = _s3(running_stack)
    prefix = "evidence/v1/t/p/e/streams/" + "a" * 32
    keys = [
        f"{prefix}/meta/{1:020d}.bamlmeta.zst",
        f"{prefix}/values/01ARZ3NDEKTSV4RRFFQ69G5FAV.bamlpack.zst",
    ]
    for key in [*keys, f"{prefix}/data/{1:020d}.bamldata.zst"]:
        s3.put_object(Bucket=running_stack.bucket, Key=key, Body=b"x")

    def markers() -> list[str]:
        listed = s3.list_objects_v2(Bucket=running_stack.bucket, Prefix=f"quarantine/{prefix}/")
        return sorted(o["Key"] for o in listed.get("Contents", []))

    expected = sorted(f"quarantine/{key}.quarantine" for key in keys)
    deadline = time.monotonic() + 60
    while markers() != expected and time.monotonic() < deadline:
        time.sleep(0.5)
    assert markers() == expected  # meta and pack notified; the data segment did not
    time.sleep(2)
    assert markers() == expected  # and nothing else arrives later


def test_status_reports_each_part_healthy(running_stack: StackState) -> None:
    result = cli("stack", "status", "--run-dir", running_stack.run_dir, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["healthy"] is True
    assert report["health"] == dict.fromkeys(PARTS)
    table = cli("stack", "status", "--run-dir", running_stack.run_dir)
    assert "all parts healthy" in table.stdout and "Temporal Web UI" in table.stdout


def test_a_dead_part_is_restarted_and_reported(running_stack: StackState) -> None:
    before = load_stack_state(running_stack.run_dir)
    assert before is not None
    old_pid = before.parts["gateway"].pid
    assert old_pid is not None
    signal_group(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    after = before
    while time.monotonic() < deadline:
        after = load_stack_state(running_stack.run_dir) or before
        part = after.parts["gateway"]
        if part.pid != old_pid and part.status == "up":
            break
        time.sleep(0.2)
    assert after.parts["gateway"].restarts == before.parts["gateway"].restarts + 1
    assert after.parts["gateway"].status == "up"
    assert httpx.get(f"{after.gateway_url}/healthz", timeout=5).status_code == 200
    assert "gateway exited" in (Path(after.run_dir) / "launcher.log").read_text()


def test_second_up_in_the_same_run_dir_is_refused(running_stack: StackState) -> None:
    result = cli("stack", "up", "--detach", "--run-dir", running_stack.run_dir, "--base-port", "39000")
    assert result.returncode == 1
    assert "already running" in result.stderr


def test_a_taken_port_is_named(tmp_path: Path) -> None:
    base = free_base_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base + 1))  # the coordinator's port
        holder.listen()
        result = cli("stack", "up", "--run-dir", str(tmp_path), "--base-port", str(base))
    assert result.returncode == 1
    assert f"coordinator {base + 1}" in result.stderr


def test_second_stack_runs_beside_the_first_and_down_leaves_no_process(
    running_stack: StackState, tmp_path: Path
) -> None:
    base = free_base_port(avoid=set(running_stack.ports.values()))
    second = start_stack(tmp_path / "second", base)
    assert second.status == "healthy" and second.gateway_url != running_stack.gateway_url
    pids = stack_pids(second)
    assert stop_stack(tmp_path / "second").returncode == 0
    assert not [pid for pid in pids if pid_alive(pid)]
    final = load_stack_state(tmp_path / "second")
    assert final is not None and final.status == "stopped"
    # The first stack did not notice.
    assert httpx.get(f"{running_stack.gateway_url}/healthz", timeout=5).status_code == 200
    status = cli("stack", "status", "--run-dir", str(tmp_path / "second"))
    assert status.returncode == 1 and "stack not healthy" in status.stdout


def test_status_and_down_without_a_stack_say_what_to_do(tmp_path: Path) -> None:
    for command in ("status", "down"):
        result = cli("stack", command, "--run-dir", str(tmp_path))
        assert result.returncode == 1
        assert "no stack found" in result.stderr and "baml-studio stack up" in result.stderr


def test_foreground_up_stops_everything_on_sigterm(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = free_base_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "stack",
            "up",
            "--run-dir",
            str(tmp_path),
            "--base-port",
            str(base),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 60
    state = None
    while time.monotonic() < deadline:
        state = load_stack_state(tmp_path)
        if state and state.status in ("healthy", "failed"):
            break
        time.sleep(0.2)
    assert state is not None and state.status == "healthy"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "stack healthy" in out and "stack stopped" in out
    assert not [pid for pid in stack_pids(state) if pid != process.pid and pid_alive(pid)]
