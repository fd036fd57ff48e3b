"""The erasure family's contract: task queue, workflow and activity names, inputs, outputs, status.

Shared by the gateway (the starter), the workflow and the activities (formats/contracts/__init__.py).
"""

from dataclasses import dataclass, field
from typing import Any

from formats.contracts import ScopeRef, Workload

WORKLOAD = Workload.ERASURE  # its task queue: task_queue(base, WORKLOAD)
ERASURE_WORKFLOW = "Erasure"
STATUS_QUERY = "status"  # the workflow's query answering ErasureStatus

# Activity names (the Temporal UI shows them as the workflow's steps).
RESOLVE = "erasure_resolve"
DELETE_STREAM_OBJECTS = "erasure_delete_stream_objects"
ERASE_FACTS = "erasure_erase_facts"
ERASE_LANCE_ROWS = "erasure_erase_lance_rows"
DELETE_UNREFERENCED = "erasure_delete_unreferenced"
CLEANUP_LANCE_VERSIONS = "erasure_cleanup_lance_versions"
VERIFY = "erasure_verify"
DISCARD_PLAN = "erasure_discard_plan"

# States (contract "State machines": queued -> running -> succeeded | failed).
QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"

# Boundary erases a root's facts in the given generation and every later one, so generation 1
# covers every generation that exists: the active one, older ones and a rebuild in progress.
FIRST_GENERATION = 1


def erasure_workflow_id(erasure_id: str) -> str:
    return f"erasure/{erasure_id}"


@dataclass(frozen=True)
class Selector:
    """Exactly one of the three is set (the gateway checks it)."""

    process_euids: tuple[str, ...] = ()
    execution_ids: tuple[str, ...] = ()
    time_from_ns: int | None = None  # inclusive; root rows' started_at_ns
    time_to_ns: int | None = None  # exclusive

    @property
    def kind(self) -> str:
        if self.process_euids:
            return "process_euids"
        if self.execution_ids:
            return "execution_ids"
        return "time_range"


@dataclass(frozen=True)
class StepTimeouts:
    """Activity timeouts (seconds); tests shorten the heartbeat so a killed worker is noticed fast."""

    activity_s: float = 1800.0
    heartbeat_s: float = 60.0
    retry_initial_s: float = 1.0
    retry_max_s: float = 30.0


@dataclass(frozen=True)
class ErasureInput:
    erasure_id: str
    scope: ScopeRef
    selector: Selector
    request_digest: str = ""
    requested_by: str = ""  # token id (never the token)
    timeouts: StepTimeouts = field(default_factory=StepTimeouts)
    max_rounds: int = 3  # erase-and-verify rounds before the erasure is reported failed


@dataclass(frozen=True)
class StreamPlan:
    euid: str
    root_ids: tuple[str, ...]
    program_ids: tuple[str, ...] = ()
    object_versions: int = 0  # versions and delete markers found under the stream's prefix


@dataclass(frozen=True)
class ErasurePlan:
    """What the erasure covers, fixed before anything is deleted. Kept in the evidence bucket while
    the erasure runs (:class:`PlanRef`): at one id per root it outgrows Temporal's payload limit."""

    scope: ScopeRef
    streams: tuple[StreamPlan, ...]
    candidate_cids: tuple[str, ...]  # values and tables the erased roots referenced (64 hex)

    @property
    def euids(self) -> tuple[str, ...]:
        return tuple(s.euid for s in self.streams)

    @property
    def root_ids(self) -> tuple[str, ...]:
        return tuple(sorted({r for s in self.streams for r in s.root_ids}))

    @property
    def program_ids(self) -> tuple[str, ...]:
        return tuple(sorted({p for s in self.streams for p in s.program_ids}))


@dataclass(frozen=True)
class PlanRef:
    """The stored plan (key and SHA-256 of its JSON) and what the workflow reports of it."""

    key: str
    digest: str
    scope: ScopeRef
    euids: tuple[str, ...]
    root_count: int


@dataclass(frozen=True)
class ResolveInput:
    erasure_id: str
    scope: ScopeRef
    selector: Selector


@dataclass(frozen=True)
class PlanInput:
    erasure_id: str
    plan: PlanRef
    round: int = 1


@dataclass(frozen=True)
class DeleteObjectsResult:
    versions_deleted: int
    delete_markers_deleted: int
    streams_deleted: int


@dataclass(frozen=True)
class EraseFactsResult:
    generation_from: int
    deleted: dict[str, int]
    remaining_total: int


@dataclass(frozen=True)
class EraseLanceResult:
    rows_deleted: dict[str, int]
    compacted: tuple[str, ...] = ()  # datasets rewritten so no data file still holds erased rows
    # Programs of the erased streams whose rows were kept: program id -> remaining streams whose
    # projected calls still name it (a shared build, one content-hashed program id).
    programs_kept: dict[str, int] = field(default_factory=dict)
    programs_erased: tuple[str, ...] = ()  # programs whose rows went (no remaining stream uses them)
    # Rows of the kept programs left in place: Lance datasets, and Boundary's public
    # function_definitions_v1 (which Boundary keeps by the same rule).
    program_rows_kept: dict[str, int] = field(default_factory=dict)
    program_fact_rows_kept: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteUnreferencedResult:
    objects_deleted: int  # large values and function tables (every version)
    objects_kept: int  # candidates another remaining root still references
    values_rows_deleted: int
    values_rows_kept: int


@dataclass(frozen=True)
class CleanupInput:
    erasure_id: str
    scope: ScopeRef


@dataclass(frozen=True)
class CleanupResult:
    versions_removed: dict[str, int]
    tagged_versions_kept: dict[str, int]
    cleaned_at_ns: int
    # Noncurrent S3 object versions and delete markers removed under each dataset.
    noncurrent_objects_removed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifyResult:
    s3_object_versions: int  # under the erased streams' prefixes, every version and marker
    s3_objects_by_stream: dict[str, int]
    boundary_fact_rows: dict[str, int]  # per relation, every generation
    boundary_fact_total: int
    lance_rows_current: dict[str, int]  # per dataset, newest version
    lance_rows_retained_versions: dict[str, int]  # per dataset, every version still on storage
    lance_versions_retained: dict[str, int]
    # Fragments carrying deletion masks at verification (informational: later writes of other
    # streams add some; the erasure's own deletions were materialized by compaction).
    lance_fragments_with_deletions: dict[str, int]
    verified_at_ns: int
    # Noncurrent S3 versions left under each dataset (old files that may hold erased rows).
    lance_noncurrent_object_versions: dict[str, int] = field(default_factory=dict)
    # Programs of the erased streams still used by a remaining stream at verification: their rows
    # are not counted as remaining (program id -> streams using it).
    programs_in_use: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return (
            self.s3_object_versions == 0
            and self.boundary_fact_total == 0
            and not any(self.lance_rows_current.values())
            and not any(self.lance_rows_retained_versions.values())
            and not any(self.lance_noncurrent_object_versions.values())
        )


@dataclass
class ErasureStatus:
    """What ``GET /v1/erasures/{id}`` reports (the workflow's ``status`` query)."""

    erasure_id: str
    state: str = QUEUED
    tenant_id: str = ""
    project_id: str = ""
    environment_id: str = ""
    selector_kind: str = ""
    request_digest: str = ""
    created_at_unix: float = 0.0
    finished_at_unix: float | None = None
    step: str | None = None
    round: int = 0
    streams_matched: int | None = None
    streams_deleted: int | None = None
    roots_matched: int | None = None
    receipt: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
