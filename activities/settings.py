"""Settings of the projection runtime (activities, workflows' timers, schedules).

Environment variables ``BAML_STUDIO_PROJECTION_<FIELD>``. The deployment identity
(``deployment_id``, ``cell``, ``tenant_id``), the default environment, the operator credentials and
the queue URL fall back to the running embedded stack's ``stack.json`` when unset, through the one
resolver (:class:`formats.deployment_settings.DeploymentSettings`), so ``baml-studio stack up``
needs no extra configuration. The S3, Temporal and Boundary endpoints come from
:class:`worker.settings.TemporalWorkerSettings`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from formats.deployment_settings import DeploymentSettings

# Environment variables of the identity, named by the worker's "missing setting" message.
IDENTITY_ENV = {
    "deployment_id": "BAML_STUDIO_PROJECTION_DEPLOYMENT_ID",
    "cell": "BAML_STUDIO_PROJECTION_CELL",
    "tenant_id": "BAML_STUDIO_PROJECTION_TENANT_ID",
}


class ProjectionSettings(DeploymentSettings):
    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_PROJECTION_", extra="ignore")
    stack_fields: ClassVar[dict[str, str]] = {
        "deployment_id": "deployment_id",
        "cell": "cell",
        "tenant_id": "tenant_id",
        "project_id": "project_id",
        "environment_id": "environment_id",
        "boundary_control_url": "boundary_control_url",
        "operator_token": "operator_token",
        "queue_url": "queue_url",
    }

    deployment_id: str | None = Field(default=None, description="This deployment's id (client cert CN).")
    cell: str | None = Field(default=None, description="This deployment's cell (client cert OU).")
    tenant_id: str | None = Field(
        default=None,
        description="The deployment's tenant: every evidence key must lie under evidence/v1/<tenant_id>/.",
    )
    environment_ids: list[str] = Field(
        default_factory=list,
        description="Environments the sweep and index schedules cover (JSON list); empty: the stack's.",
    )
    project_ids: dict[str, str] = Field(
        default_factory=dict, description="environment id -> project id for the scheduled jobs (JSON)."
    )
    project_id: str | None = Field(
        default=None,
        description="Project of environment_id (the schedules' scope when environment_ids is empty).",
    )
    environment_id: str | None = Field(
        default=None,
        description="The one environment the sweep and index schedules cover when environment_ids is empty.",
    )
    max_walk: int = Field(default=2000, ge=1, description="Meta objects the walk-back reads at most.")
    silence_limit_s: float = Field(
        default=900.0, gt=0, description="A stream silent this long has its open executions abandoned."
    )
    sweep_interval_s: float = Field(default=300.0, gt=0, description="Sweep schedule interval.")
    index_interval_s: float = Field(default=3600.0, gt=0, description="Index/compaction schedule interval.")
    retain_versions: int = Field(default=20, ge=1, description="Lance versions kept by cleanup.")
    retain_older_than_s: float = Field(
        default=3600.0, ge=0, description="Lance versions younger than this are never cleaned up."
    )
    commit_interval_s: float = Field(
        default=1.0, ge=0, description="The committer commits each Lance dataset at most this often."
    )
    generation_ttl_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "A worker asks Boundary for an environment's active generation at most this often "
            "(0: for every meta object); Boundary refuses a stale generation's batches regardless."
        ),
    )
    max_fragments: int = Field(
        default=16, ge=1, description="The committer compacts a dataset with more fragments than this."
    )
    commit_retain_s: float = Field(
        default=600.0,
        ge=0,
        description="The committer keeps Lance versions this long (readers bound to a version need it).",
    )
    index_lease_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "A process folding a dataset's query indexes holds its index lease this long past its"
            " last renewal (it renews it every quarter of this while it folds); meanwhile other"
            " processes do not compact the dataset (a compaction preempts a fold). A process that"
            " died leaves the dataset uncompacted at most this long."
        ),
    )
    commit_cleanup_interval_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "The committer removes a dataset's versions older than commit_retain_s at most this often"
            " (a removal reads every version kept)."
        ),
    )
    commit_write_base_ttl_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "A Lance write starts from the version the worker's own last commit of the dataset left"
            " while it is this young, instead of looking for the newest first (0: always look)."
        ),
    )
    # A quarter of a LanceStore's own default (the coordinator's, for queries over whole datasets):
    # a worker reads the newest versions only, and in bench/soak.py a 64 MiB session served it with
    # no more S3 reads than 768 MiB did, which it filled with replaced versions
    # (docs/projection-runtime.md, "2026-12-05: the worker's memory").
    lance_index_cache_mib: int = Field(
        default=128,
        ge=0,
        description=(
            "Lance index pages a worker keeps in memory (MiB, least recently used out first); a busy"
            " worker fills it, since replaced index versions leave only by this bound."
        ),
    )
    lance_metadata_cache_mib: int = Field(
        default=64,
        ge=0,
        description="Lance manifests and data-file footers a worker keeps in memory (MiB), likewise.",
    )
    activity_threads: int = Field(
        default=256,
        ge=1,
        description=(
            "Activities run at once per worker (most wait on the committer's next commit: "
            "objects per second is at most this over a small object's ~2-4 s of waiting)."
        ),
    )
    executions_in_flight: int = Field(
        default=2048,
        ge=1,
        description=(
            "Executions a worker projects at once, summed over its activities (a meta object "
            "takes one slot per execution it ends): bounds memory when big objects queue up."
        ),
    )
    pending_initial_s: float = Field(default=2.0, gt=0, description="First wait before re-trying pending.")
    pending_max_s: float = Field(default=60.0, gt=0, description="Longest wait between pending re-tries.")
    pending_deadline_s: float = Field(
        default=7 * 24 * 3600.0, gt=0, description="Give up waiting for values after this long."
    )
    activity_timeout_s: float = Field(default=300.0, gt=0, description="start_to_close of projection work.")
    heartbeat_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="How soon a worker that died mid-activity is noticed and the work retried.",
    )
    boundary_control_url: str | None = Field(
        default=None, description="Boundary control API, for the rebuild's generation switch (operator)."
    )
    operator_token: SecretStr | None = Field(
        default=None, description="Operator token for the generation switch."
    )
    queue_url: str | None = Field(default=None, description="Projection queue URL for replay.")

    def lance_store_options(self) -> dict[str, float | int]:
        """The worker's ``LanceStore`` keyword arguments (``LanceStore.in_bucket``'s ``tuning``)."""
        return {
            "write_base_ttl_s": self.commit_write_base_ttl_s,
            "index_cache_bytes": self.lance_index_cache_mib << 20,
            "metadata_cache_bytes": self.lance_metadata_cache_mib << 20,
        }

    def missing_identity(self) -> list[str]:
        """The environment variables of the identity settings that are unset (empty: complete)."""
        return [env for name, env in IDENTITY_ENV.items() if not (getattr(self, name) or "").strip()]

    def covered_environments(self) -> tuple[tuple[str, str], ...]:
        """``(project_id, environment_id)`` the schedules cover: ``environment_ids`` with their
        ``project_ids``, else the one ``project_id``/``environment_id``; environments without a
        project are left out (a schedule needs the whole scope)."""
        if self.environment_ids:
            pairs = [(self.project_ids.get(e, ""), e) for e in self.environment_ids]
        elif self.project_id and self.environment_id:
            pairs = [(self.project_id, self.environment_id)]
        else:
            pairs = []
        return tuple(p for p in pairs if p[0])


@lru_cache
def get_projection_settings() -> ProjectionSettings:
    return ProjectionSettings()
