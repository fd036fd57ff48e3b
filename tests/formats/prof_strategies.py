"""Hypothesis strategies for the profiler-store records (meta, data, CCT, evidence, tables)."""

from __future__ import annotations

from hypothesis import strategies as st

from formats.cct import CctCounters, CctPayload, ContextDelta, CounterHealth, OverflowDelta, OverflowReason
from formats.data_segment import DataGroup, DataSegment
from formats.evidence import (
    CallScope,
    ErrorCapture,
    ErrorCaptureId,
    ErrorCaptureLossReason,
    ErrorSource,
    ErrorTargetLost,
    ErrorUnwindKind,
    FunctionEndStatus,
    LogEvent,
    NormalContext,
    OverflowContext,
    OverflowReasonTag,
    RuntimeIdAnnotation,
    SpanEnd,
    SpanRuntimeId,
    SpanStart,
    TerminalErrorRef,
    ThreadEnd,
    ThreadEndStatus,
    ThreadStart,
    ThreadStartKind,
    ThrowSite,
    ValueAvailable,
    ValueLossReason,
    ValueLost,
    ValueOccurrence,
    ValueRole,
)
from formats.function_table import FunctionEntry, FunctionFile, FunctionSpan, FunctionTable
from formats.ids import CallRef, CallSite, ContextTuple, EdgeKind, ThreadRef
from formats.meta_segment import (
    HEALTH_COUNT,
    EngineStarted,
    ExecutionEndStatus,
    HealthSnapshot,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
u64 = st.integers(0, (1 << 64) - 1)
u128 = st.integers(0, (1 << 128) - 1)
b16 = st.binary(min_size=16, max_size=16)
b32 = st.binary(min_size=32, max_size=32)
text = st.text(max_size=24)
euids = b16

thread_refs = st.builds(ThreadRef, euids, u64, u64)
call_refs = st.builds(CallRef, euids, u64, u64, u64)
call_sites = st.builds(CallSite, u32, u32, u32, u32)
edge_kinds = st.sampled_from(EdgeKind)

# -- meta --------------------------------------------------------------------------------

health = st.lists(u64, min_size=HEALTH_COUNT, max_size=HEALTH_COUNT).map(lambda v: HealthSnapshot(*v))
engine_started = st.builds(EngineStarted, u64, b16, st.none() | b32, st.none() | text, st.none() | text)
root_started = st.builds(RootStarted, thread_refs, u64, b16)
root_ended = st.builds(
    RootEnded, thread_refs, u64, st.sampled_from(ExecutionEndStatus), u8, u64, u64, u64, health
)
stream_started = st.builds(StreamStarted, u32, u64, text, text)


@st.composite
def meta_segments(draw: st.DrawFn) -> MetaSegment:
    sequence = draw(st.integers(1, 50))
    records = draw(st.lists(engine_started | root_started | root_ended, max_size=6))
    if sequence == 1 and draw(st.booleans()):
        records.insert(0, draw(stream_started))
    return MetaSegment(sequence, draw(euids), draw(u64), tuple(records))


# -- CCT --------------------------------------------------------------------------------

counters = st.builds(CctCounters, u64, u64, u64, u64, u64, u64, u128, u128, u128, u64)
tuples = st.builds(ContextTuple, b16, st.none() | b32, u32, st.none() | call_sites, edge_kinds)
contexts = st.one_of(
    st.builds(ContextDelta.for_tuple, tuples, counters),
    st.builds(ContextDelta, b32, st.none(), counters),
)
overflows = st.builds(OverflowDelta, st.sampled_from(OverflowReason), edge_kinds, counters)
cct_payloads = st.builds(
    CctPayload, st.lists(contexts, max_size=4).map(tuple), st.lists(overflows, max_size=3).map(tuple)
)
counter_health = st.builds(CounterHealth, st.booleans(), st.booleans(), st.booleans())

# -- evidence --------------------------------------------------------------------------

context_refs = st.one_of(
    st.builds(NormalContext, b32), st.builds(OverflowContext, st.sampled_from(OverflowReasonTag), edge_kinds)
)
value_states = st.one_of(
    st.builds(ValueAvailable, b32, u16, u64), st.builds(ValueLost, st.sampled_from(ValueLossReason))
)
error_ids = st.builds(ErrorCaptureId, thread_refs, u64)
thread_names = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 256)

