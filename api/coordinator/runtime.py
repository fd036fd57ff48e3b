"""What one coordinator process holds, and the one way to start a query (interactive or job).

:class:`CoordinatorRuntime` owns the Boundary client (built on first use, so ``/healthz`` answers
before the deployment's certificate exists), the Lance store and the budget defaults.
:meth:`CoordinatorRuntime.start_query` plans the SQL, binds the snapshot (``POST /query-snapshots``,
cached by the client until shortly before ``expires_at``) and returns a :class:`QueryRun`; the
Lance versions are bound when the run first needs a private read, and every read of that run
uses them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pyarrow as pa
from pydantic import ValidationError

from api.common.errors import ServiceUnavailable
from api.coordinator.executor import Budget, QueryFailed, QueryRun
from api.coordinator.planner import QueryPlan, plan_query
from api.coordinator.private_reader import PrivateReader
from api.coordinator.settings import CoordinatorSettings
from api.coordinator.value_cache import DiskValueCache
from api.coordinator.value_reader import DirObjects, ObjectSource, S3Objects
from api.dataplane import workload_tls
from api.dataplane.aws import object_store_client
from api.dataplane.boundary_client import BoundaryClient, BoundaryError
from api.dataplane.lance_store import LanceStore
from formats import boundary_wire as w
from formats import query_output as qo
from formats.object_keys import Scope

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_s3 import S3Client

_log = logging.getLogger("baml_studio.coordinator")
BOUNDARY_FAILURES = (BoundaryError, httpx.HTTPError, ValidationError, OSError, RuntimeError)


class BoundaryUnavailable(ServiceUnavailable):
    code = "boundary_unavailable"
    title = "Control plane unavailable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


def build_boundary_client(settings: CoordinatorSettings) -> BoundaryClient:
    found = workload_tls.discover(
        Path(settings.tls_dir),
        deployment_id=settings.deployment_id,
        cell=settings.cell,
        remedy="set BAML_STUDIO_COORDINATOR_DEPLOYMENT_ID or BAML_STUDIO_COORDINATOR_TLS_DIR",
    )
    return BoundaryClient(
        settings.boundary_workload_url,
        found.tls,
        found.deployment_id,
        found.cell,
        timeout=settings.boundary_timeout_seconds,
        introspection_ttl_seconds=settings.token_cache_seconds,
        inactive_ttl_seconds=min(5.0, settings.token_cache_seconds),
    )


def build_lance_store(settings: CoordinatorSettings) -> LanceStore:
    if settings.lance_root is not None:
        return LanceStore(root=settings.lance_root)
    return LanceStore.in_bucket(settings.bucket, settings)


class BoundaryPublicSource:
    """Resident subqueries through ``POST /resident-queries``, all under one snapshot id."""

    def __init__(self, client: BoundaryClient, environment_id: str, snapshot_id: str, budget: Budget) -> None:
        self.client = client
        self.environment_id = environment_id
        self.snapshot_id = snapshot_id
        self.budget = budget
        self.calls = 0

    def resident_query(self, sql: str, *, max_rows: int) -> pa.Table:
        self.calls += 1
        req_budget = w.ResidentBudget(
            wall_ms=max(1, min(self.budget.wall_ms, 600_000)),
            rows=max(1, min(max_rows, 100_000_000)),
            bytes=max(1, min(self.budget.bytes * 16, 1 << 34)),
        )
        try:
            return self.client.resident_query(
                sql, self.environment_id, snapshot_id=self.snapshot_id, budget=req_budget
            )
        except BoundaryError as exc:
            code = exc.code or "resident_query_failed"
            if exc.status == 429 or "budget" in code:
                raise QueryFailed(
                    "budget_exceeded",
                    f"Boundary stopped the public part of the query ({code})",
                    remedy="Narrow the query, raise the budget, or run it as a background job "
                    "(POST /v1/query-jobs).",
                ) from None
            detail = exc.problem.detail if exc.problem is not None else ""
            raise QueryFailed(
                code if exc.status < 500 else "boundary_unavailable",
                f"Boundary refused the public part of the query: {detail}"[:500],
                remedy=exc.problem.remedy if exc.problem is not None else None,
            ) from None
        except (httpx.HTTPError, OSError, RuntimeError) as exc:
            raise QueryFailed(
                "boundary_unavailable",
                f"Boundary could not be reached for the public part of the query ({type(exc).__name__})",
                remedy="Retry the query; a retry binds a new snapshot.",
            ) from None


@dataclass(frozen=True)
class PreparedQuery:
    plan: QueryPlan
    snapshot: qo.SnapshotRef
    run: QueryRun


class CoordinatorRuntime:
    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        boundary: BoundaryClient | None = None,
        lance: LanceStore | None = None,
        s3: S3Client | None = None,
    ) -> None:
        self.settings = settings
        self._boundary = boundary
        self._lock = threading.Lock()
        self.lance = lance or build_lance_store(settings)
        self._s3 = s3
        self.value_cache = (
            DiskValueCache(settings.value_cache_dir, settings.value_cache_bytes)
            if settings.value_cache_dir is not None
            else None
        )

    def evidence_objects(self) -> ObjectSource:
        """Where large values are read: the bucket, or the local root the Lance datasets live under."""
        root = self.lance.root
        if root is not None:
            return DirObjects(root)
        return S3Objects(self.s3, self.settings.bucket)

    @property
    def s3(self) -> S3Client:
        """boto3 S3 client of the bucket (job results under temporary/v1/)."""
        with self._lock:
            if self._s3 is None:
                self._s3 = object_store_client(self.settings)
            return self._s3

    @property
    def boundary(self) -> BoundaryClient:
        with self._lock:
            if self._boundary is None:
                try:
                    self._boundary = build_boundary_client(self.settings)
                except (RuntimeError, OSError, ValueError) as exc:
                    _log.error("boundary client not configured error=%s", type(exc).__name__)
                    raise BoundaryUnavailable(
                        "the coordinator has no workload identity for the control plane yet",
                        remedy="Back off and retry.",
                    ) from None
            return self._boundary

    def close(self) -> None:
        if self._boundary is not None:
            self._boundary.close()

    def budget(
        self,
        *,
        wall_ms: int | None = None,
        rows: int | None = None,
        bytes: int | None = None,
        private_bytes: int | None = None,
    ) -> Budget:
        s = self.settings
        return Budget(
            wall_ms=min(wall_ms or s.default_wall_ms, s.max_wall_ms),
            rows=rows or s.default_rows,
            bytes=bytes or s.default_bytes,
            private_bytes=private_bytes or s.default_private_bytes,
        )

    def bind_snapshot(self, environment_id: str) -> w.QuerySnapshot:
        try:
            return self.boundary.query_snapshot(environment_id)
        except BOUNDARY_FAILURES as exc:
            code = exc.code if isinstance(exc, BoundaryError) else type(exc).__name__
            _log.warning("query snapshot failed error=%s", code)
            raise BoundaryUnavailable(
                "the control plane could not bind a query snapshot", remedy="Back off and retry."
            ) from None

    def start_query(
        self,
        sql: str,
        scope: Scope,
        budget: Budget,
        *,
        interactive: bool = True,
        snapshot: w.QuerySnapshot | None = None,
    ) -> PreparedQuery:
        cap = self.settings.interactive_candidates if interactive else self.settings.job_candidates
        plan = plan_query(sql, candidate_cap=cap)  # PlanError: the caller renders it
        snap = snapshot or self.bind_snapshot(scope.environment_id)
        ref = qo.SnapshotRef(
            snapshot_id=snap.snapshot_id, catalog_version=snap.catalog_version, generation=snap.generation
        )
        public = BoundaryPublicSource(self.boundary, scope.environment_id, snap.snapshot_id, budget)
        lance = self.lance
        cache = self.value_cache

        def reader() -> PrivateReader:
            return PrivateReader.bind(
                lance, scope, snap.generation, cache=cache, objects=self.evidence_objects()
            )

        run = QueryRun(
            plan,
            public=public,
            reader_factory=reader,
            snapshot=ref,
            budget=budget,
            interactive=interactive,
            candidate_cap=cap,
        )
        return PreparedQuery(plan, ref, run)
