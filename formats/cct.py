"""CCT payloads: counter deltas per call path (real source ``cct_codec.rs``, version 1).

Layout::

    u64 context_count
    context_count × ( key[32] ‖ u8 has_tuple ‖ [tuple] ‖ counters )
    u64 overflow_count
    overflow_count × ( u8 reason ‖ u8 edge_kind ‖ counters )

    tuple    = program_id[16] ‖ opt parent_key[32] ‖ u32 function_id
               ‖ opt call_site(u32 file_id, u32 start_offset, u32 end_offset, u32 line) ‖ u8 edge_kind
    counters = 6 × u64 (invocations_started, spans_selected, completed_ok, completed_error,
               completed_cancelled, completed_exit) ‖ 3 × u128 (inclusive_ns,
               direct_call_child_inclusive_ns, await_ns) ‖ u64 await_count        (104 bytes)

The group's ``cct_health`` byte holds three saturation bits (bits 3-7 must be
zero). A context that carries a tuple must carry the tuple's key; the number of
contexts plus overflow entries must equal the group's ``cct_record_count``.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from formats.errors import MalformedError
from formats.ids import CallSite, ContextTuple, EdgeKind, context_key
from formats.wire import EncodeError, Reader, Writer, enum_members

_COUNTERS = struct.Struct(">QQQQQQQQQQQQQ")  # 6 u64, 3 u128 as (hi, lo) pairs, 1 u64
COUNTERS_LEN = _COUNTERS.size
_CONTEXT_MIN = 32 + 1 + COUNTERS_LEN  # 137, the real decoder's bound
_OVERFLOW_MIN = 2 + COUNTERS_LEN  # 106
_SITE = struct.Struct(">IIII")
_U64 = (1 << 64) - 1


class OverflowReason(enum.IntEnum):
    CONTEXT_MEMORY_UNAVAILABLE_AFTER_DRAIN = 0
    INVALID_PARENT_CONTEXT = 1


@dataclass(frozen=True, slots=True)
class CounterHealth:
    counter_saturated: bool = False
    await_counter_saturated: bool = False
    self_time_underflow: bool = False

    def to_byte(self) -> int:
        return (
            int(self.counter_saturated)
            | int(self.await_counter_saturated) << 1
            | int(self.self_time_underflow) << 2
        )

    @classmethod
    def from_byte(cls, bits: int) -> CounterHealth:
        return cls(bool(bits & 1), bool(bits & 2), bool(bits & 4))


HEALTH_MASK = 0b111
# Every valid health byte decoded once (immutable, so shared).
_HEALTH = tuple(CounterHealth.from_byte(bits) for bits in range(HEALTH_MASK + 1))


@dataclass(frozen=True, slots=True)
class CctCounters:
    invocations_started: int = 0
    spans_selected: int = 0
    completed_ok: int = 0
    completed_error: int = 0
    completed_cancelled: int = 0
    completed_exit: int = 0
    inclusive_ns: int = 0
    direct_call_child_inclusive_ns: int = 0
    await_ns: int = 0
    await_count: int = 0


@dataclass(frozen=True, slots=True)
class ContextDelta:
    key: bytes
    tuple: ContextTuple | None
    counters: CctCounters

    @classmethod
    def for_tuple(cls, t: ContextTuple, counters: CctCounters) -> ContextDelta:
        return cls(context_key(t), t, counters)


@dataclass(frozen=True, slots=True)
class OverflowDelta:
    reason: OverflowReason
    edge_kind: EdgeKind
    counters: CctCounters


@dataclass(frozen=True, slots=True)
class CctPayload:
    contexts: tuple[ContextDelta, ...] = ()
    overflow: tuple[OverflowDelta, ...] = ()

    @property
    def record_count(self) -> int:
        return len(self.contexts) + len(self.overflow)


# -- encode ------------------------------------------------------------------------------


def _counters(w: Writer, c: CctCounters) -> None:
    try:
        w.raw(
            _COUNTERS.pack(
                c.invocations_started,
                c.spans_selected,
                c.completed_ok,
                c.completed_error,
                c.completed_cancelled,
                c.completed_exit,
                c.inclusive_ns >> 64,
                c.inclusive_ns & _U64,
                c.direct_call_child_inclusive_ns >> 64,
                c.direct_call_child_inclusive_ns & _U64,
                c.await_ns >> 64,
                c.await_ns & _U64,
                c.await_count,
            )
        )
    except struct.error as exc:
        raise EncodeError(f"CCT counter out of range: {exc}") from None


def _tuple(w: Writer, t: ContextTuple) -> None:
    w.fixed(t.program_id, 16, "program_id")
    w.flag(t.parent_key is not None)
    if t.parent_key is not None:
        w.fixed(t.parent_key, 32, "parent_key")
    w.u32(t.function_id, "function_id")
    w.flag(t.call_site is not None)
    if t.call_site is not None:
        s = t.call_site
        w.raw(_SITE.pack(s.file_id, s.start_offset, s.end_offset, s.line))
    w.u8(int(t.edge_kind), "edge_kind")


def encode_cct_payload(payload: CctPayload) -> bytes:
    """Encode contexts and overflow entries in the given order (the profiler sorts contexts by key)."""
    w = Writer()
    w.u64(len(payload.contexts))
    for ctx in payload.contexts:
        w.fixed(ctx.key, 32, "context key")
        w.flag(ctx.tuple is not None)
        if ctx.tuple is not None:
            _tuple(w, ctx.tuple)
        _counters(w, ctx.counters)
    w.u64(len(payload.overflow))
    for ov in payload.overflow:
        w.u8(int(ov.reason), "overflow reason")
        w.u8(int(ov.edge_kind), "edge_kind")
        _counters(w, ov.counters)
    return w.getvalue()


# -- decode ------------------------------------------------------------------------------


_EDGEKIND = enum_members(EdgeKind)
_OVERFLOWREASON = enum_members(OverflowReason)


def _read_counters(r: Reader) -> CctCounters:
    v = r.unpack(_COUNTERS, "counters")
    return CctCounters(
        v[0], v[1], v[2], v[3], v[4], v[5], v[6] << 64 | v[7], v[8] << 64 | v[9], v[10] << 64 | v[11], v[12]
    )


def _read_tuple(r: Reader) -> ContextTuple:
    program_id = r.fixed(16, "program_id")
    parent = r.fixed(32, "parent_key") if r.flag("parent_key") else None
    function_id = r.u32("function_id")
    site = CallSite(*r.unpack(_SITE, "call_site")) if r.flag("call_site") else None
    edge = _EDGEKIND[r.tag("edge_kind", len(_EDGEKIND))]
    return ContextTuple(program_id, parent, function_id, site, edge)


# Context tuples recur: every execution of a program walks the same call paths, so each distinct
# encoded context head (key, tuple flag and tuple) is decoded, and its key checked, once per
# process. A head is only remembered after it decoded and its key matched; its bytes then stand
# for that result. Cleared when full: about 740 bytes a head (measured), 6 MB at most; a program
# has one head per distinct call path, the synthetic profile 36.
_HEADS: dict[bytes, tuple[bytes, ContextTuple]] = {}
HEAD_CACHE_ENTRIES = 8_192


def _head_len(data: bytes, at: int, end: int) -> int:
    """The length of the context head at ``at`` when it carries a tuple whose presence flags are
    well formed, else 0 (the head is then decoded field by field, which names what is wrong)."""
    flag = at + 32
    parent = flag + 17  # the tuple flag, then program_id
    if parent >= end or data[flag] != 1:
        return 0
    has_parent = data[parent]
    site = parent + 1 + 32 * has_parent + 4  # function_id
    if has_parent > 1 or site >= end:
        return 0
    has_site = data[site]
    n = site + 1 + 16 * has_site + 1 - at  # edge_kind
    return n if has_site <= 1 and at + n <= end else 0


def _read_head(r: Reader) -> tuple[bytes, ContextTuple | None]:
    """A context's key and tuple, field by field; the key must be the tuple's SHA-256."""
    at = r.pos
    key = r.fixed(32, "context key")
    t = _read_tuple(r) if r.flag("tuple") else None
    if t is not None and context_key(t) != key:
        r.fail(
            MalformedError,
            "context key is not the SHA-256 of its tuple",
            reason="context_key_mismatch",
            at=at,
        )
    return key, t


def _head(r: Reader, data: bytes, limit: int) -> tuple[bytes, ContextTuple | None]:
    """The context head at the reader's position: remembered, or read (and remembered if it has a
    tuple)."""
    at = r.pos
    n = _head_len(data, at, limit)
    if not n:
        return _read_head(r)
    raw = bytes(data[at : at + n])
    head = _HEADS.get(raw)
    if head is not None:
        r.region(n, "context head")
        return head
    key, t = _read_head(r)
    assert t is not None  # _head_len saw the tuple flag set
    if len(_HEADS) >= HEAD_CACHE_ENTRIES:
        _HEADS.clear()
    _HEADS[raw] = (key, t)
    return key, t


def decode_cct_health(bits: int, *, file: str | None = None, offset: int | None = None) -> CounterHealth:
    if bits & ~HEALTH_MASK:
        raise MalformedError(
            f"cct_health {bits:#04x} sets reserved bits", file=file, offset=offset, reason="invalid_health"
        )
    return _HEALTH[bits]


def decode_cct_payload(
    data: bytes,
    record_count: int,
    *,
    file: str | None = None,
    base: int = 0,
    start: int = 0,
    end: int | None = None,
) -> CctPayload:
    """Decode ``data[start:end]`` (at absolute offset ``base + start`` in ``file``)."""
    r = Reader(data, file=file, start=start, end=end, base=base)
    count = r.u64("context_count")
    r.check_count(count, _CONTEXT_MIN, "context_count")
    limit = len(data) if end is None else min(end, len(data))
    contexts = []
    for _ in range(count):
        key, t = _head(r, data, limit)
        contexts.append(ContextDelta(key, t, _read_counters(r)))
    overflow_count = r.u64("overflow_count")
    r.check_count(overflow_count, _OVERFLOW_MIN, "overflow_count")
    overflow = []
    for _ in range(overflow_count):
        reason = _OVERFLOWREASON[r.tag("overflow reason", len(_OVERFLOWREASON))]
        edge = _EDGEKIND[r.tag("edge_kind", len(_EDGEKIND))]
        overflow.append(OverflowDelta(reason, edge, _read_counters(r)))
    r.finish("CCT payload")
    if count + overflow_count != record_count:
        r.fail(
            MalformedError,
            f"payload holds {count + overflow_count} records, group header says {record_count}",
            reason="record_count_mismatch",
            at=start,
        )
    return CctPayload(tuple(contexts), tuple(overflow))
