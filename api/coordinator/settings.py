"""Settings of the query coordinator, from ``BAML_STUDIO_COORDINATOR_*`` environment variables.

Defaults point at the embedded stack (``baml-studio stack up`` with its default ports).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from formats.contracts import DEFAULT_TASK_QUEUE
from formats.deployment_settings import refuse_placeholder_credentials


class CoordinatorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_COORDINATOR_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address the coordinator listens on.")
    port: int = Field(default=8701, ge=1, le=65535, description="Port the coordinator listens on.")
    s3_endpoint_url: str | None = Field(
        default="http://127.0.0.1:8702", description="S3 endpoint (Lance datasets); empty for AWS's default."
    )
    aws_region: str = Field(default="us-east-1", description="AWS region of the bucket.")
    aws_access_key_id: str = Field(default="test", description="S3 access key id.")
    aws_secret_access_key: SecretStr = Field(default=SecretStr("test"), description="S3 secret access key.")
    bucket: str = Field(default="baml-evidence", description="Bucket holding the derived Lance datasets.")
    temporal_address: str = Field(
        default="127.0.0.1:7233", description="Temporal frontend host:port (query jobs)."
    )
    temporal_namespace: str = Field(default="default", description="Temporal namespace.")
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE,
        description="Base task queue of the deployment (the workflows it starts go to '<base>-<workload>').",
    )
    boundary_workload_url: str = Field(
        default="https://127.0.0.1:8711", description="Boundary workload API (mTLS) base URL."
    )
    tls_dir: Path = Field(
        default=Path("run/stack/tls"), description="Directory holding the workload identity CA, cert and key."
    )
    deployment_id: str | None = Field(
        default=None, description="Deployment named by the client certificate; default: the one in tls_dir."
    )
    cell: str | None = Field(
        default=None, description="Cell of the deployment; default: from the certificate."
    )
    boundary_timeout_seconds: float = Field(default=30.0, gt=0, description="Timeout of one Boundary call.")
    token_cache_seconds: float = Field(
        default=30.0, ge=0, le=300, description="How long a user-token introspection is cached."
    )
    lance_root: Path | None = Field(
        default=None, description="Read Lance datasets under this local directory instead of the bucket."
    )
    value_cache_dir: Path | None = Field(
        default=Path("run/coordinator/value-cache"),
        description="Local disk cache of value bodies by CID (disposable; on the coordinator's own disk). "
        "Empty: no disk cache.",
    )
    value_cache_bytes: int = Field(
        default=4 << 30, ge=1 << 20, description="Largest total size of the value cache; LRU eviction beyond."
    )
    default_wall_ms: int = Field(default=30_000, ge=1, description="Default budget: wall time (ms).")
    default_rows: int = Field(default=100_000, ge=1, description="Default budget: result rows.")
    default_bytes: int = Field(default=64 << 20, ge=1, description="Default budget: result bytes.")
    default_private_bytes: int = Field(
        default=1 << 30, ge=1, description="Default budget: private bytes read from Lance."
    )
    max_wall_ms: int = Field(default=300_000, ge=1, description="Largest wall-time budget a caller may ask.")
    interactive_candidates: int = Field(
        default=200_000, ge=1, description="Most public candidate calls an interactive private query reads."
    )
    job_candidates: int = Field(
        default=20_000_000, ge=1, description="Most public candidate calls a background job reads."
    )
    job_ttl_seconds: int = Field(
        default=86_400, ge=1, description="How long a job's record and result are kept after it is accepted."
    )
    cors_origins: list[str] = Field(
        default_factory=lambda: ["http://localhost:5173"],
        description="Browser origins allowed by CORS (Studio), as a JSON list.",
    )


@lru_cache
def get_settings() -> CoordinatorSettings:
    """The process's settings; outside the embedded stack the placeholder credentials are refused."""
    settings = CoordinatorSettings()
    refuse_placeholder_credentials(
        "the coordinator",
        {
            "BAML_STUDIO_COORDINATOR_AWS_ACCESS_KEY_ID": settings.aws_access_key_id,
            "BAML_STUDIO_COORDINATOR_AWS_SECRET_ACCESS_KEY": settings.aws_secret_access_key,
        },
    )
    return settings
