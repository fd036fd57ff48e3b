"""Where public fact batches go, and where the active generation comes from: Boundary's workload API.

:class:`FactSink` is the narrow interface the projection activities need;
:class:`BoundaryFactSink` implements it over :class:`api.common.boundary_client.BoundaryClient`.
"""

from __future__ import annotations

from typing import Any, Protocol

from activities.projection.model import ProjectionBatch
from formats import boundary_wire as w
from formats.object_keys import Scope


class FactSink(Protocol):
    def active_generation(self, environment_id: str) -> int: ...

    def put_batch(self, scope: Scope, batch: ProjectionBatch) -> None:
        """Make the batch visible (idempotent on batch id + digest); raise when it cannot be."""
        ...


class BoundaryFactSink:
    """The production sink: PUT /projection-batches/{batch_id} through the workload client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def active_generation(self, environment_id: str) -> int:
        return int(self.client.active_generation(environment_id).generation)

    def put_batch(self, scope: Scope, batch: ProjectionBatch) -> None:
        h = batch.header
        headers = w.ProjectionBatchHeaders(
            generation=h.generation,
            catalog_version=h.catalog_version,
            relation=h.relation,
            root_id=h.root_id,
            content_digest=h.content_digest,
            environment_id=scope.environment_id,
            partition=h.partition,
            row_count=h.row_count,
        )
        state = self.client.put_projection_batch(h.batch_id, headers, batch.ipc)
        if state.content_digest != h.content_digest or state.generation != h.generation:
            raise RuntimeError(f"Boundary answered another state for batch {h.batch_id}")
