"""Turning an execution plan into the records the profiler writes (through ``formats`` codecs).

Per selected call: ``SpanStart`` and the input ``ValueOccurrence`` at its start;
``SpanEnd``, the output ``ValueOccurrence``, an ``ErrorCapture`` where it throws and a
``TerminalErrorRef`` where it ends in error, at its end. The root thread has
``ThreadStart``/``ThreadEnd``. Every call, selected or not, adds CCT counter deltas:
``invocations_started`` when it starts, completion counters and times when it ends.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from formats import cas, cct, data_segment, evidence, function_table
from formats import meta_segment as ms
from formats.ids import CallRef, CallSite, ContextTuple, EdgeKind, ThreadRef, context_key
from formats.synth.plan import FUNCTIONS, CallPlan, ExecutionPlan, Kind, Outcome
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
SOURCE_FILE = {0: "invoices.baml", 1: "support.baml", 2: "billing.baml", 3: "utils.baml"}


def _file_id(fqn: str) -> int:
    top = fqn.split(".", 1)[0]
    return {"invoices": 0, "support": 1, "billing": 2, "utils": 3}[top]


def build_function_table() -> function_table.FunctionTable:
    entries = []
    for i, f in enumerate(FUNCTIONS):
        file_id = _file_id(f.fqn)
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
                source_span=function_table.FunctionSpan(file_id, 100 * i, 100 * i + 80),
                package_name="synth_app",
                namespace=f.namespace,
            )
        )
    files = tuple(function_table.FunctionFile(k, f"baml_src/{v}") for k, v in sorted(SOURCE_FILE.items()))
    return function_table.FunctionTable(tuple(entries), files)


class Program:
    """The compiled program every engine of a stream runs: function table, program ids, CCT keys."""

    def __init__(self, rng: random.Random) -> None:
        self.table = build_function_table()
        body = function_table.encode_function_table(self.table)
        self.table_cas_bytes = cas.encode_cas_object(cas.CODEC_FUNCTION_TABLE, body)
        self.table_cid = cas.value_cid(cas.CODEC_FUNCTION_TABLE, body)
        self.source_label = hashlib.sha256(b"synth-source-snapshot").hexdigest()
        self._rng = rng
        self._program_ids: dict[int, bytes] = {}
        self._contexts: dict[tuple[int, bytes | None, int], tuple[bytes, ContextTuple]] = {}

    def program_id(self, engine_id: int) -> bytes:
        pid = self._program_ids.get(engine_id)
        if pid is None:  # random per engine, as the real engine does today
            pid = self._program_ids[engine_id] = self._rng.randbytes(16)
        return pid

    def engine_started(self, engine_id: int) -> ms.EngineStarted:
        return ms.EngineStarted(
            engine_id, self.program_id(engine_id), self.table_cid, None, self.source_label
        )

    def context(
        self, engine_id: int, parent_key: bytes | None, function_id: int
    ) -> tuple[bytes, ContextTuple]:
        cache_key = (engine_id, parent_key, function_id)
        found = self._contexts.get(cache_key)
        if found is None:
            site = None
            if parent_key is not None:
                line = 10 + function_id * 7
                site = CallSite(_file_id(FUNCTIONS[function_id].fqn), line * 40, line * 40 + 24, line)
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
        if isinstance(item, _CctDelta):
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
class _CctDelta:
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
    unwind = 0
    error_id: evidence.ErrorCaptureId | None = None
    for call in plan.calls:
        parent_key = keys[call.parent_call_id] if call.parent_call_id is not None else None
        key, ctx_tuple = program.context(engine, parent_key, call.function.function_id)
        keys[call.call_id] = key
        ctx = evidence.NormalContext(key)
        ref = CallRef(euid, engine, thread, call.call_id)
        selected = call.selected
        out.append(
            (call.started_ns, _CctDelta(key, ctx_tuple, (1, 1 if selected else 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        )
        status = SPAN_STATUS[call.status]
        duration = call.ended_ns - call.started_ns
        completed = [0, 0, 0, 0]
        completed[int(status)] = 1
        out.append(
            (
                call.ended_ns,
                _CctDelta(
                    key, ctx_tuple, (0, 0, *completed, duration, child_time.get(call.call_id, 0), 0, 0)
                ),
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
                if error_id is None:  # the first (throwing) call captures; callers link to the same capture
                    unwind += 1
                    error_id = evidence.ErrorCaptureId(root, unwind)
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
    spans = []
    for call in plan.calls:
        if not call.selected or (cutoff_ns is not None and call.started_ns > cutoff_ns):
            continue
        ended = cutoff_ns is None or call.ended_ns <= cutoff_ns
        spans.append(
            TruthSpan(
                call_id=call.call_id,
                parent_call_id=call.parent_call_id,
                function=call.function.fqn,
                status=call.status if ended else None,
                started_ns=call.started_ns,
                ended_ns=call.ended_ns if ended else None,
                values=truth_values(call, ended),
            )
        )
    return spans
