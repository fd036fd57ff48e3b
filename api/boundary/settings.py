"""Boundary's settings: environment variables prefixed ``BAML_STUDIO_BOUNDARY_``.

Defaults point at the embedded stack (``./run/boundary`` under the working directory).

The metastore and ClickHouse URLs are ``SecretStr``: a production URL carries its password
(``mysql+pymysql://user:password@host/db``, ``clickhouse://user:password@host``), so no repr, dump
or log line of the settings shows them; they are revealed only where the connection is opened.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_RUN_DIR = Path("run")


class BoundarySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_BOUNDARY_", extra="ignore")

    run_dir: Path = Field(default=DEFAULT_RUN_DIR / "boundary", description="Root for the embedded files.")
    metastore_url: SecretStr = Field(
        default=SecretStr(""),
        description="SQLAlchemy URL (may hold a password: kept secret); empty means SQLite at "
        "<run_dir>/metastore.sqlite3.",
    )
    control_host: str = "127.0.0.1"
    control_port: int = 8710
    workload_host: str = "127.0.0.1"
    workload_port: int = 8711
    tls_dir: Path | None = Field(
        default=None, description="Dev CA, server cert/key, JWT key; default <run_dir>/tls."
    )
    jwt_signing_key_path: Path | None = Field(
        default=None,
        description="ES256 key that signs workload JWTs; default <tls_dir>/workload-jwt-key.pem.",
    )
    workload_jwt_ttl_seconds: int = Field(default=600, ge=30, le=3600)
    clickhouse_url: SecretStr = Field(
        default=SecretStr(""),
        description="ClickHouse URL (may hold a password: kept secret); empty means chdb at clickhouse_path.",
    )
    clickhouse_path: Path | None = Field(default=None, description="chdb directory; default <run_dir>/chdb.")
    clickhouse_database: str = Field(
        default="baml_facts",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="Database of the fact tables.",
    )
    fact_flush_interval_s: float = Field(
        default=1.0,
        ge=0.0,
        le=10.0,
        description="Projection batches are inserted into ClickHouse at most once per this interval per"
        " Boundary process (one insert per table per flush; ClickHouse wants about one a second):"
        " a request that comes sooner after the last flush waits for the interval's end with the"
        " others that come meanwhile. 0.5 for fresher facts (freshness p95 8.3 -> 7.4 s in a"
        " light soak, for 17% more of Boundary's CPU). 0: flush as soon as the previous flush"
        " ends (then every worker's set is a flush of its own: the workers' sinks have no"
        " cadence; about twice Boundary's CPU in a light soak).",
    )
    fact_flush_rows: int = Field(
        default=1_000,
        ge=1,
        description="A flush starts before fact_flush_interval_s has passed once this many rows wait.",
    )
    projection_batch_max_bytes: int = Field(
        default=64 << 20, ge=1024, description="Largest Arrow IPC body PUT /projection-batches accepts."
    )
    resident_max_wall_ms: int = Field(
        default=30_000, ge=1, description="Cap on a resident query's wall time."
    )
    resident_max_rows: int = Field(
        default=1_000_000, ge=1, description="Cap on a resident query's result rows."
    )
    resident_max_bytes: int = Field(
        default=256 << 20, ge=1024, description="Cap on a resident query's result bytes."
    )
    snapshot_ttl_seconds: int = Field(default=300, ge=10, le=3600)
    snapshot_window_seconds: int = Field(default=60, ge=1, le=3600)
    development: bool = Field(default=True, description="Allows the dev PKI to be created on start.")
    dev_deployment_id: str | None = Field(default=None, description="Deployment the dev client cert names.")
    dev_cell: str = "dev-cell-1"
    record_requests_path: Path | None = Field(
        default=None,
        description="Test only: append every request (minus Authorization) to this JSON-lines file.",
    )

    def resolved_metastore_url(self) -> str:
        """The metastore's URL, revealed: pass it only to the engine, never to a log."""
        url = self.metastore_url.get_secret_value()
        if url:
            return url
        return f"sqlite:///{(self.run_dir / 'metastore.sqlite3').resolve()}"

    def resolved_tls_dir(self) -> Path:
        return self.tls_dir if self.tls_dir is not None else self.run_dir / "tls"

    def resolved_jwt_key_path(self) -> Path:
        if self.jwt_signing_key_path is not None:
            return self.jwt_signing_key_path
        return self.resolved_tls_dir() / "workload-jwt-key.pem"

    def resolved_clickhouse_url(self) -> str:
        """The ClickHouse URL, revealed ("" for chdb): pass it only to the client, never to a log."""
        return self.clickhouse_url.get_secret_value()

    def resolved_clickhouse_path(self) -> Path:
        return self.clickhouse_path if self.clickhouse_path is not None else self.run_dir / "chdb"


@lru_cache(maxsize=1)
def get_settings() -> BoundarySettings:
    return BoundarySettings()
