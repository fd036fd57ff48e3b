"""Where public fact batches go, and where the active generation comes from: Boundary's workload API.

:class:`FactSink` is the narrow interface the projection activities need;
:class:`BoundaryFactSink` implements it over :class:`api.dataplane.boundary_client.BoundaryClient`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from activities.group_commit import GroupCommit
from activities.projection.model import ProjectionBatch
from formats.batch_set_body import split_stream
from formats.object_keys import Scope

# IPC bytes per set request: the binary body is at most that (a relation's schema message is sent
# once per group), well under Boundary's 64 MiB cap (the JSON form adds a third for base64).
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
    many by POST /projection-batch-sets in the binary encoding (one request per chunk, one Arrow
    IPC stream per relation inside, same per-batch semantics as the PUT)."""

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
        for error in self.answers(scope, batches):
            if error is not None:
                raise error

    def answers(self, scope: Scope, batches: Sequence[ProjectionBatch]) -> list[Exception | None]:
        """Send the batches in set requests; per batch, None when visible, else the error the PUT
        of that batch would have raised. A failed request raises."""
        from api.dataplane.boundary_client import BoundaryError

        out: list[Exception | None] = [None] * len(batches)
        # A body the binary set cannot carry (not a continuation-marked IPC stream) goes by PUT.
        alone = [i for i, b in enumerate(batches) if split_stream(b.ipc) is None]
        for i in alone:
            try:
                self.put_batch(scope, batches[i])
            except (BoundaryError, RuntimeError) as exc:
                out[i] = exc
        skip = set(alone)
        rest = [i for i in range(len(batches)) if i not in skip]
        pos = 0
        for part in chunks([batches[i] for i in rest]):
            answer = self.client.put_projection_batch_set(
                [(b.header.batch_id, b.header.to_wire(scope.environment_id), b.ipc) for b in part]
            )
            if len(answer.results) != len(part):
                raise RuntimeError("Boundary answered a batch set with another number of results")
            for batch, got in zip(part, answer.results, strict=True):
                h = batch.header
                error: Exception | None = None
                if got.state is None:
                    error = BoundaryError(
                        got.status, got.problem, path=f"/projection-batch-sets#{h.batch_id}"
                    )
                elif (
                    got.batch_id != h.batch_id
                    or got.state.content_digest != h.content_digest
                    or got.state.generation != h.generation
                ):
                    error = RuntimeError(f"Boundary answered another state for batch {h.batch_id}")
                out[rest[pos]] = error
                pos += 1
        return out


class GroupedFactSink:
    """Concurrent activities' batch sets go to Boundary together: up to ``lanes`` requests in
    flight per scope, the next holding every set that came while they were out (and each lane at
    most once per ``interval_s`` when that is set). A set that finds a lane idle goes at once.

    A small meta object has a handful of batches; one request per meta object makes Boundary pay
    HTTP, TLS, parsing and a ClickHouse insert per relation for each. Grouped, each activity
    still returns only once its own batches are visible, and fails with its own batch's error: a
    conflict in another activity's batch is not its failure. Identical batches from several
    callers (a program's function definitions) are sent once."""

    def __init__(
        self,
        inner: BoundaryFactSink,
        *,
        interval_s: float = 0.0,
        lanes: int = 1,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """``beat`` is called every few seconds while a caller waits for its set's answer."""
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {lanes}")
        self.inner = inner
        self.client = inner.client
        self.lanes = lanes
        self._group: GroupCommit[tuple[Scope, int], Sequence[ProjectionBatch], None] = GroupCommit(
            self._send, interval_s=interval_s, beat=beat
        )

    def active_generation(self, environment_id: str) -> int:
        return self.inner.active_generation(environment_id)

    def put_batch(self, scope: Scope, batch: ProjectionBatch) -> None:
        self.put_batches(scope, [batch])

    def put_batches(self, scope: Scope, batches: Sequence[ProjectionBatch]) -> None:
        if batches:
            # Busy lanes: the set waits in the first one's queue (they come back together when
            # Boundary's flush answers them both).
            lane = next((k for k in range(self.lanes) if self._group.idle((scope, k))), 0)
            self._group.submit((scope, lane), batches)

    def _send(self, key: tuple[Scope, int], sets: list[Sequence[ProjectionBatch]]) -> list[Exception | None]:
        scope = key[0]
        unique: dict[tuple[str, str], int] = {}
        flat: list[ProjectionBatch] = []
        for batches in sets:
            for b in batches:
                if unique.setdefault((b.header.batch_id, b.header.content_digest), len(flat)) == len(flat):
                    flat.append(b)
        answers = self.inner.answers(scope, flat)
        out: list[Exception | None] = []
        for batches in sets:
            errors = [answers[unique[(b.header.batch_id, b.header.content_digest)]] for b in batches]
            out.append(next((e for e in errors if e is not None), None))
        return out


# Requests in flight per scope from one worker. Boundary holds a request until its next flush
# (its cadence): with one lane, a set that came while the request waited there waited for that
# flush, then for the next. With two, it joins the waiting request's flush; a third set waits.
SINK_LANES = 2


def fact_sink(client: Any, beat: Callable[[], None] | None = None) -> FactSink:
    """The worker's sink: grouped, with no cadence of its own. Boundary flushes at most once per
    its ``fact_flush_interval_s`` across every worker, holding a request that comes sooner; a
    cadence here as well made each set wait for both (docs/boundary-facts.md, "Group commit on a
    cadence")."""
    return GroupedFactSink(BoundaryFactSink(client), lanes=SINK_LANES, beat=beat)
