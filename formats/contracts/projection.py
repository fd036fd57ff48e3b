"""Inputs and outputs of the projection activities and workflows: one frozen dataclass each.

Shared by the starters (SQS bridge, operator CLI, schedules), the workflows and the
activities, so fields can be added later without breaking callers. Plain strings and ints
only: they travel through Temporal's JSON payload converter.
"""

from dataclasses import dataclass, field

from formats.contracts import ScopeRef

# Per-execution outcomes of a projection attempt.
PROJECTED = "projected"  # facts visible and Lance committed (index_state complete or root_started_lost)
INDEX_CORRUPT = "index_corrupt"  # projected, with index_state index_corrupt (gap, walk bound, bad segment)
PENDING = "pending"  # a referenced value is not ingested yet; nothing written for it
ABANDONED = "abandoned"  # closed by the sweep without RootEnded
QUARANTINED = "quarantined"  # its evidence failed verification; operators inspect and replay
DONE_OUTCOMES = frozenset({PROJECTED, INDEX_CORRUPT, ABANDONED, QUARANTINED})

# ApplicationError types the activities raise (non-retryable): the bridge keys on them.
ERR_QUARANTINED = "ObjectQuarantined"
ERR_STALE_GENERATION = "StaleGeneration"


@dataclass(frozen=True)
class ExecutionOutcome:
    root_id: str  # execution id: hex of the root ThreadRef
    outcome: str
    missing_cids: tuple[str, ...] = ()  # pending only: 64-hex CIDs not yet ingested
    reason: str | None = None  # index_corrupt / quarantined: why (a reason code, never a value)


@dataclass(frozen=True)
class ProjectMetaInput:
    key: str  # evidence key of the meta object
    generation: int
    only_roots: tuple[str, ...] = ()  # re-try just these (the pending ones); empty: every RootEnded


@dataclass(frozen=True)
class ProjectMetaResult:
    key: str
    generation: int
    outcomes: tuple[ExecutionOutcome, ...] = ()
    batches_sent: int = 0
    lance_rows: int = 0

    @property
    def pending(self) -> tuple[ExecutionOutcome, ...]:
        return tuple(o for o in self.outcomes if o.outcome == PENDING)


@dataclass(frozen=True)
class IngestPackInput:
    key: str


@dataclass(frozen=True)
class IngestPackResult:
    key: str
    entries: int
    inserted: int  # new in values_v1 by the commit that held this pack (shared with packs committed with it)
    cids: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuarantineInput:
    key: str
    reason: str


@dataclass(frozen=True)
class QuarantineResult:
    marker_key: str
    created: bool


@dataclass(frozen=True)
class SweepInput:
    scope: ScopeRef
    silence_limit_s: float | None = None  # None: the worker's setting


@dataclass(frozen=True)
class SweepResult:
    streams_checked: int
    streams_silent: int
    generation: int
    outcomes: tuple[ExecutionOutcome, ...] = ()


@dataclass(frozen=True)
class IndexInput:
    scope: ScopeRef
    datasets: tuple[str, ...] = ()  # empty: every dataset


@dataclass(frozen=True)
class IndexResult:
    datasets: tuple[str, ...]
    indexes: int
    compacted_fragments: int
    removed_versions: int


@dataclass(frozen=True)
class ActiveGenerationInput:
    environment_id: str


@dataclass(frozen=True)
class ReplayScanInput:
    scope: ScopeRef
    generation: int
    start_after: str = ""  # listing cursor: the last key of the previous page
    page_size: int = 500


@dataclass(frozen=True)
class ReplayScanResult:
    missing_meta_keys: tuple[str, ...]
    missing_pack_keys: tuple[str, ...]
    scanned: int
    next_start_after: str | None  # None when the listing is done


@dataclass(frozen=True)
class EnqueueInput:
    keys: tuple[str, ...]


@dataclass(frozen=True)
class EnqueueResult:
    sent: int


@dataclass(frozen=True)
class SwitchGenerationInput:
    environment_id: str
    generation: int


@dataclass(frozen=True)
class SwitchGenerationResult:
    environment_id: str
    generation: int
    switched: bool


@dataclass(frozen=True)
class WorkflowOutcomes:
    """What a projection workflow reports to the bridge: delete the message iff ``done``."""

    key: str
    done: bool
    outcomes: tuple[ExecutionOutcome, ...] = field(default_factory=tuple)
    quarantined: str | None = None  # reason: the object failed verification, its marker is written
    # IngestValuePack only: the CIDs the pack held, now in values_v1 (the bridge wakes the stream's
    # meta objects that wait for one of them).
    landed_cids: tuple[str, ...] = ()


@dataclass(frozen=True)
class PendingPolicy:
    """Durable-timer backoff while an execution waits for its values (seconds).

    ``deadline_s`` counts in workflow time from the workflow's first start (carried across
    continue-as-new), not as a sum of the delays waited.
    """

    initial_s: float = 2.0
    max_s: float = 60.0
    deadline_s: float = 7 * 24 * 3600.0


# A run continues as new once its history holds this many events (or Temporal suggests it), far
# below Temporal's hard limits (51,200 events / 50 MB) and its 10,240-event warning.
HISTORY_EVENTS_LIMIT = 2_000


@dataclass(frozen=True)
class PendingCarry:
    """What a ProjectMetaObject run hands to its continue-as-new successor: the pending loop's state."""

    started_at_unix: float  # workflow time of the first run's start: the deadline counts from it
    outcomes: tuple[ExecutionOutcome, ...]  # every outcome so far (done and pending), by root id
    next_delay_s: float  # the back-off delay the next wait uses
    nudged: bool = False  # a values_landed arrived after the last projection started
    runs: int = 1  # runs so far in this chain (for operators; no decision uses it)


@dataclass(frozen=True)
class ProjectMetaWorkflowInput:
    key: str
    generation: int
    pending: PendingPolicy = field(default_factory=PendingPolicy)
    activity_timeout_s: float = 300.0
    heartbeat_timeout_s: float = 30.0  # a worker that died mid-activity is noticed after this
    history_events: int = HISTORY_EVENTS_LIMIT
    carried: PendingCarry | None = None  # None: a first run (projects every RootEnded first)


@dataclass(frozen=True)
class PackWorkflowInput:
    key: str
    activity_timeout_s: float = 60.0
    heartbeat_timeout_s: float = 30.0  # a worker that died mid-ingest is noticed after this


@dataclass(frozen=True)
class ReplayProgress:
    generation: int
    scanned: int
    meta_enqueued: int
    packs_enqueued: int
    done: bool


@dataclass(frozen=True)
class ReplayInput:
    scope: ScopeRef
    generation: int | None = None  # None: the active generation
    page_size: int = 500
    history_events: int = HISTORY_EVENTS_LIMIT
    # Continue-as-new state: the listing cursor and the totals of the earlier runs (None: first run).
    cursor: str = ""
    carried: ReplayProgress | None = None


@dataclass(frozen=True)
class RebuildProgress:
    from_generation: int
    to_generation: int
    scanned: int
    packs_ingested: int
    metas_projected: int
    not_done: int
    switched: bool
    done: bool


@dataclass(frozen=True)
class RebuildInput:
    scope: ScopeRef
    page_size: int = 200
    max_children: int = 8
    pending: PendingPolicy = field(default_factory=PendingPolicy)
    switch: bool = True
    history_events: int = HISTORY_EVENTS_LIMIT
    # Continue-as-new state: the listing cursor and the totals (with the source generation read by
    # the first run) of the earlier runs (None: first run).
    cursor: str = ""
    carried: RebuildProgress | None = None
