"""Render a stack's state for people: every URL, port, token and part, as rich tables."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from worker.stack.state import StackState


def endpoints_table(state: StackState) -> Table:
    table = Table(title=f"BAML Studio stack ({state.status}) - {state.run_dir}", title_justify="left")
    table.add_column("what")
    table.add_column("where / value", overflow="fold")
    rows = [
        ("Temporal Web UI", state.temporal_ui_url),
        ("Temporal gRPC", f"{state.temporal_address} (namespace {state.temporal_namespace})"),
        ("Temporal task queue", state.task_queue),
        ("S3 + SQS (moto)", state.s3_endpoint_url),
        ("evidence bucket", state.bucket),
        ("projection queue", state.queue_url or "-"),
        ("dead-letter queue", state.dead_letter_queue_url or "-"),
        (
            "AWS region / key / secret",
            f"{state.aws_region} / {state.aws_access_key_id} / {state.aws_secret_access_key}",
        ),
        ("Boundary control API", state.boundary_control_url),
        ("Boundary workload API (mTLS)", state.boundary_workload_url),
        ("gateway", state.gateway_url),
        ("coordinator", state.coordinator_url),
        ("metastore", state.metastore_url),
        (
            "tenant / project / environment",
            f"{state.tenant_id} / {state.project_id} / {state.environment_id}",
        ),
        ("deployment / cell", f"{state.deployment_id} / {state.cell}"),
        ("operator token", state.operator_token or "-"),
        ("user token", state.user_token or "-"),
        ("publisher token", state.publisher_token or "-"),
        ("TLS directory", state.tls.dir if state.tls else "-"),
        ("state file", f"{state.run_dir}/stack.json"),
    ]
    if state.ready_after_s is not None:
        rows.append(("healthy after", f"{state.ready_after_s:.2f} s"))
    for what, value in rows:
        table.add_row(what, value)
    return table


def parts_table(state: StackState, health: dict[str, str | None] | None = None) -> Table:
    table = Table(title="parts", title_justify="left")
    for column in ("part", "status", "pid", "port/url", "restarts", "health", "log"):
        table.add_column(column, overflow="fold")
    for name, part in state.parts.items():
        reason = (health or {}).get(name, "")
        table.add_row(
            name,
            part.status,
            str(part.pid or "-"),
            part.url or "-",
            str(part.restarts),
            "ok" if health is not None and reason is None else (reason or "-"),
            part.log,
        )
    return table


def stack_report(state: StackState, health: dict[str, str | None] | None = None) -> Group:
    return Group(endpoints_table(state), parts_table(state, health))
