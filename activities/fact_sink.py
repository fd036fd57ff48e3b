"""Where public fact batches go, and where the active generation comes from: Boundary's workload API.

:class:`FactSink` is the narrow interface the projection activities need;
:class:`BoundaryFactSink` implements it over :class:`api.common.boundary_client.BoundaryClient`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from activities.projection.model import ProjectionBatch
from formats.object_keys import Scope

# Raw IPC bytes per set request: base64 makes it ~4/3 larger, well under Boundary's 64 MiB cap.
SET_MAX_BYTES = 8 << 20
SET_MAX_BATCHES = 2048


class FactSink(Protocol):
    def active_generation(self, environment_id: str) -> int: ...

    def put_batch(self, scope: Scope, batch: ProjectionBatch) -> None:
        """Make the batch visible (idempotent on batch id + digest); raise when it cannot be."""
        ...

    def put_batches(self, scope: Scope, batches: Sequence[ProjectionBatch]) -> None:
        """Make every batch visible (each idempotent on its id + digest); raise if any cannot be."""
        ...


def chunks(
    batches: Sequence[ProjectionBatch], max_bytes: int = SET_MAX_BYTES, max_batches: int = SET_MAX_BATCHES
) -> Iterator[Sequence[ProjectionBatch]]:
    """Consecutive runs of batches under both caps (a single oversized batch goes alone)."""
    start, size = 0, 0
    for i, batch in enumerate(batches):
        n = len(batch.ipc)
        if i > start and (size + n > max_bytes or i - start >= max_batches):
            yield batches[start:i]
            start, size = i, 0
        size += n
    if start < len(batches):
        yield batches[start:]


class BoundaryFactSink:
    """The production sink over the workload client: one batch by PUT /projection-batches/{id},
    many by POST /projection-batch-sets (one request per chunk, same per-batch semantics)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def active_generation(self, environment_id: str) -> int:
        return int(self.client.active_generation(environment_id).generation)

    def put_batch(self, scope: Scope, batch: ProjectionBatch) -> None:
        h = batch.header
        state = self.client.put_projection_batch(h.batch_id, h.to_wire(scope.environment_id), batch.ipc)
        if state.content_digest != h.content_digest or state.generation != h.generation:
            raise RuntimeError(f"Boundary answered another state for batch {h.batch_id}")

    def put_batches(self, scope: Scope, batches: Sequence[ProjectionBatch]) -> None:
        from api.common.boundary_client import BoundaryError

        for part in chunks(batches):
            answer = self.client.put_projection_batch_set(
                [(b.header.batch_id, b.header.to_wire(scope.environment_id), b.ipc) for b in part]
            )
            if len(answer.results) != len(part):
                raise RuntimeError("Boundary answered a batch set with another number of results")
            for batch, got in zip(part, answer.results, strict=True):
                h = batch.header
                if got.state is None:
                    # The same error the PUT of this batch would have raised.
                    raise BoundaryError(got.status, got.problem, path=f"/projection-batch-sets#{h.batch_id}")
                if (
                    got.batch_id != h.batch_id
                    or got.state.content_digest != h.content_digest
                    or got.state.generation != h.generation
                ):
                    raise RuntimeError(f"Boundary answered another state for batch {h.batch_id}")
