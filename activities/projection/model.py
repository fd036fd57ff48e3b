"""Typed inputs and outputs of the projection core (pure data, no I/O).

The I/O around this package (S3 reads, Lance writes, the Boundary client) builds an
:class:`ExecutionInput` from decoded objects, calls :func:`activities.projection.assemble.assemble_execution`
and gets back an :class:`ExecutionProjection` (rows per relation) or a :class:`PendingExecution`
(a value CID is not yet ingested). See docs/projection.md for every column's source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from formats.boundary_wire import ProjectionBatchHeaders
from formats.data_segment import DataGroup
from formats.function_table import FunctionTable
from formats.meta_segment import EngineStarted, RootEnded, RootStarted, StreamStarted

Row = dict[str, Any]

# Why a data segment in the RootEnded range could not be used; any of them marks the execution index_corrupt.
PROBLEM_MISSING = "missing"
PROBLEM_CORRUPT = "corrupt"  # trailer, frame or payload failed verification


@dataclass(frozen=True, slots=True)
class DataRead:
    """One data sequence of the execution's range as the I/O layer found it.

    ``group`` is this root's group in the segment (None when the segment holds none, which
    is allowed: other roots share segments). ``problem`` is set when the segment is missing or
    failed verification; then ``group`` is ignored.
    """

    sequence: int
    group: DataGroup | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class MetaProblem:
    """A meta sequence the walk-back could not read (missing or failed verification)."""

    sequence: int
    reason: str = PROBLEM_MISSING


# Why an execution's engine is not known (RootContext.engine_missing).
ENGINE_NOT_REGISTERED = "engine_not_registered"  # may still be registered: the execution is pending
ENGINE_ABSENT = "engine_absent"  # the whole stream was read without it: projected without a table


@dataclass(frozen=True, slots=True)
class RootContext:
    """What the meta walk-back found for one root.

    ``root_started_seq`` is the meta sequence holding the RootStarted (None when not found);
    ``gaps`` are the unreadable (missing or corrupt) meta sequences met while looking for it,
    which with the RootEnded's own sequence decide ``index_state`` by the reader's rules
    (:func:`formats.reader_rules.index_state`). ``engine_missing`` says why ``engine_started``
    is None.
    """

    root_started: RootStarted | None
    engine_started: EngineStarted | None
    stream_started: StreamStarted | None
    sequences_read: tuple[int, ...]
    root_started_seq: int | None = None
    gaps: tuple[int, ...] = ()
    engine_missing: str | None = None


@dataclass(frozen=True, slots=True)
class ExecutionInput:
    """Everything known about one execution, decoded; ``root_ended`` is None only for the sweep."""

    process_euid: bytes
    stream_started: StreamStarted | None
    context: RootContext
    root_ended: RootEnded | None
    data: tuple[DataRead, ...]
    function_table: FunctionTable | None = None
    root_ended_seq: int | None = None  # meta sequence of the RootEnded (None for the sweep)


@dataclass(frozen=True, slots=True)
class ResolvedValue:
    """A value body found in values_v1 or under ``cas/values/`` (``locator`` says where)."""

    body: bytes
    codec: int = 1
    locator: str = ""


# Returns the body for a 32-byte CID, or None when it is not (yet) ingested.
ValueLookup = Callable[[bytes], ResolvedValue | None]


@dataclass(frozen=True, slots=True)
class PendingExecution:
    """The execution references values not yet ingested: project it later, keep the message."""

    execution_id: str
    process_euid: str
    missing_cids: tuple[str, ...]  # 64 lowercase hex (the CID without bamlv_1_), sorted
    reason: str = "values_not_ingested"  # or ENGINE_NOT_REGISTERED


@dataclass(frozen=True)
class ExecutionProjection:
    """Rows of one execution. Public rows lack the scope and generation columns (added per batch).

    ``public`` maps a public relation name to its rows; ``private`` maps a Lance dataset name
    (docs/projection.md, "Private layout") to its rows. Every row carries its deterministic id.
    """

    execution_id: str
    process_euid: str
    status: str
    index_state: str
    value_state: str
    public: Mapping[str, list[Row]] = field(default_factory=dict)
    private: Mapping[str, Sequence[Row]] = field(default_factory=dict)
    swept: bool = False  # closed by the sweep without a RootEnded (its batches have their own ids)

    def rows(self, relation: str) -> list[Row]:
        if relation in self.public:
            return list(self.public[relation])
        return list(self.private.get(relation, []))


AssembleResult = ExecutionProjection | PendingExecution


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """A batch's identity; ``batch_id`` leaves out the generation, so a rebuild reuses it."""

    batch_id: str
    generation: int
    catalog_version: int
    relation: str
    root_id: str
    partition: int
    content_digest: str  # sha256:<hex64> over the Arrow IPC stream bytes
    row_count: int

    def to_wire(self, environment_id: str) -> ProjectionBatchHeaders:
        """The ``X-Baml-*`` headers of ``PUT /projection-batches/{batch_id}`` (``.http_headers()``)."""
        return ProjectionBatchHeaders(
            generation=self.generation,
            catalog_version=self.catalog_version,
            relation=self.relation,
            root_id=self.root_id,
            content_digest=self.content_digest,
            environment_id=environment_id,
            partition=self.partition,
            row_count=self.row_count,
        )


@dataclass(frozen=True, slots=True)
class ProjectionBatch:
    """One public relation's rows for one root (and partition), ready to PUT to Boundary."""

    header: BatchHeader
    ipc: bytes  # Arrow IPC stream; schema == catalog.public_schema(relation) exactly

    @property
    def batch_id(self) -> str:
        return self.header.batch_id
