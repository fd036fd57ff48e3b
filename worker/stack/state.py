"""The state file ``<run-dir>/stack.json``: how every other command finds a running stack.

It holds every URL, port, id, TLS path and development token of the stack, and the pid of each
process. The file carries tokens, so it is written with mode 0600 and atomically (readers never
see half a file).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

# Re-exported: the resolver (formats.deployment_settings) owns both, this module's callers keep them.
from formats.deployment_settings import STATE_FILE as STATE_FILE
from formats.deployment_settings import pid_alive as pid_alive
from worker.settings import StackSettings

StackStatus = Literal["starting", "healthy", "stopping", "stopped", "failed"]


class PartState(BaseModel):
    name: str
    pid: int | None = None
    url: str | None = None
    log: str
    restarts: int = 0
    status: Literal["pending", "starting", "up", "restarting", "down", "failed"] = "pending"


class TlsPaths(BaseModel):
    dir: str
    ca_cert: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


class StackState(BaseModel):
    run_dir: str
    status: StackStatus = "starting"
    error: str | None = None
    launcher_pid: int
    started_at: float
    ready_after_s: float | None = None

    host: str
    ports: dict[str, int]
    gateway_url: str
    coordinator_url: str
    boundary_control_url: str
    boundary_workload_url: str
    temporal_address: str
    temporal_namespace: str = "default"
    temporal_ui_url: str
    task_queue: str
    s3_endpoint_url: str
    sqs_endpoint_url: str
    aws_region: str
    aws_access_key_id: str
    aws_secret_access_key: str
    bucket: str
    queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    metastore_url: str

    tenant_id: str | None = None
    project_id: str | None = None
    environment_id: str | None = None
    deployment_id: str | None = None
    cell: str | None = None
    operator_token: str | None = None
    user_token: str | None = None
    publisher_token: str | None = None
    tls: TlsPaths | None = None

    parts: dict[str, PartState] = Field(default_factory=dict)

    def launcher_alive(self) -> bool:
        return pid_alive(self.launcher_pid)


def resolve_run_dir(run_dir: Path | str | None = None) -> Path:
    """The run directory: the argument, else ``BAML_STUDIO_STACK_RUN_DIR``, else ``./run/stack``."""
    chosen = Path(run_dir) if run_dir is not None else StackSettings().run_dir
    return chosen.expanduser().resolve()


def state_path(run_dir: Path | str | None = None) -> Path:
    return resolve_run_dir(run_dir) / STATE_FILE


def load_stack_state(run_dir: Path | str | None = None) -> StackState | None:
    """The stack recorded in the run directory, or None when no stack was ever started there.

    A returned state may describe a stack that has since stopped: check ``status`` and
    ``launcher_alive()``.
    """
    path = state_path(run_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return StackState.model_validate_json(text)


def write_stack_state(state: StackState) -> Path:
    path = Path(state.run_dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".stack.", suffix=".json", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(state.model_dump_json(indent=2))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