span_starts = st.builds(
    SpanStart,
    call_refs,
    st.none() | call_refs,
    thread_refs,
    context_refs,
    u32,
    st.none() | call_sites,
    edge_kinds,
    u64,
    st.integers(0, 7),
    st.integers(0, 7),
    st.none() | st.builds(RuntimeIdAnnotation, u32, b16),
)
value_occurrences = st.builds(
    ValueOccurrence, call_refs, context_refs, st.sampled_from(ValueRole), value_states
)
facts = st.one_of(
    span_starts,
    st.builds(SpanEnd, call_refs, u64, st.sampled_from(FunctionEndStatus), u64),
    st.builds(SpanRuntimeId, call_refs, u32, b16),
    value_occurrences,
    st.builds(
        ErrorCapture,
        error_ids,
        call_refs,
        context_refs,
        u32,
        st.none() | st.builds(ThrowSite, u32, u32, u32, u32),
        st.sampled_from(ErrorUnwindKind),
        st.sampled_from(ErrorSource),
        value_states,
    ),
    st.builds(
        TerminalErrorRef,
        call_refs,
        error_ids | st.builds(ErrorTargetLost, st.sampled_from(ErrorCaptureLossReason)),
    ),
    st.builds(
        ThreadStart,
        thread_refs,
        st.none() | thread_refs,
        st.none() | call_refs,
        st.none() | call_sites,
        u64,
        st.sampled_from(ThreadStartKind),
        thread_names,
    ),
    st.builds(ThreadEnd, thread_refs, u64, st.sampled_from(ThreadEndStatus)),
    st.builds(
        LogEvent,
        st.none() | call_refs,
        u64,
        st.none() | text,
        st.none() | call_sites,
        st.none() | u32,
        st.none() | text,
        st.none() | text,
        st.none() | text,
        value_states,
        value_states,
    ),
    st.builds(CallScope, call_refs, st.none() | text, value_states),
)
fact_lists = st.lists(facts, max_size=8)


@st.composite
def data_segments(draw: st.DrawFn) -> DataSegment:
    euid = draw(euids)
    roots = draw(st.lists(st.builds(ThreadRef, st.just(euid), u64, u64), max_size=4, unique=True))
    groups = []
    for root in sorted(roots, key=lambda r: r.to_bytes()):
        cct = draw(st.none() | cct_payloads)
        ev = draw(st.none() | fact_lists)
        if cct is None and ev is None:
            ev = [ThreadEnd(root, 1, ThreadEndStatus.COMPLETED)]
        groups.append(DataGroup.build(root, cct=cct, facts=ev, cct_health=draw(counter_health)))
    return DataSegment(draw(st.integers(1, 1000)), euid, tuple(groups))


# -- function tables -------------------------------------------------------------------


@st.composite
def function_tables(draw: st.DrawFn) -> FunctionTable:
    ids = sorted(draw(st.sets(u32, max_size=5)))
    entries = tuple(
        FunctionEntry(
            fid,
            draw(text),
            draw(text),
            draw(st.none() | text),
            draw(u8),
            draw(st.none() | text),
            draw(u8),
            draw(st.none() | text),
            draw(st.none() | st.builds(FunctionSpan, u32, u32, u32)),
            draw(st.none() | text),
            tuple(draw(st.lists(text, max_size=3))),
        )
        for fid in ids
    )
    file_ids = sorted(draw(st.sets(u32, max_size=4)))
    return FunctionTable(entries, tuple(FunctionFile(f, draw(text)) for f in file_ids))
