"""Evidence payloads: facts for selected calls (real source ``evidence_codec.rs``, ``evidence.rs``).

Payload::

    u64 count
    count × ( u8 tag ‖ u32 body_len ‖ body )

Tags and bodies (``CallRef`` = ThreadRef[32] ‖ u64 call_id; ``site`` = opt
(u32 file_id, start_offset, end_offset, line); ``ctx`` = u8 0 ‖ key[32] or
u8 1 ‖ u8 overflow_reason ‖ u8 edge_kind; ``state`` = u8 0 ‖ cid[32] ‖ u16 codec
‖ u64 encoded_bytes or u8 1 ‖ u8 loss_reason)::

    0 SpanStart        CallRef ‖ opt CallRef parent ‖ ThreadRef ‖ ctx ‖ u32 function_id ‖ site
                       ‖ u8 edge_kind ‖ u64 started_ns ‖ u8 selection_reasons ‖ u8 roles
                       ‖ opt (u32 annotation_ordinal ‖ runtime_id[16])
    1 SpanEnd          CallRef ‖ u64 ended_ns ‖ u8 status ‖ u64 inclusive_ns
    2 SpanRuntimeId    CallRef ‖ u32 annotation_ordinal ‖ runtime_id[16]
    3 ValueOccurrence  CallRef ‖ ctx ‖ u8 role (0 input, 1 output) ‖ state
    4 ErrorCapture     nested record "BAMLERR1" ‖ u16 version=1 ‖ ThreadRef ‖ u64 unwind_ordinal
                       ‖ CallRef ‖ ctx ‖ u32 function_id ‖ opt (u32 file_id, line, start, end)
                       ‖ u8 kind ‖ u8 source ‖ state
    5 TerminalErrorRef nested record "BAMLTER1" ‖ u16 version=1 ‖ CallRef
                       ‖ (u8 0 ‖ ThreadRef ‖ u64 unwind_ordinal | u8 1 ‖ u8 error_loss_reason)
    6 ThreadStart      ThreadRef ‖ opt ThreadRef parent ‖ opt CallRef spawn_call ‖ site ‖ u64 started_ns
                       ‖ u8 kind ‖ u32 name_len (≤ 256) ‖ name
    7 ThreadEnd        ThreadRef ‖ u64 ended_ns ‖ u8 status
    8 LogEvent         opt CallRef ‖ u64 timestamp_ms ‖ opt str64 level ‖ site ‖ opt u32 column
                       ‖ opt str64 message_preview ‖ opt str64 event_name ‖ opt str64 distinct_id
                       ‖ state context ‖ state data
    9 CallScope        CallRef ‖ opt str64 distinct_id ‖ state context

``str64`` is ``u64 length`` + UTF-8 (tags 8 and 9 only). Tags 8 and 9 are in the
newest real source and not in the publisher guide. Every body must be consumed
exactly; unknown tags and enum values are malformed.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from formats.errors import BadMagicError, LimitExceededError, MalformedError, UnsupportedVersionError
from formats.ids import CallRef, CallSite, EdgeKind, ThreadRef
from formats.wire import EncodeError, Reader, Writer, enum_members

ERROR_CAPTURE_MAGIC = b"BAMLERR1"
TERMINAL_ERROR_MAGIC = b"BAMLTER1"
ERROR_CODEC_VERSION = 1
MAX_THREAD_NAME_LEN = 256
_FACT_MIN = 5  # u8 tag + u32 body_len

_REF = struct.Struct(">16sQQ")
_CALL = struct.Struct(">16sQQQ")
_SITE = struct.Struct(">IIII")
_AVAILABLE = struct.Struct(">32sHQ")
_SPAN_END = struct.Struct(">16sQQQQBQ")
_THREAD_END = struct.Struct(">16sQQQB")


class FactTag(enum.IntEnum):
    SPAN_START = 0
    SPAN_END = 1
    SPAN_RUNTIME_ID = 2
    VALUE_OCCURRENCE = 3
    ERROR_CAPTURE = 4
    TERMINAL_ERROR_REF = 5
    THREAD_START = 6
    THREAD_END = 7
    LOG_EVENT = 8
    CALL_SCOPE = 9


class FunctionEndStatus(enum.IntEnum):
    OK = 0
    ERRORED = 1
    CANCELLED = 2
    EXITED = 3


class ThreadEndStatus(enum.IntEnum):
    COMPLETED = 0
    CANCELLED = 1
    ERRORED = 2


class ThreadStartKind(enum.IntEnum):
    ROOT = 0
    SPAWN = 1


class ValueRole(enum.IntEnum):
    INPUT = 0
    OUTPUT = 1


class ValueLossReason(enum.IntEnum):
    VALUE_MEMORY_EXCEEDED = 0
    VALUE_ATTEMPT_TRANSPORT_EXCEEDED = 1
    ERROR_CAPTURE_ATTEMPT_TRANSPORT_EXCEEDED = 2
    VALUE_TOO_LARGE = 3
    COPY_FAILED = 4
    ENCODE_FAILED = 5
    CAS_WRITE_FAILED = 6
    CAS_CONFLICT = 7
    DISK_GUARD_EXCEEDED = 8
    EVIDENCE_SEGMENT_PUBLISH_FAILED = 9
    STORE_UNAVAILABLE = 10


class ErrorCaptureLossReason(enum.IntEnum):
    ERROR_CAPTURE_ATTEMPT_TRANSPORT_EXCEEDED = 0
    MISSING_STRUCTURAL_JOIN = 1
    START_UNCOMMITTED = 2
    EVIDENCE_QUEUE_FULL = 3
    EVIDENCE_SEGMENT_PUBLISH_FAILED = 4
    DISK_GUARD_EXCEEDED = 5
    STORE_UNAVAILABLE = 6


class ErrorUnwindKind(enum.IntEnum):
    FRESH = 0
    RETHROW = 1


class ErrorSource(enum.IntEnum):
    BYTECODE = 0
    NATIVE_CALL = 1
    ENGINE_CALL = 2
    FUTURE_RESUME = 3


class OverflowReasonTag(enum.IntEnum):
    """Same wire tags as :class:`formats.cct.OverflowReason` (kept here to avoid a cycle)."""

    CONTEXT_MEMORY_UNAVAILABLE_AFTER_DRAIN = 0
    INVALID_PARENT_CONTEXT = 1


ROLE_INPUT = 1
ROLE_OUTPUT = 2
ROLE_ERROR = 4
ROLES_ALL = 7
SELECTED_ROOT = 1
SELECTED_LLM = 2
SELECTED_MANUAL = 4


# -- shared pieces ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NormalContext:
    key: bytes


@dataclass(frozen=True, slots=True)
class OverflowContext:
    reason: OverflowReasonTag
    edge_kind: EdgeKind


ContextRef = NormalContext | OverflowContext


@dataclass(frozen=True, slots=True)
class ValueAvailable:
    cid: bytes
    codec: int
    encoded_bytes: int


@dataclass(frozen=True, slots=True)
class ValueLost:
    reason: ValueLossReason


ValueState = ValueAvailable | ValueLost


@dataclass(frozen=True, slots=True)
class RuntimeIdAnnotation:
    annotation_ordinal: int
    runtime_id: bytes


@dataclass(frozen=True, slots=True)
class ErrorCaptureId:
    thread_ref: ThreadRef
    unwind_ordinal: int


@dataclass(frozen=True, slots=True)
class ErrorTargetLost:
    reason: ErrorCaptureLossReason


TerminalErrorTarget = ErrorCaptureId | ErrorTargetLost


@dataclass(frozen=True, slots=True)
class ThrowSite:
    """Wire order differs from :class:`CallSite`: file_id, line, start_offset, end_offset."""

    file_id: int
    line: int
    start_offset: int
    end_offset: int


# -- facts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpanStart:
    call_ref: CallRef
    parent_call_ref: CallRef | None
    thread_ref: ThreadRef
    context_ref: ContextRef
    function_id: int
    call_site: CallSite | None
    edge_kind: EdgeKind
    started_ns: int
    selection_reasons: int
    roles: int
    runtime_id: RuntimeIdAnnotation | None = None


@dataclass(frozen=True, slots=True)
class SpanEnd:
    call_ref: CallRef
    ended_ns: int
    status: FunctionEndStatus
    inclusive_ns: int


@dataclass(frozen=True, slots=True)
class SpanRuntimeId:
    call_ref: CallRef
    annotation_ordinal: int
    runtime_id: bytes


@dataclass(frozen=True, slots=True)
class ValueOccurrence:
    call_ref: CallRef
    context_ref: ContextRef
    role: ValueRole
    state: ValueState


@dataclass(frozen=True, slots=True)
class ErrorCapture:
    id: ErrorCaptureId
    throw_call_ref: CallRef
    throw_context_ref: ContextRef
    throw_function_id: int
    throw_site: ThrowSite | None
    kind: ErrorUnwindKind
    source: ErrorSource
    value: ValueState


@dataclass(frozen=True, slots=True)
class TerminalErrorRef:
    call_ref: CallRef
    target: TerminalErrorTarget


@dataclass(frozen=True, slots=True)
class ThreadStart:
    thread_ref: ThreadRef
    parent: ThreadRef | None
    spawn_call: CallRef | None
    spawn_site: CallSite | None
    started_ns: int
    kind: ThreadStartKind
    name: str = ""


@dataclass(frozen=True, slots=True)
class ThreadEnd:
    thread_ref: ThreadRef
    ended_ns: int
    status: ThreadEndStatus


@dataclass(frozen=True, slots=True)
class LogEvent:
    call_ref: CallRef | None
    timestamp_ms: int
    level: str | None
    source: CallSite | None
    source_column: int | None
    message_preview: str | None
    event_name: str | None
    distinct_id: str | None
    context: ValueState
    data: ValueState


@dataclass(frozen=True, slots=True)
class CallScope:
    call_ref: CallRef
    distinct_id: str | None
    context: ValueState


EvidenceFact = (
    SpanStart
    | SpanEnd
    | SpanRuntimeId
    | ValueOccurrence
    | ErrorCapture
    | TerminalErrorRef
    | ThreadStart
    | ThreadEnd
    | LogEvent
    | CallScope
)

# -- encode ------------------------------------------------------------------------------


def _w_ref(w: Writer, ref: ThreadRef) -> None:
    w.fixed(ref.euid, 16, "ThreadRef euid")
    w.u64(ref.engine_id, "engine_id")
    w.u64(ref.thread_id, "thread_id")


def _w_call(w: Writer, ref: CallRef) -> None:
    w.fixed(ref.euid, 16, "CallRef euid")
    w.u64(ref.engine_id, "engine_id")
    w.u64(ref.thread_id, "thread_id")
    w.u64(ref.call_id, "call_id")


def _w_opt_call(w: Writer, ref: CallRef | None) -> None:
    w.flag(ref is not None)
    if ref is not None:
        _w_call(w, ref)


def _w_site(w: Writer, site: CallSite | None) -> None:
    w.flag(site is not None)
    if site is not None:
        w.u32(site.file_id, "file_id")
        w.u32(site.start_offset, "start_offset")
        w.u32(site.end_offset, "end_offset")
        w.u32(site.line, "line")


def _w_ctx(w: Writer, ctx: ContextRef) -> None:
    if isinstance(ctx, NormalContext):
        w.u8(0)
        w.fixed(ctx.key, 32, "context key")
    else:
        w.u8(1)
        w.u8(int(ctx.reason), "overflow reason")
        w.u8(int(ctx.edge_kind), "edge_kind")


def _w_state(w: Writer, state: ValueState) -> None:
    if isinstance(state, ValueAvailable):
        w.u8(0)
        w.fixed(state.cid, 32, "cid")
        w.u16(state.codec, "codec")
        w.u64(state.encoded_bytes, "encoded_bytes")
    else:
        w.u8(1)
        w.u8(int(state.reason), "loss reason")


def _w_error_id(w: Writer, eid: ErrorCaptureId) -> None:
    _w_ref(w, eid.thread_ref)
    w.u64(eid.unwind_ordinal, "unwind_ordinal")


def capped_thread_name(name: str) -> bytes:
    """At most 256 bytes, never splitting a UTF-8 character (the producer's ``capped_name_bytes``)."""
    raw = name.encode("utf-8")
    if len(raw) <= MAX_THREAD_NAME_LEN:
        return raw
    end = MAX_THREAD_NAME_LEN
    while end > 0 and (raw[end] & 0xC0) == 0x80:
        end -= 1
    return raw[:end]


def encode_error_capture(rec: ErrorCapture) -> bytes:
    """The nested ``BAMLERR1`` record (tag-4 body)."""
    w = Writer()
    w.raw(ERROR_CAPTURE_MAGIC)
    w.u16(ERROR_CODEC_VERSION)
    _w_error_id(w, rec.id)
    _w_call(w, rec.throw_call_ref)
    _w_ctx(w, rec.throw_context_ref)
    w.u32(rec.throw_function_id, "throw_function_id")
    w.flag(rec.throw_site is not None)
    if rec.throw_site is not None:
        s = rec.throw_site
        for v, name in (
            (s.file_id, "file_id"),
            (s.line, "line"),
            (s.start_offset, "start"),
            (s.end_offset, "end"),
        ):
            w.u32(v, name)
    w.u8(int(rec.kind), "kind")
    w.u8(int(rec.source), "source")
    _w_state(w, rec.value)
    return w.getvalue()


def encode_terminal_error_ref(rec: TerminalErrorRef) -> bytes:
    """The nested ``BAMLTER1`` record (tag-5 body)."""
    w = Writer()
    w.raw(TERMINAL_ERROR_MAGIC)
    w.u16(ERROR_CODEC_VERSION)
    _w_call(w, rec.call_ref)
    if isinstance(rec.target, ErrorCaptureId):
        w.u8(0)
        _w_error_id(w, rec.target)
    else:
        w.u8(1)
        w.u8(int(rec.target.reason), "error loss reason")
    return w.getvalue()


def encode_fact(fact: EvidenceFact) -> tuple[int, bytes]:
    """(tag, body) of one fact."""
    w = Writer()
    if isinstance(fact, SpanStart):
        _w_call(w, fact.call_ref)
        _w_opt_call(w, fact.parent_call_ref)
        _w_ref(w, fact.thread_ref)
        _w_ctx(w, fact.context_ref)
        w.u32(fact.function_id, "function_id")
        _w_site(w, fact.call_site)
        w.u8(int(fact.edge_kind), "edge_kind")
        w.u64(fact.started_ns, "started_ns")
        if fact.selection_reasons & ~7 or fact.roles & ~7:
            raise EncodeError("selection_reasons and roles hold three bits each")
        w.u8(fact.selection_reasons)
        w.u8(fact.roles)
        w.flag(fact.runtime_id is not None)
        if fact.runtime_id is not None:
            w.u32(fact.runtime_id.annotation_ordinal, "annotation_ordinal")
            w.fixed(fact.runtime_id.runtime_id, 16, "runtime_id")
        return FactTag.SPAN_START, w.getvalue()
    if isinstance(fact, SpanEnd):
        _w_call(w, fact.call_ref)
        w.u64(fact.ended_ns, "ended_ns")
        w.u8(int(fact.status), "status")
        w.u64(fact.inclusive_ns, "inclusive_ns")
        return FactTag.SPAN_END, w.getvalue()
    if isinstance(fact, SpanRuntimeId):
        _w_call(w, fact.call_ref)
        w.u32(fact.annotation_ordinal, "annotation_ordinal")
        w.fixed(fact.runtime_id, 16, "runtime_id")
        return FactTag.SPAN_RUNTIME_ID, w.getvalue()
    if isinstance(fact, ValueOccurrence):
        _w_call(w, fact.call_ref)
        _w_ctx(w, fact.context_ref)
        w.u8(int(fact.role), "role")
        _w_state(w, fact.state)
        return FactTag.VALUE_OCCURRENCE, w.getvalue()
    if isinstance(fact, ErrorCapture):
        return FactTag.ERROR_CAPTURE, encode_error_capture(fact)
    if isinstance(fact, TerminalErrorRef):
        return FactTag.TERMINAL_ERROR_REF, encode_terminal_error_ref(fact)
    if isinstance(fact, ThreadStart):
        _w_ref(w, fact.thread_ref)
        w.flag(fact.parent is not None)
        if fact.parent is not None:
            _w_ref(w, fact.parent)
        _w_opt_call(w, fact.spawn_call)
        _w_site(w, fact.spawn_site)
        w.u64(fact.started_ns, "started_ns")
        w.u8(int(fact.kind), "kind")
        w.length_prefixed_u32(capped_thread_name(fact.name), "thread name")
        return FactTag.THREAD_START, w.getvalue()
    if isinstance(fact, ThreadEnd):
        _w_ref(w, fact.thread_ref)
        w.u64(fact.ended_ns, "ended_ns")
        w.u8(int(fact.status), "status")
        return FactTag.THREAD_END, w.getvalue()
    if isinstance(fact, LogEvent):
        _w_opt_call(w, fact.call_ref)
        w.u64(fact.timestamp_ms, "timestamp_ms")
        w.optional_string_u64(fact.level)
        _w_site(w, fact.source)
        w.flag(fact.source_column is not None)
        if fact.source_column is not None:
            w.u32(fact.source_column, "source_column")
        w.optional_string_u64(fact.message_preview)
        w.optional_string_u64(fact.event_name)
        w.optional_string_u64(fact.distinct_id)
        _w_state(w, fact.context)
        _w_state(w, fact.data)
        return FactTag.LOG_EVENT, w.getvalue()
    if isinstance(fact, CallScope):
        _w_call(w, fact.call_ref)
        w.optional_string_u64(fact.distinct_id)
        _w_state(w, fact.context)
        return FactTag.CALL_SCOPE, w.getvalue()
    raise EncodeError(f"not an evidence fact: {type(fact).__name__}")


def encode_evidence_payload(facts: list[EvidenceFact] | tuple[EvidenceFact, ...]) -> bytes:
    """``u64 count`` then each fact framed as ``u8 tag ‖ u32 body_len ‖ body``."""
    w = Writer()
    w.u64(len(facts))
    for fact in facts:
        tag, body = encode_fact(fact)
        w.u8(tag)
        w.length_prefixed_u32(body, "fact body")
    return w.getvalue()


# -- decode ------------------------------------------------------------------------------

_OVERFLOWREASONTAG = enum_members(OverflowReasonTag)
_EDGEKIND = enum_members(EdgeKind)
_VALUELOSSREASON = enum_members(ValueLossReason)
_THREADSTARTKIND = enum_members(ThreadStartKind)
_ERRORUNWINDKIND = enum_members(ErrorUnwindKind)
_ERRORSOURCE = enum_members(ErrorSource)
_ERRORCAPTURELOSSREASON = enum_members(ErrorCaptureLossReason)
_VALUEROLE = enum_members(ValueRole)
_FUNCTIONENDSTATUS = enum_members(FunctionEndStatus)
_THREADENDSTATUS = enum_members(ThreadEndStatus)


def _r_ref(r: Reader) -> ThreadRef:
    euid, engine, thread = r.unpack(_REF, "ThreadRef")
    return ThreadRef(euid, engine, thread)


def _r_call(r: Reader) -> CallRef:
    euid, engine, thread, call = r.unpack(_CALL, "CallRef")
    return CallRef(euid, engine, thread, call)


def _r_opt_call(r: Reader, what: str) -> CallRef | None:
    return _r_call(r) if r.flag(what) else None


def _r_site(r: Reader, what: str) -> CallSite | None:
    return CallSite(*r.unpack(_SITE, what)) if r.flag(what) else None


def _r_ctx(r: Reader) -> ContextRef:
    kind = r.tag("context ref", 2)
    if kind == 0:
        return NormalContext(r.fixed(32, "context key"))
    reason = _OVERFLOWREASONTAG[r.tag("overflow reason", len(_OVERFLOWREASONTAG))]
    return OverflowContext(reason, _EDGEKIND[r.tag("edge_kind", len(_EDGEKIND))])


def _r_state(r: Reader, what: str) -> ValueState:
    if r.tag(what, 2) == 0:
        cid, codec, size = r.unpack(_AVAILABLE, what)
        return ValueAvailable(cid, codec, size)
    return ValueLost(_VALUELOSSREASON[r.tag("value loss reason", len(_VALUELOSSREASON))])


def _r_error_id(r: Reader) -> ErrorCaptureId:
    return ErrorCaptureId(_r_ref(r), r.u64("unwind_ordinal"))


def _r_nested_header(r: Reader, magic: bytes) -> None:
    at = r.pos
    if r.fixed(8, "nested record magic") != magic:
        r.fail(BadMagicError, f"nested record magic is not {magic!r}", at=at)
    version = r.u16("nested record version")
    if version != ERROR_CODEC_VERSION:
        r.fail(UnsupportedVersionError, f"nested record version {version}", at=at + 8)


def _r_bits(r: Reader, what: str) -> int:
    at = r.pos
    bits = r.u8(what)
    if bits & ~7:
        r.fail(MalformedError, f"{what} {bits:#04x} sets reserved bits", reason="invalid_bits", at=at)
    return bits


def _span_start_layouts() -> dict[int, tuple[bool, bool, bool, struct.Struct]]:
    # Fast-path layouts of a SpanStart with a normal context, by body size: each combination
    # of the three optional parts (parent, call site, runtime id) has a size of its own.
    out: dict[int, tuple[bool, bool, bool, struct.Struct]] = {}
    for parent in (False, True):
        for site in (False, True):
            for runtime in (False, True):
                layout = struct.Struct(
                    ">16sQQQB"
                    + ("16sQQQ" if parent else "")
                    + "16sQQB32sIB"
                    + ("IIII" if site else "")
                    + "BQBBB"
                    + ("I16s" if runtime else "")
                )
                out[layout.size] = (parent, site, runtime, layout)
    return out


_SPAN_START_LAYOUTS = _span_start_layouts()
# ValueOccurrence with a normal context and an available value: CallRef ‖ ctx ‖ role ‖ state.
_VALUE_OCCURRENCE = struct.Struct(">16sQQQB32sBB32sHQ")


def _fast_span_start(r: Reader) -> SpanStart | None:
    """The common shapes in one unpack; None (nothing consumed) when the body needs the full decoder."""
    shape = _SPAN_START_LAYOUTS.get(r.remaining)
    if shape is None:
        return None
    has_parent, has_site, has_runtime, layout = shape
    v = r.peek_rest(layout)
    if v is None or v[4] != has_parent:
        return None
    call_ref = CallRef(v[0], v[1], v[2], v[3])
    i = 5
    parent = None
    if has_parent:
        parent = CallRef(v[5], v[6], v[7], v[8])
        i = 9
    thread_ref = ThreadRef(v[i], v[i + 1], v[i + 2])
    ctx_kind, key, function_id, site_flag = v[i + 3], v[i + 4], v[i + 5], v[i + 6]
    i += 7
    if ctx_kind != 0 or site_flag != has_site:
        return None
    site = None
    if has_site:
        site = CallSite(v[i], v[i + 1], v[i + 2], v[i + 3])
        i += 4
    edge, started_ns, reasons, roles, runtime_flag = v[i : i + 5]
    if edge >= len(_EDGEKIND) or reasons & ~7 or roles & ~7 or runtime_flag != has_runtime:
        return None
    runtime = RuntimeIdAnnotation(v[i + 5], v[i + 6]) if has_runtime else None
    r.skip_rest()
    return SpanStart(
        call_ref,
        parent,
        thread_ref,
        NormalContext(key),
        function_id,
        site,
        _EDGEKIND[edge],
        started_ns,
        reasons,
        roles,
        runtime,
    )


def _decode_span_start(r: Reader) -> SpanStart:
    fast = _fast_span_start(r)
    if fast is not None:
        return fast
    call_ref = _r_call(r)
    parent = _r_opt_call(r, "parent_call_ref")
    thread_ref = _r_ref(r)
    ctx = _r_ctx(r)
    function_id = r.u32("function_id")
    site = _r_site(r, "call_site")
    edge = _EDGEKIND[r.tag("edge_kind", len(_EDGEKIND))]
    started_ns = r.u64("started_ns")
    reasons = _r_bits(r, "selection_reasons")
    roles = _r_bits(r, "roles")
    runtime = (
        RuntimeIdAnnotation(r.u32("annotation_ordinal"), r.fixed(16, "runtime_id"))
        if r.flag("runtime_id")
        else None
    )
    return SpanStart(
        call_ref, parent, thread_ref, ctx, function_id, site, edge, started_ns, reasons, roles, runtime
    )


def _decode_span_end(r: Reader) -> SpanEnd:
    at = r.pos
    euid, engine, thread, call, ended, status, inclusive = r.unpack(_SPAN_END, "SpanEnd")
    if status >= len(FunctionEndStatus):
        r.fail(MalformedError, f"SpanEnd status: unknown tag {status}", reason="unknown_tag", at=at + 48)
    return SpanEnd(CallRef(euid, engine, thread, call), ended, _FUNCTIONENDSTATUS[status], inclusive)


def _decode_thread_start(r: Reader) -> ThreadStart:
    thread_ref = _r_ref(r)
    parent = _r_ref(r) if r.flag("parent") else None
    spawn_call = _r_opt_call(r, "spawn_call")
    spawn_site = _r_site(r, "spawn_site")
    started_ns = r.u64("started_ns")
    kind = _THREADSTARTKIND[r.tag("thread start kind", len(_THREADSTARTKIND))]
    name = _r_thread_name(r)
    return ThreadStart(thread_ref, parent, spawn_call, spawn_site, started_ns, kind, name)


def _r_thread_name(r: Reader) -> str:
    at = r.pos
    n = r.u32("thread name length")
    if n > MAX_THREAD_NAME_LEN:
        r.fail(
            LimitExceededError,
            f"thread name of {n} bytes exceeds {MAX_THREAD_NAME_LEN}",
            reason="name_too_long",
            at=at,
        )
    r.check_length(n, "thread name")
    start = r.pos
    raw = r.fixed(n, "thread name")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        r.fail(MalformedError, "thread name is not valid UTF-8", reason="bad_utf8", at=start)


def _decode_thread_end(r: Reader) -> ThreadEnd:
    at = r.pos
    euid, engine, thread, ended, status = r.unpack(_THREAD_END, "ThreadEnd")
    if status >= len(ThreadEndStatus):
        r.fail(MalformedError, f"ThreadEnd status: unknown tag {status}", reason="unknown_tag", at=at + 40)
    return ThreadEnd(ThreadRef(euid, engine, thread), ended, _THREADENDSTATUS[status])


def decode_error_capture(r: Reader) -> ErrorCapture:
    _r_nested_header(r, ERROR_CAPTURE_MAGIC)
    eid = _r_error_id(r)
    throw_call = _r_call(r)
    ctx = _r_ctx(r)
    function_id = r.u32("throw_function_id")
    site = ThrowSite(*r.unpack(_SITE, "throw_site")) if r.flag("throw_site") else None
    kind = _ERRORUNWINDKIND[r.tag("error unwind kind", len(_ERRORUNWINDKIND))]
    source = _ERRORSOURCE[r.tag("error source", len(_ERRORSOURCE))]
    return ErrorCapture(
        eid, throw_call, ctx, function_id, site, kind, source, _r_state(r, "error value state")
    )


def decode_terminal_error_ref(r: Reader) -> TerminalErrorRef:
    _r_nested_header(r, TERMINAL_ERROR_MAGIC)
    call_ref = _r_call(r)
    target: TerminalErrorTarget
    if r.tag("terminal error target", 2) == 0:
        target = _r_error_id(r)
    else:
        target = ErrorTargetLost(
            _ERRORCAPTURELOSSREASON[r.tag("error loss reason", len(_ERRORCAPTURELOSSREASON))]
        )
    return TerminalErrorRef(call_ref, target)


def _decode_log_event(r: Reader) -> LogEvent:
    call_ref = _r_opt_call(r, "log call_ref")
    timestamp_ms = r.u64("timestamp_ms")
    level = r.optional_string_u64("level")
    source = _r_site(r, "log source")
    column = r.u32("source_column") if r.flag("source_column") else None
    message = r.optional_string_u64("message_preview")
    event_name = r.optional_string_u64("event_name")
    distinct_id = r.optional_string_u64("distinct_id")
    context = _r_state(r, "log context state")
    data = _r_state(r, "log data state")
    return LogEvent(
        call_ref, timestamp_ms, level, source, column, message, event_name, distinct_id, context, data
    )


def _decode_value_occurrence(r: Reader) -> ValueOccurrence:
    v = r.peek_rest(_VALUE_OCCURRENCE)
    if v is not None and v[4] == 0 and v[6] < len(_VALUEROLE) and v[7] == 0:
        r.skip_rest()
        return ValueOccurrence(
            CallRef(v[0], v[1], v[2], v[3]),
            NormalContext(v[5]),
            _VALUEROLE[v[6]],
            ValueAvailable(v[8], v[9], v[10]),
        )
    return ValueOccurrence(
        _r_call(r), _r_ctx(r), _VALUEROLE[r.tag("value role", len(_VALUEROLE))], _r_state(r, "value state")
    )


def _decode_call_scope(r: Reader) -> CallScope:
    call_ref = _r_call(r)
    distinct_id = r.optional_string_u64("distinct_id")
    return CallScope(call_ref, distinct_id, _r_state(r, "call scope context state"))


_DECODERS = (
    _decode_span_start,
    _decode_span_end,
    lambda r: SpanRuntimeId(_r_call(r), r.u32("annotation_ordinal"), r.fixed(16, "runtime_id")),
    _decode_value_occurrence,
    decode_error_capture,
    decode_terminal_error_ref,
    _decode_thread_start,
    _decode_thread_end,
    _decode_log_event,
    _decode_call_scope,
)


def decode_fact(tag: int, r: Reader) -> EvidenceFact:
    """Decode one fact body held by ``r`` (which must be exactly the body)."""
    fact: EvidenceFact = _DECODERS[tag](r)
    if not r.at_end():  # the message is built only on failure
        r.finish(f"{type(fact).__name__} body")
    return fact


def decode_evidence_payload(
    data: bytes,
    record_count: int,
    *,
    file: str | None = None,
    base: int = 0,
    start: int = 0,
    end: int | None = None,
) -> list[EvidenceFact]:
    """Decode ``data[start:end]`` (at absolute offset ``base + start`` in ``file``)."""
    r = Reader(data, file=file, start=start, end=end, base=base)
    count = r.u64("fact count")
    r.check_count(count, _FACT_MIN, "fact count")
    facts: list[EvidenceFact] = []
    n_tags = len(_DECODERS)
    for _ in range(count):
        at = r.pos
        tag, body = r.framed("fact tag", "fact body_len", "fact body")
        if tag >= n_tags:
            r.fail(MalformedError, f"unknown evidence fact tag {tag}", reason="unknown_tag", at=at)
        facts.append(decode_fact(tag, body))
    r.finish("evidence payload")
    if count != record_count:
        r.fail(
            MalformedError,
            f"payload holds {count} facts, group header says {record_count}",
            reason="record_count_mismatch",
            at=start,
        )
    return facts
