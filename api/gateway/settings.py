"""Settings of the data-plane gateway, from ``BAML_STUDIO_GATEWAY_*`` environment variables.

Defaults point at the embedded stack (``baml-studio stack up`` with its default ports). The
per-environment publisher limits (objects per authorize, max object size, URL lifetime...) are
not settings: they come from Boundary's publisher config for the caller's environment.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from formats.contracts import DEFAULT_TASK_QUEUE
from formats.deployment_settings import refuse_placeholder_credentials


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_GATEWAY_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address the gateway listens on.")
    port: int = Field(default=8700, ge=1, le=65535, description="Port the gateway listens on.")

    # --- object store --------------------------------------------------------------------------
    s3_endpoint_url: str | None = Field(
        default="http://127.0.0.1:8702", description="S3 endpoint; empty for AWS's default endpoint."
    )
    s3_presign_endpoint_url: str | None = Field(
        default=None,
        description="Endpoint written into presigned URLs when publishers reach S3 by another address; "
        "default: s3_endpoint_url.",
    )
    aws_region: str = Field(default="us-east-1", description="AWS region of the bucket.")
    aws_access_key_id: str = Field(default="test", description="S3 access key id (signs presigned URLs).")
    aws_secret_access_key: SecretStr = Field(default=SecretStr("test"), description="S3 secret access key.")
    bucket: str = Field(
        default="baml-evidence",
        description="Evidence bucket of every environment not listed in environment_buckets; "
        "empty: only listed environments have an evidence prefix (others get 409).",
    )
    environment_buckets: dict[str, str] = Field(
        default_factory=dict,
        description="Per-environment bucket overrides, as a JSON object env_id -> bucket.",
    )
    s3_connect_timeout_seconds: float = Field(default=3.0, gt=0, description="Connect timeout of S3 calls.")
    s3_read_timeout_seconds: float = Field(default=10.0, gt=0, description="Read timeout of S3 calls.")
    s3_max_attempts: int = Field(
        default=2, ge=1, le=10, description="Attempts per S3 call (botocore standard mode)."
    )
    head_concurrency: int = Field(
        default=16, ge=1, le=256, description="S3 HEADs in flight per gateway process."
    )
    list_min_segments: int = Field(
        default=4,
        ge=0,
        description="A request naming at least this many sequences of one plane lists their range once "
        "instead of one HEAD per key (0: always HEAD).",
    )
    presign_ttl_seconds: int | None = Field(
        default=None, ge=1, le=7 * 24 * 3600, description="Override of the config's upload_url_ttl_seconds."
    )
    hash_fallback_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        description="Largest existing object the gateway reads and hashes when S3 returns no full-object "
        "SHA-256 for it; a larger one without a checksum is answered conflict.",
    )
    bucket_check_seconds: float = Field(
        default=300.0, ge=0, description="How long a bucket found to exist is trusted."
    )

    # --- Boundary (workload API, mTLS + workload JWT) -----------------------------------------
    boundary_workload_url: str = Field(
        default="https://127.0.0.1:8711", description="Boundary workload API (mTLS) base URL."
    )
    tls_dir: Path = Field(
        default=Path("run/stack/tls"), description="Directory holding the workload identity CA, cert and key."
    )
    deployment_id: str | None = Field(
        default=None,
        description="This deployment's id; default: the one client certificate in tls_dir names it.",
    )
    cell: str | None = Field(
        default=None, description="This deployment's cell; default: from the client certificate."
    )
    boundary_timeout_seconds: float = Field(default=5.0, gt=0, description="Timeout of one Boundary call.")
    boundary_attempts: int = Field(
        default=3, ge=1, le=10, description="Attempts per Boundary call (transient errors)."
    )
    token_cache_seconds: float = Field(
        default=30.0, ge=0, description="How long a token introspection is trusted (revocation latency)."
    )
    config_cache_seconds: float = Field(
        default=30.0, ge=0, description="How long an environment's config is reused."
    )

    # --- request limits ---------------------------------------------------------------------------
    # A publisher token is per environment, so every process of a fleet shares it: each ships a
    # flush a second (about 1-2 requests), and the default leaves room for ~100 processes.
    rate_limit_per_second: float = Field(
        default=200.0, gt=0, description="Sustained requests per second per token (all its processes)."
    )
    rate_limit_burst: int = Field(
        default=400, ge=1, description="Requests a token may make at once (bucket size)."
    )
    max_request_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest authorize body accepted (413 above it)."
    )

    # --- erasures (a later issue) ---------------------------------------------------------------
    temporal_address: str = Field(
        default="127.0.0.1:7233", description="Temporal frontend host:port (erasures)."
    )
    temporal_namespace: str = Field(default="default", description="Temporal namespace.")
    task_queue: str = Field(
        default=DEFAULT_TASK_QUEUE,
        description="Base task queue of the deployment (the workflows it starts go to '<base>-<workload>').",
    )

    def bucket_for(self, environment_id: str) -> str | None:
        """The bucket holding ``environment_id``'s evidence, or None when it has none here."""
        return self.environment_buckets.get(environment_id) or self.bucket or None


@lru_cache
def get_settings() -> GatewaySettings:
    """The process's settings; outside the embedded stack the placeholder credentials are refused."""
    settings = GatewaySettings()
    refuse_placeholder_credentials(
        "the gateway",
        {
            "BAML_STUDIO_GATEWAY_AWS_ACCESS_KEY_ID": settings.aws_access_key_id,
            "BAML_STUDIO_GATEWAY_AWS_SECRET_ACCESS_KEY": settings.aws_secret_access_key,
        },
    )
    return settings
