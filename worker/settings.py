"""Settings of the worker-side processes: the Temporal worker, the SQS bridge and the stack launcher.

Every process reads its own settings class from environment variables that share one prefix
family, ``BAML_STUDIO_<PROCESS>_<FIELD>`` (``BAML_STUDIO_WORKER_TASK_QUEUE``,
``BAML_STUDIO_BRIDGE_QUEUE_NAME``, ``BAML_STUDIO_STACK_RUN_DIR``...). Every default points at the
embedded stack that ``baml-studio stack up`` starts with its default ports, so a process started
by hand on a development machine finds its peers without configuration.

Secrets are ``SecretStr`` (revealed only where they are used). Every class that reaches a
deployment (the Temporal worker's, the SQS bridge's, the CLI's) derives from
:class:`formats.deployment_settings.DeploymentSettings`: what no flag or variable sets comes from
the running stack's ``stack.json`` (the fields each names in ``stack_fields``), then the default.
No process reads ``stack.json`` by itself. The processes' getters refuse the development
placeholder credentials outside the embedded stack.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.common.process_memory import ArrowPool
from formats.contracts import DEFAULT_TASK_QUEUE, Workload
from formats.deployment_settings import DeploymentSettings, refuse_placeholder_credentials

# Defaults of the embedded stack, shared with worker.stack.ports (the one place ports are laid out).
DEFAULT_TEMPORAL_ADDRESS = "127.0.0.1:7233"
DEFAULT_TEMPORAL_NAMESPACE = "default"
DEFAULT_OBJECT_STORE_URL = "http://127.0.0.1:8702"
DEFAULT_AWS_REGION = "us-east-1"
DEFAULT_AWS_KEY = "test"  # moto accepts any key; production deployments set real credentials
DEFAULT_BUCKET = "baml-evidence"
DEFAULT_PROJECTION_QUEUE = "baml-projection"
DEFAULT_DEAD_LETTER_QUEUE = "baml-projection-dlq"
DEFAULT_BOUNDARY_WORKLOAD_URL = "https://127.0.0.1:8711"


# What a worker-side process takes from a running embedded stack when no variable sets it: the
# launcher passes most of these as variables anyway; the state file serves a process started by
# hand next to a stack on other ports (`--base-port`).
_ENDPOINT_FIELDS: dict[str, str] = {
    "temporal_address": "temporal_address",
    "temporal_namespace": "temporal_namespace",
    "task_queue": "task_queue",
    "aws_region": "aws_region",
    "aws_access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "boundary_workload_url": "boundary_workload_url",
    "tls_dir": "tls.dir",
}


class TemporalWorkerSettings(DeploymentSettings):
    """The Temporal worker (``python -m worker.temporal_worker``)."""

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_WORKER_", extra="ignore")
    stack_fields: ClassVar[dict[str, str]] = {
        **_ENDPOINT_FIELDS,
        "s3_endpoint_url": "s3_endpoint_url",
        "bucket": "bucket",
    }

    temporal_address: str = Field(
        default=DEFAULT_TEMPORAL_ADDRESS, description="Temporal frontend host:port."
    )
    temporal_namespace: str = Field(default=DEFAULT_TEMPORAL_NAMESPACE, description="Temporal namespace.")
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE,
        description="Base task queue: projection polls it, the other workloads '<base>-<workload>'.",
    )
    workloads: list[Workload] = Field(
        default_factory=lambda: list(Workload),
        min_length=1,
        description="Workload classes this process polls (projection, maintenance, query-jobs, erasure).",
    )
    maintenance_threads: int = Field(
        default=4, ge=1, description="Maintenance activities (sweep, index, replay, rebuild) at once."
    )
    query_job_threads: int = Field(default=2, ge=1, description="Background query jobs at once.")
    erasure_threads: int = Field(default=2, ge=1, description="Erasure activities at once.")
    s3_endpoint_url: str | None = Field(
        default=DEFAULT_OBJECT_STORE_URL, description="S3 endpoint; empty for AWS's default endpoint."
    )
    aws_region: str = Field(default=DEFAULT_AWS_REGION, description="AWS region of the bucket.")
    aws_access_key_id: str = Field(default=DEFAULT_AWS_KEY, description="S3 access key id.")
    aws_secret_access_key: SecretStr = Field(
        default=SecretStr(DEFAULT_AWS_KEY), description="S3 secret access key."
    )
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
    memory_log_interval_s: float = Field(
        default=300.0,
        ge=0,
        description="Seconds between the worker's memory log lines (RSS, allocators, caches); 0: none.",
    )
    malloc_trim_interval_s: float = Field(
        default=60.0,
        ge=0,
        description=(
            "Seconds between two returns of glibc's free memory to the system (malloc_trim); 0:"
            " never. Freed memory below live chunks otherwise stays with the process."
        ),
    )
    workflow_sandbox: bool = Field(
        default=False,
        description=(
            "Run workflows in Temporal's sandbox, which imports a workflow's module again for every"
            " run (about 10 ms of CPU per ProjectMetaObject: bench/workflow_runner.py). Off: the"
            " tests' history replays keep the sandbox's checks."
        ),
    )
    trace_python_heap: bool = Field(
        default=False,
        description=(
            "Trace Python's allocations (tracemalloc) so each memory line names the five source lines"
            " holding the most: a diagnosis, it slows the worker."
        ),
    )
    malloc_arena_max: int = Field(
        default=2,
        ge=0,
        description=(
            "glibc malloc arenas at most (0: glibc's default, eight per core); fewer arenas hold"
            " less freed memory across the activity threads."
        ),
    )
    arrow_memory_pool: ArrowPool = Field(
        default="system",
        description=(
            "pyarrow's memory pool: system (glibc's malloc), mimalloc, jemalloc, or default"
            " (pyarrow's own choice); mimalloc keeps pages per thread, which 256 activity threads"
            " multiply."
        ),
    )


class SqsBridgeSettings(DeploymentSettings):
    """The SQS bridge (``python -m worker.sqs_bridge``)."""

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_BRIDGE_", extra="ignore")
    stack_fields: ClassVar[dict[str, str]] = {
        **_ENDPOINT_FIELDS,
        "sqs_endpoint_url": "sqs_endpoint_url",
        "deployment_id": "deployment_id",
        "cell": "cell",
    }

    sqs_endpoint_url: str | None = Field(
        default=DEFAULT_OBJECT_STORE_URL, description="SQS endpoint; empty for AWS's default endpoint."
    )
    aws_region: str = Field(default=DEFAULT_AWS_REGION, description="AWS region of the queues.")
    aws_access_key_id: str = Field(default=DEFAULT_AWS_KEY, description="SQS access key id.")
    aws_secret_access_key: SecretStr = Field(
        default=SecretStr(DEFAULT_AWS_KEY), description="SQS secret access key."
    )
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
    started_visibility_timeout_s: int = Field(
        default=600,
        ge=5,
        le=43200,
        description=(
            "Visibility timeout of a message whose workflow has started, extended after the share of"
            " it visibility_extension_s is of visibility_timeout_s (a third): the run goes on without"
            " the bridge, so a bridge that dies delays only the message's deletion by up to this"
            " much, and a held message costs fewer extension calls."
        ),
    )
    retry_delay_s: int = Field(
        default=30, ge=0, le=43200, description="A message left for retry becomes visible again after this."
    )
    result_long_polls: int = Field(
        default=256,
        ge=0,
        description=(
            "Workflow results awaited by a long poll at once; the others are found by a visibility"
            " query every completion_poll_s (a long poll per message in hand costs the Temporal"
            " server CPU in proportion to the backlog, and past about 1,000 it refuses them)."
        ),
    )
    completion_poll_s: float = Field(
        default=1.0, gt=0, description="Seconds between two visibility queries for closed runs."
    )
    completion_batch: int = Field(
        default=200, ge=1, le=1000, description="Workflows one visibility query asks about, packs first."
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
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE,
        description="Base task queue: the projection workflows it starts go to this queue itself.",
    )
    boundary_workload_url: str | None = Field(
        default=None, description="Boundary workload API (mTLS) base URL (generation lookups)."
    )
    tls_dir: Path | None = Field(
        default=None, description="Directory with the workload identity CA, cert and key."
    )
    deployment_id: str | None = Field(default=None, description="This deployment's id (client cert CN).")
    cell: str | None = Field(default=None, description="This deployment's cell (client cert OU).")
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
    # 17 = receives_to_outwait(hold_max_s 11 h, pending_deadline_s 7 days): a meta object whose
    # values are late is held 11 h per receive, and must not reach the DLQ while its run waits.
    max_receive_count: int = Field(
        default=17,
        ge=1,
        description="Receives before a message moves to the DLQ (enough to wait out the pending deadline).",
    )
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE, description="Temporal task queue of the stack's worker."
    )


def refuse_placeholders(
    process: str, prefix: str, settings: TemporalWorkerSettings | SqsBridgeSettings
) -> None:
    """Outside the embedded stack, a process must not run on the placeholder AWS credentials."""
    refuse_placeholder_credentials(
        process,
        {
            f"{prefix}AWS_ACCESS_KEY_ID": settings.aws_access_key_id,
            f"{prefix}AWS_SECRET_ACCESS_KEY": settings.aws_secret_access_key,
        },
    )


@lru_cache
def get_worker_settings() -> TemporalWorkerSettings:
    """The Temporal worker process's settings (refused with placeholder credentials outside the stack)."""
    settings = TemporalWorkerSettings()
    refuse_placeholders("the Temporal worker", "BAML_STUDIO_WORKER_", settings)
    return settings


