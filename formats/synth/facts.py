"""Turning an execution plan into the records the profiler writes (through ``formats`` codecs).

Per selected call: ``SpanStart`` and the input ``ValueOccurrence`` at its start;
``SpanEnd``, the output ``ValueOccurrence``, an ``ErrorCapture`` where it throws and a
``TerminalErrorRef`` where it ends in error, at its end. The root thread has
``ThreadStart``/``ThreadEnd``. Every call, selected or not, adds CCT counter deltas:
``invocations_started`` when it starts, completion counters and times when it ends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from formats import cas, cct, data_segment, evidence, function_table
from formats import meta_segment as ms
from formats.ids import PROGRAM_ID_LEN, CallRef, CallSite, ContextTuple, EdgeKind, ThreadRef, context_key
from formats.synth.plan import FUNCTIONS, CallPlan, ExecutionPlan, Kind, Outcome
from formats.synth.project import SOURCE_FILE, Project, file_id_of, project, source_path
from formats.synth.truth import TruthSpan, TruthValue

END_STATUS = {
    Outcome.SUCCEEDED: ms.ExecutionEndStatus.SUCCEEDED,
    Outcome.FAILED: ms.ExecutionEndStatus.FAILED,
    Outcome.CANCELLED: ms.ExecutionEndStatus.CANCELLED,
    Outcome.PANICKED: ms.ExecutionEndStatus.PANICKED,
}
STATUS_NAME = {o: END_STATUS[o].name.lower() for o in Outcome}
SPAN_STATUS = {
    "ok": evidence.FunctionEndStatus.OK,
    "errored": evidence.FunctionEndStatus.ERRORED,
    "cancelled": evidence.FunctionEndStatus.CANCELLED,
    "exited": evidence.FunctionEndStatus.EXITED,
}
THREAD_STATUS = {
    Outcome.SUCCEEDED: evidence.ThreadEndStatus.COMPLETED,
    Outcome.FAILED: evidence.ThreadEndStatus.ERRORED,
    Outcome.CANCELLED: evidence.ThreadEndStatus.CANCELLED,
    Outcome.PANICKED: evidence.ThreadEndStatus.ERRORED,
}
SELECTION = {
    Kind.ROOT: evidence.SELECTED_ROOT,
    Kind.LLM: evidence.SELECTED_LLM,
    Kind.SELECTED: evidence.SELECTED_MANUAL,
}
LOSS = {"value_too_large": evidence.ValueLossReason.VALUE_TOO_LARGE}
ROLE_ORDER = {"input": 0, "output": 1, "error": 2}


def build_function_table(proj: Project) -> function_table.FunctionTable:
    entries = []
    for f in FUNCTIONS:
        file_id, start, end = proj.spans[f.function_id]
        entries.append(
            function_table.FunctionEntry(
                function_id=f.function_id,
                fqn=f.fqn,
                display_name=f.display_name,
                definition_key=f"def:{f.fqn}",
                kind_code=int(function_table.FunctionKind.BYTECODE),
                kind_detail="llm" if f.kind is Kind.LLM else None,
                origin_code=int(function_table.FunctionOrigin.USER_DEFINED),
                source_file=SOURCE_FILE[file_id],
                source_span=function_table.FunctionSpan(file_id, start, end),
                package_name="synth_app",
                namespace=f.namespace,
            )
        )
    files = tuple(function_table.FunctionFile(k, source_path(k)) for k in sorted(SOURCE_FILE))
    return function_table.FunctionTable(tuple(entries), files)


class Program:
    """The compiled program every engine of a process runs: function table, program id, CCT keys.

    The program id is the content hash of the build's project files, as upstream computes it,
    so every engine and every process running the same build shares it (and the table's CID).
    ``tableless_engines`` get an EngineStarted without ``function_table_cid``, as when the
    real engine failed to publish its table to the CAS.
    """

    def __init__(self, baml_version: str, build: int = 0, *, tableless_engines: frozenset[int] = frozenset()):
        self.project = project(build)
        self.table = build_function_table(self.project)
        body = function_table.encode_function_table(self.table)
        self.table_cas_bytes = cas.encode_cas_object(cas.CODEC_FUNCTION_TABLE, body)
        self.table_cid = cas.value_cid(cas.CODEC_FUNCTION_TABLE, body)
        self.source_label = hashlib.sha256(b"synth-source-snapshot").hexdigest()
        self.id = self.project.program_hash(baml_version)[:PROGRAM_ID_LEN]
        self.tableless_engines = tableless_engines
        self._contexts: dict[tuple[bytes | None, int], tuple[bytes, ContextTuple]] = {}

    def program_id(self, engine_id: int) -> bytes:
        return self.id

    def has_table(self, engine_id: int) -> bool:
        return engine_id not in self.tableless_engines

    def engine_started(self, engine_id: int) -> ms.EngineStarted:
        cid = self.table_cid if self.has_table(engine_id) else None
        return ms.EngineStarted(engine_id, self.program_id(engine_id), cid, None, self.source_label)

    def context(
        self, engine_id: int, parent_key: bytes | None, function_id: int
    ) -> tuple[bytes, ContextTuple]:
        # One program id for every engine: a call path has one context key in the whole build.
        cache_key = (parent_key, function_id)
        found = self._contexts.get(cache_key)
        if found is None:
            site = None
            if parent_key is not None:
                line = 10 + function_id * 7
                site = CallSite(file_id_of(FUNCTIONS[function_id].fqn), line * 40, line * 40 + 24, line)
            t = ContextTuple(
                self.program_id(engine_id),
                parent_key,
                function_id,
                site,
                EdgeKind.ROOT if parent_key is None else EdgeKind.CALL,
            )
            found = self._contexts[cache_key] = (context_key(t), t)
        return found


def runtime_id(root: ThreadRef) -> bytes:
    """The host's runtime token for a root (opaque 16 bytes; derived so runs are reproducible)."""
    return hashlib.sha256(b"synth-runtime" + root.to_bytes()).digest()[:16]


@dataclass
class GroupAcc:
    """One execution's facts and CCT deltas within one cycle (merged by context key)."""

    root: ThreadRef
    facts: list[evidence.EvidenceFact] = field(default_factory=list)
    cct: dict[bytes, list[Any]] = field(default_factory=dict)  # key -> [tuple, 10 counters]

    def add(self, item: Any) -> None:
        if isinstance(item, CctDelta):
            slot = self.cct.get(item.key)
            if slot is None:
                self.cct[item.key] = [item.context, *item.counters]
            else:
                for i, n in enumerate(item.counters, start=1):
                    slot[i] += n
        else:
            self.facts.append(item)

    def build(self) -> data_segment.DataGroup:
        payload = None
        if self.cct:
            payload = cct.CctPayload(
                tuple(
                    cct.ContextDelta(key, slot[0], cct.CctCounters(*slot[1:]))
                    for key, slot in self.cct.items()
                )
            )
        return data_segment.DataGroup.build(self.root, cct=payload, facts=self.facts if self.facts else None)


@dataclass(frozen=True, slots=True)
class CctDelta:
    key: bytes
    context: ContextTuple
    counters: tuple[int, ...]


def _state(ref_value: Any, lost: str | None) -> evidence.ValueState:
    if lost is not None:
        return evidence.ValueLost(LOSS[lost])
    return evidence.ValueAvailable(ref_value.cid, 1, ref_value.body_len)


def emissions(plan: ExecutionPlan, root: ThreadRef, program: Program) -> list[tuple[int, Any]]:
    """Every fact and CCT delta of ``plan`` with the time it is recorded, in time order."""
    out: list[tuple[int, Any]] = []
    euid, engine, thread = root.euid, root.engine_id, root.thread_id
    keys: dict[int, bytes] = {}
    child_time: dict[int, int] = {}
    for call in plan.calls:
        if call.parent_call_id is not None:
            child_time[call.parent_call_id] = child_time.get(call.parent_call_id, 0) + (
                call.ended_ns - call.started_ns
            )
    out.append(
        (
            plan.started_ns,
            evidence.ThreadStart(root, None, None, None, plan.started_ns, evidence.ThreadStartKind.ROOT),
        )
    )
    # The capture belongs to the throwing call: the first to end with an error value (a failing
    # child ends before the root that rethrows it); every erroring call links to that capture.
    erroring = [c for c in plan.calls if any(v.role == "error" for v in c.values)]
    thrower = min(erroring, key=lambda c: (c.ended_ns, -c.call_id)) if erroring else None
    error_id = evidence.ErrorCaptureId(root, 1) if thrower is not None else None
    for call in plan.calls:
        parent_key = keys[call.parent_call_id] if call.parent_call_id is not None else None
        key, ctx_tuple = program.context(engine, parent_key, call.function.function_id)
        keys[call.call_id] = key
        ctx = evidence.NormalContext(key)
        ref = CallRef(euid, engine, thread, call.call_id)
        selected = call.selected
        out.append(
            (call.started_ns, CctDelta(key, ctx_tuple, (1, 1 if selected else 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        )
        status = SPAN_STATUS[call.status]
        duration = call.ended_ns - call.started_ns
        completed = [0, 0, 0, 0]
        completed[int(status)] = 1
        out.append(
            (
                call.ended_ns,
                CctDelta(key, ctx_tuple, (0, 0, *completed, duration, child_time.get(call.call_id, 0), 0, 0)),
            )
        )
        if not selected:
            continue
        parent_ref = (
            CallRef(euid, engine, thread, call.parent_call_id) if call.parent_call_id is not None else None
        )
        site = ctx_tuple.call_site
        out.append(
            (
                call.started_ns,
                evidence.SpanStart(
                    ref,
                    parent_ref,
                    root,
                    ctx,
                    call.function.function_id,
                    site,
                    ctx_tuple.edge_kind,
                    call.started_ns,
                    SELECTION[call.function.kind],
                    evidence.ROLES_ALL,
                ),
            )
        )
        for v in call.values:
            if v.role == "input":
                out.append(
                    (
                        call.started_ns,
                        evidence.ValueOccurrence(ref, ctx, evidence.ValueRole.INPUT, _state(v.value, v.lost)),
                    )
                )
        out.append((call.ended_ns, evidence.SpanEnd(ref, call.ended_ns, status, duration)))
        for v in call.values:
            if v.role == "output":
                out.append(
                    (
                        call.ended_ns,
                        evidence.ValueOccurrence(
                            ref, ctx, evidence.ValueRole.OUTPUT, _state(v.value, v.lost)
                        ),
                    )
                )
            elif v.role == "error":
                assert error_id is not None
                if call is thrower:
                    source = (
                        evidence.ErrorSource.ENGINE_CALL
                        if call.function.kind is Kind.LLM
                        else evidence.ErrorSource.BYTECODE
                    )
                    out.append(
                        (
                            call.ended_ns,
                            evidence.ErrorCapture(
                                error_id,
                                ref,
                                ctx,
                                call.function.function_id,
                                None,
                                evidence.ErrorUnwindKind.FRESH,
                                source,
                                _state(v.value, v.lost),
                            ),
                        )
                    )
                out.append((call.ended_ns, evidence.TerminalErrorRef(ref, error_id)))
    out.append((plan.ended_ns, evidence.ThreadEnd(root, plan.ended_ns, THREAD_STATUS[plan.outcome])))
    out.sort(key=lambda item: item[0])  # stable: same-time records keep their causal order
    return out


def health(plan: ExecutionPlan) -> ms.HealthSnapshot:
    links = sum(1 for c in plan.calls for v in c.values if v.role == "error")
    if not links:
        return ms.HealthSnapshot()
    return ms.HealthSnapshot(
        applicable_error_unwinds=1,
        error_captures_queued=1,
        error_captures_committed=1,
        terminal_error_links_observed=links,
        terminal_error_links_queued=links,
        terminal_error_links_committed=links,
    )


def encode_data_segment(sequence: int, euid: bytes, groups: list[data_segment.DataGroup]) -> bytes:
    return data_segment.encode_data_segment(data_segment.DataSegment(sequence, euid, tuple(groups)))


def group_size(group: data_segment.DataGroup) -> int:
    return 65 + len(group.cct) + len(group.evidence)


def truth_values(call: CallPlan, ended: bool) -> list[TruthValue]:
    out = []
    for v in sorted(call.values, key=lambda v: ROLE_ORDER[v.role]):
        if v.role != "input" and not ended:
            continue
        if v.lost is not None:
            out.append(TruthValue(v.role, f"lost:{v.lost}", None, None))
        else:
            assert v.value is not None
            out.append(TruthValue(v.role, "available", v.value.cid_str, v.value.json))
    return out


def truth_spans(plan: ExecutionPlan, program: Program, cutoff_ns: int | None) -> list[TruthSpan]:
    """Every span of an undamaged execution, straight from its plan (the fast path)."""
    named = program.has_table(plan.engine_id)
    spans = []
    for call in plan.calls:
        if not call.selected or (cutoff_ns is not None and call.started_ns > cutoff_ns):
            continue
        ended = cutoff_ns is None or call.ended_ns <= cutoff_ns
        spans.append(
            TruthSpan(
                call_id=call.call_id,
                parent_call_id=call.parent_call_id,
                function=call.function.fqn if named else None,
                status=call.status if ended else None,
                started_ns=call.started_ns,
                ended_ns=call.ended_ns if ended else None,
                values=truth_values(call, ended),
            )
        )
    return spans
