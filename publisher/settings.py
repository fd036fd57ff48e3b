"""Local publisher settings: argument, then ``BAML_PUBLISHER_*`` environment variable, then the
running embedded stack's ``stack.json`` (gateway URL and publisher token only), then default.

These are the host-side settings (where the gateway is, the token, the profile root, timeouts).
The gateway-owned limits (flush interval, pack size, retention...) come from
``GET /v1/publisher/config`` (:class:`formats.upload_wire.PublisherConfig`) and replace the
built-in defaults there; the one local override is Lambda mode, which caps the interval at 1 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from formats.deployment_settings import DeploymentSettings, require_setting
from formats.profile_store.layout import ENV_PROFILE_DIR, default_root

ENV_PREFIX = "BAML_PUBLISHER_"
TOKEN_ENV = ENV_PREFIX + "TOKEN"


class PublisherSettings(DeploymentSettings):
    """Keyword arguments override the environment (argument → env → stack.json → default)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", populate_by_name=True)
    # While an embedded stack runs here (./run/stack, or BAML_STUDIO_STACK_RUN_DIR), an unset URL
    # and token are the stack's: `baml-studio publish DIR` needs no configuration next to it.
    stack_fields: ClassVar[dict[str, str]] = {"gateway_url": "gateway_url", "token": "publisher_token"}

    gateway_url: str = Field("http://127.0.0.1:8700", description="Base URL of the data-plane gateway.")
    token: SecretStr = Field(SecretStr(""), description="Publisher token (bearer) for the gateway.")
    profile_dir: Path | None = Field(
        None, description=f"Profile root; defaults to ${ENV_PROFILE_DIR} or ./.baml/profiles-v1."
    )
    lambda_mode: bool = Field(False, description="AWS Lambda: 1 s flush interval, flush on SHUTDOWN.")
    config_refresh_seconds: float = Field(300.0, gt=0, description="GET /v1/publisher/config period.")
    stopped_poll_seconds: float = Field(
        30.0, gt=0, description="Config poll period while shipping is stopped (401/403/409, capture off)."
    )
    checksum_block_seconds: float = Field(60.0, ge=0, description="How long a bad file blocks its plane.")
    connect_timeout_seconds: float = Field(5.0, gt=0)
    min_body_timeout_seconds: float = Field(30.0, gt=0, description="PUT body timeout floor.")
    body_bytes_per_second: int = Field(1024 * 1024, gt=0, description="PUT body timeout: 1 MiB per second.")
    gateway_timeout_seconds: float = Field(30.0, gt=0, description="Read timeout of gateway calls.")
    backoff_base_seconds: float = Field(0.5, gt=0)
    backoff_cap_seconds: float = Field(30.0, gt=0)
    backoff_jitter: float = Field(0.2, ge=0, lt=1)
    max_attempts_per_object: int = Field(6, ge=1, description="PUT attempts per object within one flush.")
    flush_deadline_seconds: float = Field(120.0, gt=0, description="Retries of one flush stop at this age.")
    pressure_check_seconds: float = Field(1.0, gt=0, description="How often the thread checks for work.")
    retention_check_seconds: float = Field(
        60.0, gt=0, description="Shipped-value expiry scans at most this often (and half the window)."
    )
    idle_recheck_seconds: float = Field(
        60.0, gt=0, description="With no change in the store, a full flush still runs this often."
    )
    upload_concurrency: int = Field(
        8, ge=1, le=64, description="PUTs and authorize calls in flight at once (one pooled HTTP client)."
    )
    compress_workers: int = Field(
        2, ge=1, le=32, description="Threads compressing and hashing files (1 = in the publisher thread)."
    )
    max_flush_bytes: int = Field(
        512 * 1024 * 1024, gt=0, description="Raw bytes one flush collects at most (bounded memory)."
    )
    pipeline_flushes: bool = Field(
        True,
        description="On a backlog, run a flush's meta wave and cursor write while the next flush "
        "collects, authorizes and PUTs its data (metas stay one at a time per stream).",
    )
    max_flush_objects: int = Field(
        500,
        ge=1,
        description="Segments one flush ships at most: a backlog goes in bounded flushes, each moving "
        "the cursor, the next starting at once.",
    )

    @field_validator("gateway_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("gateway_url must be an http(s) URL")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _cap_order(self) -> PublisherSettings:
        if self.backoff_cap_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_cap_seconds must be at least backoff_base_seconds")
        return self

    def require_token(self) -> str:
        """The token, or a :class:`MissingSettingError` naming the setting when it is missing or empty."""
        return require_setting(
            self.token, setting="publisher token", env=TOKEN_ENV, flag="--token", run_dir=self.stack_run_dir
        )

    def resolved_profile_dir(self) -> Path:
        return self.profile_dir if self.profile_dir is not None else default_root(Path.cwd())