@lru_cache
def get_bridge_settings() -> SqsBridgeSettings:
    """The SQS bridge process's settings (refused with placeholder credentials outside the stack)."""
    settings = SqsBridgeSettings()
    refuse_placeholders("the SQS bridge", "BAML_STUDIO_BRIDGE_", settings)
    return settings


@lru_cache
def get_stack_settings() -> StackSettings:
    return StackSettings()


class CliSettings(DeploymentSettings):
    """The operator CLI (``baml-studio tenants|tokens|query|jobs|erase``) reaching a deployment.

    What no flag and no variable sets comes from the running stack's ``stack.json``.
    """

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_CLI_", extra="ignore")
    stack_fields: ClassVar[dict[str, str]] = {
        "boundary_url": "boundary_control_url",
        "token": "operator_token",
        "coordinator_url": "coordinator_url",
        "user_token": "user_token",
        "gateway_url": "gateway_url",
    }

    boundary_url: str | None = Field(
        default=None, description="Boundary control API base URL; unset: the running stack's (stack.json)."
    )
    token: SecretStr | None = Field(
        default=None, description="Operator or admin bearer token; unset: the running stack's operator token."
    )
    coordinator_url: str | None = Field(
        default=None, description="Coordinator base URL (query, jobs); unset: the running stack's."
    )
    user_token: SecretStr | None = Field(
        default=None, description="User token (query, jobs, erase); unset: the running stack's user token."
    )
    gateway_url: str | None = Field(
        default=None, description="Gateway base URL (erase); unset: the running stack's."
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Seconds per control API request.")


class OpsCliSettings(DeploymentSettings):
    """The operator tools (``baml-studio status|replay|rebuild|quarantine``) reaching a deployment's stores.

    What no variable sets comes from the running stack's ``stack.json``.
    """

    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_OPS_", extra="ignore")
    stack_fields: ClassVar[dict[str, str]] = {
        "s3_endpoint_url": "s3_endpoint_url",
        "aws_region": "aws_region",
        "aws_access_key_id": "aws_access_key_id",
        "aws_secret_access_key": "aws_secret_access_key",
        "bucket": "bucket",
        "queue_url": "queue_url",
        "dead_letter_queue_url": "dead_letter_queue_url",
        "temporal_address": "temporal_address",
        "temporal_namespace": "temporal_namespace",
        "task_queue": "task_queue",
        "boundary_control_url": "boundary_control_url",
        "operator_token": "operator_token",
        "tenant_id": "tenant_id",
        "project_id": "project_id",
        "environment_id": "environment_id",
    }

    s3_endpoint_url: str | None = Field(
        default=None, description="S3/SQS endpoint; empty for AWS's default; unset: the stack's."
    )
    aws_region: str = Field(default=DEFAULT_AWS_REGION, description="AWS region; unset: the stack's.")
    aws_access_key_id: str | None = Field(default=None, description="AWS access key id; unset: the stack's.")
    aws_secret_access_key: SecretStr | None = Field(
        default=None, description="AWS secret access key; unset: the stack's."
    )
    bucket: str | None = Field(default=None, description="Evidence bucket; unset: the stack's.")
    queue_url: str | None = Field(default=None, description="Projection queue URL; unset: the stack's.")
    dead_letter_queue_url: str | None = Field(
        default=None, description="Dead-letter queue URL; unset: the stack's."
    )
    temporal_address: str | None = Field(
        default=None, description="Temporal frontend host:port; unset: the stack's."
    )
    temporal_namespace: str = Field(
        default=DEFAULT_TEMPORAL_NAMESPACE, description="Temporal namespace; unset: the stack's."
    )
    task_queue: str | None = Field(default=None, description="Temporal task queue; unset: the stack's.")
    boundary_control_url: str | None = Field(
        default=None, description="Boundary control API base URL; unset: the stack's."
    )
    operator_token: SecretStr | None = Field(
        default=None, description="Operator token (generation lookups); unset: the stack's."
    )
    tenant_id: str | None = Field(default=None, description="Tenant id; unset: the stack's.")
    project_id: str | None = Field(default=None, description="Project id; unset: the stack's.")
    environment_id: str | None = Field(
        default=None, description="Default environment id; unset: the stack's."
    )
