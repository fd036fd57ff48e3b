"""One execution's decoded evidence -> rows for every relation (docs/projection.md).

:func:`assemble_execution` projects a finished execution (RootEnded seen). It returns a
:class:`PendingExecution` instead when a referenced value is not yet ingested, so the
caller keeps the queue message and retries. :func:`abandoned_execution` is the sweep's
builder for an execution whose stream went silent without RootEnded: it projects the facts
found, never pending (the stream will send nothing more), with the missing values lost.

Pure: the only outside call is ``value_lookup``, which the I/O layer backs with values_v1
and the ``cas/values/`` prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from activities.projection import private_rows
from activities.projection.call_paths import (
    U64_MAX,
    MergedCct,
    duration_bounds,
    merge_cct,
    overflow_path_id,
)
from activities.projection.model import (
    ENGINE_NOT_REGISTERED,
    AssembleResult,
    DataRead,
    ExecutionInput,
    ExecutionProjection,
    PendingExecution,
    ResolvedValue,
    Row,
    ValueLookup,
)
from formats import catalog, evidence, reader_rules
from formats.cas import value_cid
from formats.cct import CctPayload
from formats.errors import FormatError, IdentityMismatchError
from formats.function_table import FunctionEntry, FunctionTable
from formats.ids import CallRef, EdgeKind, ThreadRef, encode_boundary_id
from formats.meta_segment import ExecutionEndStatus

ROLES = ("args", "output", "error")
_ROLE_BIT = {"args": evidence.ROLE_INPUT, "output": evidence.ROLE_OUTPUT, "error": evidence.ROLE_ERROR}
_OCCURRENCE_ROLE = {evidence.ValueRole.INPUT: "args", evidence.ValueRole.OUTPUT: "output"}

CALL_STATUS = {
    evidence.FunctionEndStatus.OK: "succeeded",
    evidence.FunctionEndStatus.ERRORED: "failed",
    evidence.FunctionEndStatus.CANCELLED: "cancelled",
    # A call ended by the program's exit(): cut short, not an error of its own. The catalog
    # has no "exited" status (yet); see docs/projection.md.
    evidence.FunctionEndStatus.EXITED: "cancelled",
}
THREAD_STATUS = {
    evidence.ThreadEndStatus.COMPLETED: "succeeded",
    evidence.ThreadEndStatus.ERRORED: "failed",
    evidence.ThreadEndStatus.CANCELLED: "cancelled",
}
EXECUTION_STATUS = {s: s.name.lower() for s in ExecutionEndStatus}

# Reasons this projector adds to the profiler's own loss reasons (docs/projection.md).
LOST_NOT_RECORDED = "not_recorded"  # the role was selected, but no occurrence reached the segments
LOST_CAPTURE_MISSING = "capture_missing"  # a terminal error link names a capture that is not there
LOST_NOT_INGESTED = "not_ingested"  # sweep only: the body never reached the bucket
LOST_SPAN_START = "span_start_lost"  # the span's SpanStart sat in a missing or corrupt data segment

# A span whose SpanStart was lost keeps its row (the upstream reader keeps span evidence by call
# ref whatever survives); its function is not known.
UNKNOWN_FUNCTION_ID = -1
UNKNOWN_FUNCTION = "<unknown>"


@dataclass
class _Span:
    start: evidence.SpanStart
    end: evidence.SpanEnd | None = None
    values: dict[str, evidence.ValueState] = field(default_factory=dict)
    link: evidence.TerminalErrorTarget | None = None
    start_lost: bool = False  # ``start`` is a placeholder (see _placeholder_start)


def _placeholder_start(ref: CallRef, started_ns: int) -> evidence.SpanStart:
    """Stands in for a lost SpanStart: unknown function, no parent, no call path, no roles."""
    return evidence.SpanStart(
        call_ref=ref,
        parent_call_ref=None,
        thread_ref=ref.thread,
        context_ref=evidence.OverflowContext(evidence.OverflowReasonTag(0), EdgeKind.CALL),
        function_id=UNKNOWN_FUNCTION_ID,
        call_site=None,
        edge_kind=EdgeKind.CALL,
        started_ns=started_ns,
        selection_reasons=0,
        roles=0,
    )


@dataclass
class _Facts:
    spans: dict[tuple[int, int], _Span] = field(default_factory=dict)
    captures: dict[tuple[bytes, int], evidence.ErrorCapture] = field(default_factory=dict)
    thread_starts: dict[int, evidence.ThreadStart] = field(default_factory=dict)
    thread_ends: dict[int, evidence.ThreadEnd] = field(default_factory=dict)
    cct: list[CctPayload] = field(default_factory=list)
    undecodable: bool = False


@dataclass(frozen=True)
class _RoleState:
    state: str
    cid: bytes | None = None


def _key(ref: CallRef) -> tuple[int, int]:
    return (ref.thread_id, ref.call_id)


def _collect(reads: list[DataRead], fallback_start_ns: int) -> _Facts:
    """Merge the readable groups; a span exists when any fact about it survived (upstream's
    ``SpanEvidence``): one whose SpanStart was lost gets a placeholder start at its end (or at
    ``fallback_start_ns``, the execution's start, when its end was lost too)."""
    facts = _Facts()
    occurrences: list[evidence.ValueOccurrence] = []
    links: list[evidence.TerminalErrorRef] = []
    ends: list[evidence.SpanEnd] = []
    for read in reads:
        group = read.group
        if group is None or read.problem is not None:
            continue
        try:
            cct = group.cct_payload()
            group_facts = group.evidence_facts()
        except FormatError:
            facts.undecodable = True
            continue
        if cct is not None:
            facts.cct.append(cct)
        for fact in group_facts:
            if isinstance(fact, evidence.SpanStart):
                facts.spans.setdefault(_key(fact.call_ref), _Span(fact))
            elif isinstance(fact, evidence.SpanEnd):
                ends.append(fact)
            elif isinstance(fact, evidence.ValueOccurrence):
                occurrences.append(fact)
            elif isinstance(fact, evidence.ErrorCapture):
                facts.captures.setdefault((fact.id.thread_ref.to_bytes(), fact.id.unwind_ordinal), fact)
            elif isinstance(fact, evidence.TerminalErrorRef):
                links.append(fact)
            elif isinstance(fact, evidence.ThreadStart):
                facts.thread_starts.setdefault(fact.thread_ref.thread_id, fact)
            elif isinstance(fact, evidence.ThreadEnd):
                facts.thread_ends.setdefault(fact.thread_ref.thread_id, fact)

    # Ends and values may sit in a later segment than their start: attach after the scan.
    def span_of(ref: CallRef, at_ns: int) -> _Span:
        span = facts.spans.get(_key(ref))
        if span is None:
            span = facts.spans[_key(ref)] = _Span(_placeholder_start(ref, at_ns), start_lost=True)
        return span

    for end in ends:
        span = span_of(end.call_ref, end.ended_ns)
        if span.end is None:
            span.end = end
    for occ in occurrences:
        span_of(occ.call_ref, fallback_start_ns).values.setdefault(_OCCURRENCE_ROLE[occ.role], occ.state)
    for link in links:
        span = span_of(link.call_ref, fallback_start_ns)
        if span.link is None:
            span.link = link.target
    return facts


def _lost(reason: str) -> str:
    return catalog.lost(reason)


def _from_state(state: evidence.ValueState) -> _RoleState:
    if isinstance(state, evidence.ValueAvailable):
        return _RoleState(catalog.AVAILABLE, state.cid)
    return _RoleState(_lost(state.reason.name.lower()))


_Captures = dict[tuple[bytes, int], evidence.ErrorCapture]


def _role_state(span: _Span, role: str, captures: _Captures, links_complete: bool) -> _RoleState:
    if role == "error":
        if span.link is not None:
            target = span.link
            if isinstance(target, evidence.ErrorTargetLost):
                return _RoleState(_lost(target.reason.name.lower()))
            capture = captures.get((target.thread_ref.to_bytes(), target.unwind_ordinal))
            if capture is None:
                return _RoleState(_lost(LOST_CAPTURE_MISSING))
            return _from_state(capture.value)
    elif role in span.values:
        return _from_state(span.values[role])
    if span.start_lost:
        return _RoleState(_lost(LOST_SPAN_START))  # whether the role was captured is not known
    if not span.start.roles & _ROLE_BIT[role]:
        return _RoleState(catalog.NOT_CAPTURED)
    status = span.end.status if span.end is not None else None
    if role == "output" and status is not evidence.FunctionEndStatus.OK:
        return _RoleState(catalog.NOT_APPLICABLE)  # no return value: the call failed or never ended
    if role == "error" and (status is not evidence.FunctionEndStatus.ERRORED or links_complete):
        # An errored call without a terminal error link threw nothing capturable (a panic,
        # a cancellation): unless RootEnded's health says links were lost, there is no value.
        return _RoleState(catalog.NOT_APPLICABLE)
    return _RoleState(_lost(LOST_NOT_RECORDED))


def _value_state(states: list[_RoleState]) -> str:
    available = sum(1 for s in states if s.state == catalog.AVAILABLE)
    lost = sum(1 for s in states if s.state.startswith(catalog.LOST_PREFIX))
    if lost == 0:
        return "complete"
    return "none" if available == 0 else "partial"


class _Names:
    def __init__(self, table: FunctionTable | None) -> None:
        self.by_id: dict[int, FunctionEntry] = {f.function_id: f for f in table.functions} if table else {}

    def name(self, function_id: int) -> str:
        if function_id == UNKNOWN_FUNCTION_ID:
            return UNKNOWN_FUNCTION
        entry = self.by_id.get(function_id)
        return entry.fqn if entry is not None else f"function#{function_id}"


def _root_of(inp: ExecutionInput) -> ThreadRef:
    if inp.root_ended is not None:
        return inp.root_ended.root
    if inp.context.root_started is not None:
        return inp.context.root_started.root
    raise ValueError("an execution needs a RootEnded or a RootStarted to name its root")


def _reads_in_range(inp: ExecutionInput) -> tuple[list[DataRead], bool]:
    """The reads to project and whether the range is intact (every sequence present and verified)."""
    end = inp.root_ended
    reads = sorted(inp.data, key=lambda r: r.sequence)
    if end is None:
        return reads, all(r.problem is None for r in reads)
    if end.data_segment_count == 0:
        return [], True
    wanted = range(end.data_first_seq, end.data_last_seq + 1)
    by_seq = {r.sequence: r for r in reads if r.sequence in wanted}
    intact = all(seq in by_seq and by_seq[seq].problem is None for seq in wanted)
    return [by_seq[s] for s in sorted(by_seq)], intact


def _index_state(inp: ExecutionInput, range_intact: bool, undecodable: bool) -> str:
    """The reader's rules (formats/reader_rules.py) over what the walk met, plus the data rule.

    One departure from the upstream reader: without StreamStarted (meta sequence 1 unreadable)
    no timestamp of the stream can be placed, so a finished execution is ``index_corrupt``.
    """
    end = inp.root_ended
    return reader_rules.index_state(
        started_seq=inp.context.root_started_seq,
        ended_seq=inp.root_ended_seq if end is not None else None,
        root_started_lost=end is not None and end.root_started_lost,
        gaps=inp.context.gaps,
        data_intact=range_intact and not undecodable and inp.stream_started is not None,
    )


def assemble_execution(inp: ExecutionInput, value_lookup: ValueLookup) -> AssembleResult:
    """Project a finished execution, or report it pending: a value not yet ingested, or an engine
    not yet registered (an earlier meta object still on its way through projection)."""
    if inp.root_ended is None:
        raise ValueError("assemble_execution needs a RootEnded; use abandoned_execution for the sweep")
    if inp.root_ended_seq is None:
        raise ValueError("assemble_execution needs the RootEnded's meta sequence")
    if inp.context.engine_missing == ENGINE_NOT_REGISTERED:
        root = inp.root_ended.root
        return PendingExecution(root.execution_id, inp.process_euid.hex(), (), ENGINE_NOT_REGISTERED)
    return _project(inp, value_lookup, sweep=False)


def abandoned_execution(inp: ExecutionInput, value_lookup: ValueLookup) -> ExecutionProjection:
    """The sweep's rows for an execution with RootStarted and no RootEnded: status ``abandoned``."""
    if inp.root_ended is not None:
        raise ValueError("abandoned_execution is for executions without a RootEnded")
    if inp.context.root_started is None:
        raise ValueError("abandoned_execution needs the execution's RootStarted")
    result = _project(inp, value_lookup, sweep=True)
    assert isinstance(result, ExecutionProjection)
    return result


def _resolve(cids: set[bytes], value_lookup: ValueLookup) -> tuple[dict[bytes, ResolvedValue], list[bytes]]:
    found: dict[bytes, ResolvedValue] = {}
    missing: list[bytes] = []
    for cid in sorted(cids):
        value = value_lookup(cid)
        if value is None:
            missing.append(cid)
            continue
        if value_cid(value.codec, value.body) != cid:
            raise IdentityMismatchError(
                f"value body for CID {cid.hex()} hashes to another CID", file=value.locator or None
            )
        found[cid] = value
    return found, missing


def _project(inp: ExecutionInput, value_lookup: ValueLookup, *, sweep: bool) -> AssembleResult:
    root = _root_of(inp)
    execution_id = root.execution_id
    euid_hex = inp.process_euid.hex()
    reads, intact = _reads_in_range(inp)
    rs = inp.context.root_started
    fallback_ns = rs.started_ns if rs is not None else (inp.root_ended.ended_ns if inp.root_ended else 0)
    facts = _collect(reads, fallback_ns)
    index_state = _index_state(inp, intact, facts.undecodable)
    names = _Names(inp.function_table)
    zero = inp.stream_started.zero_unix_ns if inp.stream_started is not None else 0
    engine = inp.context.engine_started
    end = inp.root_ended

    spans = [facts.spans[k] for k in sorted(facts.spans)]
    health = end.health if end is not None else None
    links_complete = health is None or (
        health.terminal_error_links_committed >= health.terminal_error_links_observed
    )
    states: dict[tuple[int, int], dict[str, _RoleState]] = {
        (s.start.call_ref.thread_id, s.start.call_ref.call_id): {
            role: _role_state(s, role, facts.captures, links_complete) for role in ROLES
        }
        for s in spans
    }
    wanted: set[bytes] = {st.cid for per in states.values() for st in per.values() if st.cid is not None}
    for capture in facts.captures.values():
        if isinstance(capture.value, evidence.ValueAvailable):
            wanted.add(capture.value.cid)
    resolved, missing = _resolve(wanted, value_lookup)
    if missing and not sweep:
        return PendingExecution(execution_id, euid_hex, tuple(c.hex() for c in missing))
    if missing:
        gone = set(missing)
        for per in states.values():
            for role, st in list(per.items()):
                if st.cid in gone:
                    per[role] = _RoleState(_lost(LOST_NOT_INGESTED))

    status = EXECUTION_STATUS[end.status] if end is not None else "abandoned"
    all_states = [st for per in states.values() for st in per.values()]
    value_state = _value_state(all_states)
    merged = merge_cct(facts.cct)
    program_hex = engine.program_id.hex() if engine is not None else _program_from_cct(merged)

    rendered = private_rows.RenderedValues(resolved)
    calls: list[Row] = []
    calls_private: list[Row] = []
    leaves = private_rows.LeafRows()
    by_key = {(s.start.call_ref.thread_id, s.start.call_ref.call_id): s for s in spans}
    span_durations: dict[bytes, list[int]] = {}
    call_ids = catalog.RowIds("calls_v1", execution_id)
    for span in spans:
        ref = span.start.call_ref
        k = (ref.thread_id, ref.call_id)
        call_id = ref.encode_string()
        row_id = call_ids(call_id)
        started = zero + span.start.started_ns
        ended = zero + span.end.ended_ns if span.end is not None else None
        ctx = span.start.context_ref
        path_key = ctx.key if isinstance(ctx, evidence.NormalContext) else None  # None when start lost
        if path_key is not None and span.end is not None:
            span_durations.setdefault(path_key, []).append(span.end.ended_ns - span.start.started_ns)
        per = states[k]
        calls.append(
            {
                "row_id": row_id,
                "execution_id": execution_id,
                "process_euid": euid_hex,
                "thread_id": str(ref.thread_id),
                "call_id": call_id,
                "parent_call_id": (
                    span.start.parent_call_ref.encode_string() if span.start.parent_call_ref else None
                ),
                "function_name": names.name(span.start.function_id),
                "parent_function_name": _parent_name(span, by_key, merged, names),
                "program_id": program_hex,
                "call_path_id": path_key.hex() if path_key is not None else None,
                "is_llm": bool(span.start.selection_reasons & evidence.SELECTED_LLM),
                "started_at_ns": started,
                "ended_at_ns": ended,
                "duration_ns": ended - started if ended is not None and not span.start_lost else None,
                "status": CALL_STATUS[span.end.status] if span.end is not None else "abandoned",
                **{f"{role}_state": per[role].state for role in ROLES},
                **{f"{role}_cid": _cid_text(per[role]) for role in ROLES},
            }
        )
        calls_private.append(
            {
                "row_id": row_id,
                "execution_id": execution_id,
                "call_id": call_id,
                **{role: rendered.json_text(per[role].cid) for role in ROLES},
            }
        )
        for role in ROLES:
            cid = per[role].cid
            if cid is not None:
                rendered.add_leaves(leaves, execution_id, call_id, role, cid, calls[-1])

    threads = _threads(
        root, facts, spans, states, names, zero, execution_id, euid_hex, status, index_state, value_state, inp
    )
    errors, errors_private = _errors(facts, by_key, names, zero, execution_id, inp, root, rendered)
    public: dict[str, list[Row]] = {
        "calls_v1": calls,
        "threads_v1": threads,
        "call_path_stats_v1": _call_path_rows(merged, span_durations, names, execution_id, program_hex),
        "errors_v1": errors,
    }
    private: dict[str, Sequence[Row]] = {
        "calls_v1": calls_private,
        "errors_v1": errors_private,
        "value_leaves_v1": leaves,
        "values_v1": private_rows.values_rows(resolved),
    }
    if end is not None:
        public["health_v1"] = [
            {
                "row_id": catalog.deterministic_row_id("health_v1", execution_id),
                "execution_id": execution_id,
                "process_euid": euid_hex,
                "ended_at_ns": zero + end.ended_ns,
                **{name: min(getattr(end.health, name), U64_MAX) for name in catalog.HEALTH_COUNTERS},
            }
        ]
    table_cid = engine.function_table_cid if engine is not None else None
    if inp.function_table is not None and table_cid is not None:
        defs, defs_private, files = private_rows.program_rows(inp.function_table, program_hex, table_cid)
        public["function_definitions_v1"] = defs
        private["function_definitions_v1"] = defs_private
        private["source_files_v1"] = files
    private["cid_refs_v1"] = private_rows.cid_ref_rows(
        execution_id, euid_hex, [*resolved, *([table_cid] if table_cid is not None else [])]
    )
    return ExecutionProjection(
        execution_id, euid_hex, status, index_state, value_state, public, private, swept=end is None
    )


def _cid_text(st: _RoleState) -> str | None:
    return st.cid.hex() if st.cid is not None else None


def _program_from_cct(merged: MergedCct) -> str:
    for path in merged.paths.values():
        if path.tuple is not None:
            return path.tuple.program_id.hex()
    return ""


def _parent_name(
    span: _Span, by_key: dict[tuple[int, int], _Span], merged: MergedCct, names: _Names
) -> str | None:
    if span.start_lost:
        return None
    parent = span.start.parent_call_ref
    if parent is not None:
        found = by_key.get((parent.thread_id, parent.call_id))
        if found is not None:
            return names.name(found.start.function_id)
    # The direct caller may be an unselected call with no span: the call path still names it.
    ctx = span.start.context_ref
    if isinstance(ctx, evidence.NormalContext):
        t = merged.tuple_for(ctx.key)
        if t is not None and t.parent_key is not None:
            pt = merged.tuple_for(t.parent_key)
            if pt is not None:
                return names.name(pt.function_id)
    return None


def _threads(
    root: ThreadRef,
    facts: _Facts,
    spans: list[_Span],
    states: dict[tuple[int, int], dict[str, _RoleState]],
    names: _Names,
    zero: int,
    execution_id: str,
    euid_hex: str,
    status: str,
    index_state: str,
    value_state: str,
    inp: ExecutionInput,
) -> list[Row]:
    by_thread: dict[int, list[_Span]] = {}
    for span in spans:
        by_thread.setdefault(span.start.call_ref.thread_id, []).append(span)
    thread_ids = {root.thread_id, *facts.thread_starts, *by_thread}
    rows: list[Row] = []
    for tid in sorted(thread_ids):
        own = sorted(
            by_thread.get(tid, []), key=lambda s: (s.start_lost, s.start.started_ns, s.start.call_ref.call_id)
        )
        first = own[0] if own else None
        start_fact = facts.thread_starts.get(tid)
        end_fact = facts.thread_ends.get(tid)
        is_root = tid == root.thread_id
        if is_root:
            rs = inp.context.root_started
            started_off = (
                rs.started_ns
                if rs is not None
                else start_fact.started_ns
                if start_fact is not None
                else first.start.started_ns
                if first is not None
                else inp.root_ended.ended_ns
                if inp.root_ended is not None
                else 0
            )
            ended_off = inp.root_ended.ended_ns if inp.root_ended is not None else None
            t_status, t_index, t_value = status, index_state, value_state
            parent_tid: str | None = None
            runtime = encode_boundary_id(rs.runtime_id) if rs is not None else None
        else:
            started_off = (
                start_fact.started_ns if start_fact is not None else first.start.started_ns if first else 0
            )
            ended_off = end_fact.ended_ns if end_fact is not None else None
            t_status = THREAD_STATUS[end_fact.status] if end_fact is not None else "abandoned"
            t_index = index_state
            t_value = _value_state(
                [st for s in own for st in states[(tid, s.start.call_ref.call_id)].values()]
            )
            parent = start_fact.parent if start_fact is not None else None
            parent_tid = str(parent.thread_id) if parent is not None else None
            runtime = None
        started = zero + started_off
        ended = zero + ended_off if ended_off is not None else None
        rows.append(
            {
                "row_id": catalog.deterministic_row_id("threads_v1", execution_id, tid),
                "execution_id": execution_id,
                "process_euid": euid_hex,
                "thread_id": str(tid),
                "parent_thread_id": parent_tid,
                "is_root": is_root,
                "runtime_id": runtime,
                "root_function_name": names.name(first.start.function_id) if first is not None else None,
                "status": t_status,
                "value_state": t_value,
                "index_state": t_index,
                "started_at_ns": started,
                "ended_at_ns": ended,
                "duration_ns": ended - started if ended is not None else None,
            }
        )
    return rows


def _errors(
    facts: _Facts,
    by_key: dict[tuple[int, int], _Span],
    names: _Names,
    zero: int,
    execution_id: str,
    inp: ExecutionInput,
    root: ThreadRef,
    rendered: private_rows.RenderedValues,
) -> tuple[list[Row], list[Row]]:
    def is_root_call(ref: CallRef) -> bool:
        span = by_key.get((ref.thread_id, ref.call_id))
        return (
            ref.thread_id == root.thread_id
            and span is not None
            and not span.start_lost
            and span.start.parent_call_ref is None
        )

    def when(ref: CallRef) -> int:
        span = by_key.get((ref.thread_id, ref.call_id))
        if span is not None:
            return zero + (span.end.ended_ns if span.end is not None else span.start.started_ns)
        return zero + (inp.root_ended.ended_ns if inp.root_ended is not None else 0)

    terminal: set[tuple[bytes, int]] = set()
    rows: list[Row] = []
    private: list[Row] = []
    lost_links: list[tuple[CallRef, evidence.ErrorTargetLost]] = []
    for span in by_key.values():
        target = span.link
        if target is None:
            continue
        ref = span.start.call_ref
        if isinstance(target, evidence.ErrorCaptureId):
            if is_root_call(ref):
                terminal.add((target.thread_ref.to_bytes(), target.unwind_ordinal))
        else:
            lost_links.append((ref, target))
    for key in sorted(facts.captures):
        cap = facts.captures[key]
        ref = cap.throw_call_ref
        st = _from_state(cap.value)
        if st.cid is not None and st.cid not in rendered.resolved:
            st = _RoleState(_lost(LOST_NOT_INGESTED))  # sweep only: otherwise the execution is pending
        row_id = catalog.deterministic_row_id("errors_v1", execution_id, "capture", key[1], ref.thread_id)
        rows.append(
            {
                "row_id": row_id,
                "execution_id": execution_id,
                "call_id": ref.encode_string(),
                "thread_id": str(ref.thread_id),
                "function_name": names.name(cap.throw_function_id),
                "is_terminal": key in terminal,
                "occurred_at_ns": when(ref),
                "error_state": st.state,
                "error_cid": _cid_text(st),
            }
        )
        private.append(
            {
                "row_id": row_id,
                "execution_id": execution_id,
                "error": rendered.json_text(st.cid),
                "source_span": private_rows.throw_site_text(cap.throw_site, inp.function_table),
            }
        )
    for ref, lost_target in sorted(lost_links, key=lambda x: (x[0].thread_id, x[0].call_id)):
        span = by_key[(ref.thread_id, ref.call_id)]
        call_id = ref.encode_string()
        row_id = catalog.deterministic_row_id("errors_v1", execution_id, "lost_link", call_id)
        rows.append(
            {
                "row_id": row_id,
                "execution_id": execution_id,
                "call_id": call_id,
                "thread_id": str(ref.thread_id),
                "function_name": names.name(span.start.function_id),
                "is_terminal": is_root_call(ref),
                "occurred_at_ns": when(ref),
                "error_state": _lost(lost_target.reason.name.lower()),
                "error_cid": None,
            }
        )
        private.append({"row_id": row_id, "execution_id": execution_id, "error": None, "source_span": None})
    return rows, private


def _call_path_rows(
    merged: MergedCct,
    span_durations: dict[bytes, list[int]],
    names: _Names,
    execution_id: str,
    program_hex: str,
) -> list[Row]:
    rows: list[Row] = []
    for key in sorted(merged.paths):
        path = merged.paths[key]
        c = path.counters
        lo, hi = duration_bounds(c, span_durations.get(key, []))
        t = path.tuple
        rows.append(
            {
                "row_id": catalog.deterministic_row_id("call_path_stats_v1", execution_id, key.hex()),
                "execution_id": execution_id,
                "call_path_id": key.hex(),
                "parent_call_path_id": t.parent_key.hex() if t is not None and t.parent_key else None,
                "program_id": t.program_id.hex() if t is not None else program_hex,
                "function_name": names.name(t.function_id) if t is not None else "unknown",
                "edge_kind": t.edge_kind.name.lower() if t is not None else "unknown",
                "call_count": min(c.invocations_started, U64_MAX),
                "error_count": min(c.completed_error, U64_MAX),
                "total_duration_ns": min(c.inclusive_ns, U64_MAX),
                "min_duration_ns": lo,
                "max_duration_ns": hi,
            }
        )
    for (reason, edge), c in sorted(merged.overflow.items()):
        path_id = overflow_path_id(reason, edge)
        lo, hi = duration_bounds(c, [])
        rows.append(
            {
                "row_id": catalog.deterministic_row_id("call_path_stats_v1", execution_id, path_id),
                "execution_id": execution_id,
                "call_path_id": path_id,
                "parent_call_path_id": None,
                "program_id": program_hex,
                "function_name": "unknown",
                "edge_kind": edge.name.lower(),
                "call_count": min(c.invocations_started, U64_MAX),
                "error_count": min(c.completed_error, U64_MAX),
                "total_duration_ns": min(c.inclusive_ns, U64_MAX),
                "min_duration_ns": lo,
                "max_duration_ns": hi,
            }
        )
    return rows
