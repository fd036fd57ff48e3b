"""What a reader of a (possibly damaged) synthetic stream finds for each execution: the truth.

Pure. A :class:`StreamView` says which meta and data sequences remain readable on disk;
:func:`judge` applies the upstream reader's rules to one execution's :class:`Placement`:

* index: ``index_gaps`` / ``index_state`` of :mod:`formats.reader_rules` (RootStarted and
  RootEnded count only where their meta object remains; RootEnded flag bit 0 is
  ``root_started_lost``); an execution with neither record on disk is not listed at all;
* data (``reader.rs`` ``ExecutionReader::load``): the range read is the RootEnded's
  ``[data_first_seq, data_last_seq]``, or, without a RootEnded, from just above the
  RootStarted's ``data_high_water`` to the stream's highest data sequence; each missing or
  undecodable sequence in it is a data issue (``missing_data_segment N`` /
  ``corrupt_data_segment N``) and, with a RootEnded, makes the execution ``index_corrupt``;
* spans: evidence is keyed by call, and a span is kept whenever any fact for it survives, so a
  span whose SpanStart was in a lost segment keeps its end, output and error (its function,
  parent and start are null); an error value needs both the TerminalErrorRef and the
  ErrorCapture it names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from formats import cas, evidence
from formats.reader_rules import index_gaps, index_state, open_status
from formats.synth import facts as fx
from formats.synth.placement import Placement
from formats.synth.plan import FQN_BY_ID
from formats.synth.truth import TruthExecution, TruthSpan, TruthValue
from formats.synth.values import PooledValue

ROLE_NAMES = {evidence.ValueRole.INPUT: "input", evidence.ValueRole.OUTPUT: "output"}


@dataclass(frozen=True)
class StreamView:
    """The sequences a reader finds in one closed stream."""

    meta_max: int
    data_max: int
    missing_meta: frozenset[int] = frozenset()
    missing_data: frozenset[int] = frozenset()
    corrupt_data: frozenset[int] = frozenset()
    gaps: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        gaps: list[int] = []
        if self.missing_meta:  # an intact view is built per execution: keep it O(1)
            present = [s for s in range(1, self.meta_max + 1) if s not in self.missing_meta]
            gaps = index_gaps(self.meta_max, present, present, alive=False)
        object.__setattr__(self, "gaps", tuple(gaps))

    @property
    def intact(self) -> bool:
        return not (self.missing_meta or self.missing_data or self.corrupt_data)

    def meta_readable(self, seq: int | None) -> bool:
        return seq is not None and seq not in self.missing_meta

    def data_issue(self, seq: int) -> str | None:
        if seq in self.missing_data:
            return f"missing_data_segment {seq}"
        if seq in self.corrupt_data:
            return f"corrupt_data_segment {seq}"
        return None


def judge(
    p: Placement, view: StreamView, program: fx.Program, *, stream: str, zero_unix_ns: int, interval_ns: int
) -> TruthExecution | None:
    """The truth of one execution as a reader of ``view`` sees it; None when it is not listed."""
    plan = p.plan
    started = p.started_seq if view.meta_readable(p.started_seq) else None
    ended = p.ended_seq if view.meta_readable(p.ended_seq) else None
    if started is None and ended is None:
        return None  # no index record left: an orphan, found only by scanning data
    if ended is not None:
        loaded = range(p.first, p.last + 1) if p.count and p.first else range(0)
    else:
        loaded = range(p.started_high_water + 1, view.data_max + 1)
    issues: list[str] = []
    if view.missing_data or view.corrupt_data:
        issues = [issue for seq in loaded if (issue := view.data_issue(seq)) is not None]
    state = index_state(
        started_seq=started,
        ended_seq=ended,
        root_started_lost=ended is not None and p.root_started_lost,
        gaps=view.gaps,
        data_intact=not issues,
    )
    if ended is not None:
        first, last = (p.first, p.last) if p.count else (None, None)
    else:
        held = sorted(s for s in p.segments.values() if view.data_issue(s) is None)
        first, last = (held[0], held[-1]) if held else (None, None)
    if view.intact:
        spans = fx.truth_spans(plan, program, p.cutoff_ns)
    else:

        def readable(t_ns: int) -> bool:
            seq = p.segments.get(t_ns // interval_ns)
            return seq is not None and seq in loaded and view.data_issue(seq) is None

        emitted = fx.emissions(plan, p.root, program)
        facts = [
            item
            for t, item in emitted
            if (p.cutoff_ns is None or t <= p.cutoff_ns) and readable(t) and not isinstance(item, fx.CctDelta)
        ]
        named = program.has_table(plan.engine_id)
        spans = spans_from_facts(facts, lambda fid: FQN_BY_ID.get(fid) if named else None, _values_by_cid(p))
    return TruthExecution(
        stream=stream,
        execution_id=p.root.execution_id,
        status=fx.STATUS_NAME[plan.outcome] if ended is not None else open_status(False),
        index_state=state,
        started_unix_ns=zero_unix_ns + plan.started_ns if started is not None else None,
        ended_unix_ns=zero_unix_ns + plan.ended_ns if ended is not None else None,
        data_first_seq=first,
        data_last_seq=last,
        spans=spans,
        data_issues=issues,
    )


def _values_by_cid(p: Placement) -> dict[bytes, PooledValue]:
    return {ref.value.cid: ref.value for c in p.plan.calls for ref in c.values if ref.value is not None}


@dataclass
class _SpanFacts:
    start: evidence.SpanStart | None = None
    end: evidence.SpanEnd | None = None
    values: dict[str, evidence.ValueState] = field(default_factory=dict)
    terminal: evidence.TerminalErrorTarget | None = None


def _state_name(state: evidence.ValueState) -> str:
    if isinstance(state, evidence.ValueAvailable):
        return "available"
    return f"lost:{state.reason.name.lower()}"


def _value(role: str, state: evidence.ValueState, values: dict[bytes, PooledValue]) -> TruthValue:
    if isinstance(state, evidence.ValueAvailable):
        pooled = values.get(state.cid)
        json: Any = pooled.json if pooled is not None else None
        return TruthValue(role, "available", cas.cid_to_string(state.cid), json)
    return TruthValue(role, _state_name(state), None, None)


def spans_from_facts(
    facts: Iterable[Any],
    function_name: Callable[[int], str | None],
    values: dict[bytes, PooledValue],
) -> list[TruthSpan]:
    """Spans keyed by call as ``ExecutionReader::load`` folds them, in the truth's shape."""
    spans: dict[int, _SpanFacts] = {}
    captures: dict[tuple[bytes, int], evidence.ValueState] = {}
    for fact in facts:
        if isinstance(fact, evidence.SpanStart):
            spans.setdefault(fact.call_ref.call_id, _SpanFacts()).start = fact
        elif isinstance(fact, evidence.SpanEnd):
            spans.setdefault(fact.call_ref.call_id, _SpanFacts()).end = fact
        elif isinstance(fact, evidence.SpanRuntimeId):
            spans.setdefault(fact.call_ref.call_id, _SpanFacts())
        elif isinstance(fact, evidence.ValueOccurrence):
            spans.setdefault(fact.call_ref.call_id, _SpanFacts()).values[ROLE_NAMES[fact.role]] = fact.state
        elif isinstance(fact, evidence.TerminalErrorRef):
            spans.setdefault(fact.call_ref.call_id, _SpanFacts()).terminal = fact.target
        elif isinstance(fact, evidence.ErrorCapture):
            captures[(fact.id.thread_ref.to_bytes(), fact.id.unwind_ordinal)] = fact.value
    out: list[TruthSpan] = []
    for call_id in sorted(spans):
        s = spans[call_id]
        found: list[TruthValue] = [_value(role, state, values) for role, state in s.values.items()]
        if isinstance(s.terminal, evidence.ErrorCaptureId):
            state = captures.get((s.terminal.thread_ref.to_bytes(), s.terminal.unwind_ordinal))
            if state is not None:  # a link whose capture is unreadable is a dangling reference
                found.append(_value("error", state, values))
        elif s.terminal is not None:
            found.append(
                _value("error", evidence.ValueLost(evidence.ValueLossReason.STORE_UNAVAILABLE), values)
            )
        found.sort(key=lambda v: fx.ROLE_ORDER[v.role])
        start, end = s.start, s.end
        out.append(
            TruthSpan(
                call_id=call_id,
                parent_call_id=start.parent_call_ref.call_id
                if start is not None and start.parent_call_ref is not None
                else None,
                function=function_name(start.function_id) if start is not None else None,
                status=end.status.name.lower() if end is not None else None,
                started_ns=start.started_ns if start is not None else None,
                ended_ns=end.ended_ns if end is not None else None,
                values=found,
            )
        )
    return out
