"""Settings of the worker-side processes: the Temporal worker, the SQS bridge and the stack launcher.

Every process reads its own settings class from environment variables that share one prefix
family, ``BAML_STUDIO_<PROCESS>_<FIELD>`` (``BAML_STUDIO_WORKER_TASK_QUEUE``,
``BAML_STUDIO_BRIDGE_QUEUE_NAME``, ``BAML_STUDIO_STACK_RUN_DIR``...). Every default points at the
embedded stack that ``baml-studio stack up`` starts with its default ports, so a process started
by hand on a development machine finds its peers without configuration.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# Defaults of the embedded stack, shared with worker.stack.ports (the one place ports are laid out).
DEFAULT_TEMPORAL_ADDRESS = "127.0.0.1:7233"
DEFAULT_TEMPORAL_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "baml-studio"
DEFAULT_OBJECT_STORE_URL = "http://127.0.0.1:8702"
DEFAULT_AWS_REGION = "us-east-1"
DEFAULT_AWS_KEY = "test"  # moto accepts any key; production deployments set real credentials
DEFAULT_BUCKET = "baml-evidence"
DEFAULT_PROJECTION_QUEUE = "baml-projection"
DEFAULT_DEAD_LETTER_QUEUE = "baml-projection-dlq"
DEFAULT_BOUNDARY_WORKLOAD_URL = "https://127.0.0.1:8711"


class TemporalWorkerSettings(BaseSettings):
    """The Temporal worker (``python -m worker.temporal_worker``)."""

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_WORKER_", extra="ignore")

    temporal_address: str = Field(
        default=DEFAULT_TEMPORAL_ADDRESS, description="Temporal frontend host:port."
    )
    temporal_namespace: str = Field(default=DEFAULT_TEMPORAL_NAMESPACE, description="Temporal namespace.")
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE, description="Task queue the worker polls.")
    s3_endpoint_url: str | None = Field(
        default=DEFAULT_OBJECT_STORE_URL, description="S3 endpoint; empty for AWS's default endpoint."
    )
    aws_region: str = Field(default=DEFAULT_AWS_REGION, description="AWS region of the bucket.")
    aws_access_key_id: str = Field(default=DEFAULT_AWS_KEY, description="S3 access key id.")
    aws_secret_access_key: str = Field(default=DEFAULT_AWS_KEY, description="S3 secret access key.")
    bucket: str = Field(default=DEFAULT_BUCKET, description="Evidence bucket.")
    boundary_workload_url: str = Field(
        default=DEFAULT_BOUNDARY_WORKLOAD_URL, description="Boundary workload API (mTLS) base URL."
    )
    tls_dir: Path = Field(
        default=Path("run/stack/tls"), description="Directory holding the workload identity CA, cert and key."
    )
    heartbeat_file: Path | None = Field(
        default=None,
        description="File rewritten every heartbeat interval while the worker polls; unset: none.",
    )
    heartbeat_interval_s: float = Field(
        default=2.0, gt=0, description="Seconds between heartbeat-file writes."
    )


class SqsBridgeSettings(BaseSettings):
    """The SQS bridge (``python -m worker.sqs_bridge``)."""

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_BRIDGE_", extra="ignore")

    sqs_endpoint_url: str | None = Field(
        default=DEFAULT_OBJECT_STORE_URL, description="SQS endpoint; empty for AWS's default endpoint."
    )
    aws_region: str = Field(default=DEFAULT_AWS_REGION, description="AWS region of the queues.")
    aws_access_key_id: str = Field(default=DEFAULT_AWS_KEY, description="SQS access key id.")
    aws_secret_access_key: str = Field(default=DEFAULT_AWS_KEY, description="SQS secret access key.")
    queue_name: str = Field(
        default=DEFAULT_PROJECTION_QUEUE, description="Projection queue (S3 notifications)."
    )
    dead_letter_queue_name: str = Field(default=DEFAULT_DEAD_LETTER_QUEUE, description="Dead-letter queue.")
    queue_url: str | None = Field(
        default=None, description="Projection queue URL; unset: looked up by queue_name."
    )
    poll_interval_s: float = Field(
        default=5.0, gt=0, description="Seconds between two heartbeat-file writes (with the queue counts)."
    )
    wait_time_s: int = Field(default=20, ge=0, le=20, description="SQS long-poll wait per receive, seconds.")
    batch_size: int = Field(default=10, ge=1, le=10, description="Messages per receive.")
    max_in_flight: int = Field(
        default=32,
        ge=1,
        description="Messages being routed and started at once (a started workflow frees its slot).",
    )
    visibility_timeout_s: int = Field(
        default=60, ge=5, le=43200, description="Visibility timeout set on receive and on every extension."
    )
    visibility_extension_s: float = Field(
        default=20.0, gt=0, description="Seconds between two visibility extensions of a message in hand."
    )
    retry_delay_s: int = Field(
        default=30, ge=0, le=43200, description="A message left for retry becomes visible again after this."
    )
    hold_max_s: float = Field(
        default=11 * 3600.0,
        gt=0,
        description="Longest a message is held while its workflow runs (SQS caps visibility at 12 h).",
    )
    generation_cache_s: float = Field(
        default=5.0, ge=0, description="Seconds an environment's active generation is cached."
    )
    temporal_address: str = Field(
        default=DEFAULT_TEMPORAL_ADDRESS, description="Temporal frontend host:port."
    )
    temporal_namespace: str = Field(default=DEFAULT_TEMPORAL_NAMESPACE, description="Temporal namespace.")
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE, description="Task queue of the workflows it starts.")
    boundary_workload_url: str | None = Field(
        default=None, description="Boundary workload API (mTLS) base URL; unset: the stack's (stack.json)."
    )
    tls_dir: Path | None = Field(
        default=None, description="Directory with the workload identity CA, cert and key; unset: the stack's."
    )
    deployment_id: str | None = Field(default=None, description="This deployment's id; unset: the stack's.")
    cell: str | None = Field(default=None, description="This deployment's cell; unset: the stack's.")
    stack_run_dir: Path | None = Field(
        default=None,
        description="Embedded stack run directory whose stack.json fills unset values; unset: the "
        "heartbeat file's directory if it holds a stack.json, else BAML_STUDIO_STACK_RUN_DIR.",
    )
    heartbeat_file: Path | None = Field(
        default=None, description="File rewritten every poll interval with the queue counts; unset: none."
    )


class StackSettings(BaseSettings):
    """The embedded-stack launcher (``baml-studio stack up|down|status``) and the CLI finding it."""

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_STACK_", extra="ignore")

    run_dir: Path = Field(
        default=Path("run/stack"), description="Run directory: logs, state file, databases, TLS."
    )
    host: str = Field(default="127.0.0.1", description="Address every part of the stack binds to.")
    base_port: int | None = Field(
        default=None,
        ge=1024,
        le=65000,
        description="Lay every port out from this base (see docs/stack.md); unset: the default ports.",
    )
    startup_timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds for the whole stack to become healthy."
    )
    stop_timeout_s: float = Field(
        default=10.0, gt=0, description="Seconds between SIGTERM and SIGKILL on stop."
    )
    max_restarts: int = Field(
        default=3, ge=0, description="Restarts of one part before the whole stack stops and reports failure."
    )
    bucket: str = Field(default=DEFAULT_BUCKET, description="Evidence bucket created in moto.")
    queue_name: str = Field(default=DEFAULT_PROJECTION_QUEUE, description="Projection queue created in moto.")
    dead_letter_queue_name: str = Field(default=DEFAULT_DEAD_LETTER_QUEUE, description="Dead-letter queue.")
    queue_visibility_timeout_s: int = Field(
        default=300, ge=0, le=43200, description="Projection queue visibility timeout, seconds."
    )
    max_receive_count: int = Field(default=5, ge=1, description="Receives before a message moves to the DLQ.")
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE, description="Temporal task queue of the stack's worker."
    )


@lru_cache
def get_worker_settings() -> TemporalWorkerSettings:
    return TemporalWorkerSettings()


@lru_cache
def get_bridge_settings() -> SqsBridgeSettings:
    return SqsBridgeSettings()


@lru_cache
def get_stack_settings() -> StackSettings:
    return StackSettings()


class ControlCliSettings(BaseSettings):
    """The operator CLI (``baml-studio tenants|tokens``) reaching a Boundary control API.

    Unset, both come from the running stack's ``stack.json`` (``BAML_STUDIO_STACK_RUN_DIR``).
    """

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_CLI_", extra="ignore")

    boundary_url: str | None = Field(
        default=None, description="Boundary control API base URL; unset: the running stack's (stack.json)."
    )
    token: str | None = Field(
        default=None, description="Operator or admin bearer token; unset: the running stack's operator token."
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Seconds per control API request.")
