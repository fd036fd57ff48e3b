"""Render a stack's state for people: every URL, port, token and part, as rich tables.

Tokens and the AWS secret are masked (``bst_op_…a1b2``) unless the caller asks to show them
(``stack status --show-secrets``): terminals are scrolled back, shared and recorded.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from formats.deployment_settings import mask_secret
from worker.stack.state import StackState

# The state file's secret fields: masked in every rendering unless shown on purpose.
SECRET_FIELDS = ("aws_secret_access_key", "operator_token", "user_token", "publisher_token")


def _secret(value: str | None, show: bool) -> str:
    if not value:
        return "-"
    return value if show else mask_secret(value)


def state_document(state: StackState, *, show_secrets: bool = False) -> dict[str, Any]:
    """The state as JSON (``--json``), its secrets masked unless ``show_secrets``."""
    document: dict[str, Any] = json.loads(state.model_dump_json())
    if not show_secrets:
        for name in SECRET_FIELDS:
            if document.get(name):
                document[name] = mask_secret(document[name])
    return document


def endpoints_table(state: StackState, *, show_secrets: bool = False) -> Table:
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
            f"{state.aws_region} / {state.aws_access_key_id} / "
            f"{_secret(state.aws_secret_access_key, show_secrets)}",
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
        ("operator token", _secret(state.operator_token, show_secrets)),
        ("user token", _secret(state.user_token, show_secrets)),
        ("publisher token", _secret(state.publisher_token, show_secrets)),
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


def stack_report(
    state: StackState, health: dict[str, str | None] | None = None, *, show_secrets: bool = False
) -> Group:
    endpoints = endpoints_table(state, show_secrets=show_secrets)
    parts: list[Table | Text] = [endpoints, parts_table(state, health)]
    if not show_secrets:
        parts.append(Text("secrets masked: `baml-studio stack status --show-secrets` prints them"))
    return Group(*parts)
