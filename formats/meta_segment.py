"""Meta segments (``BAMLMET1``, schema version 2): the stream's index plane.

Layout (real source ``store.rs`` ``encode_meta_segment``)::

    "BAMLMET1"  8      magic
    u16         2      version = 2
    u64         8      sequence (dense per stream, from 1)
    euid        16     must equal the stream directory
    u64         8      data_high_water (highest data sequence committed)
    u64         8      record_count
    u64         8      payload_len
    payload            record_count × ( u8 tag ‖ u32 body_len ‖ body )
    sha256      32     over every preceding byte

Records (tag: body):

    0 StreamStarted   u32 os_pid ‖ u64 zero_unix_ns ‖ string baml_version ‖ string os_arch
    1 EngineStarted   u64 engine_id ‖ program_id[16] ‖ opt cid[32] ‖ opt string revision_label
                      ‖ opt string source_label
    2 RootStarted     ThreadRef[32] ‖ u64 started_ns ‖ runtime_id[16] (raw baml_id_1_ bytes)
    3 RootEnded       ThreadRef[32] ‖ u64 ended_ns ‖ u8 status ‖ u8 flags ‖ u64 data_first_seq
                      ‖ u64 data_last_seq ‖ u64 data_segment_count ‖ u32 health_len ‖ 26 × u64

Validation order follows the real decoder: trailer, magic, version, sequence,
euid, header lengths, no bytes between payload and trailer, then each record
(unknown tag, body fully consumed, StreamStarted only as record 1 of
sequence 1), then nothing left in the payload.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, fields

from formats.errors import (
    BadMagicError,
    IdentityMismatchError,
    MalformedError,
    UnsupportedVersionError,
)
from formats.ids import THREAD_REF_LEN, ThreadRef
from formats.integrity import append_trailer, verify_trailer
from formats.segment_names import (
    META_MAGIC,
    SCHEMA_VERSION,
    SUPPORTED_SEGMENT_VERSIONS,
    Plane,
    SegmentHeader,
    parse_segment_path,
    read_segment_header,
)
from formats.wire import EncodeError, Reader, Writer, enum_members

HEADER_LEN = 58
ROOT_ENDED_FLAG_ROOT_STARTED_LOST = 1
_RECORD_MIN = 5  # u8 tag + u32 body_len


class ExecutionEndStatus(enum.IntEnum):
    SUCCEEDED = 0
    FAILED = 1
    CANCELLED = 2
    PANICKED = 3
    ABANDONED = 4


_EXECUTIONENDSTATUS = enum_members(ExecutionEndStatus)


class MetaTag(enum.IntEnum):
    STREAM_STARTED = 0
    ENGINE_STARTED = 1
    ROOT_STARTED = 2
    ROOT_ENDED = 3


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """The 26 RootEnded health counters, in wire order (``ExecutionHealthSnapshot``)."""

    corrupt_records: int = 0
    active_thread_capacity_exceeded: int = 0
    active_call_capacity_exceeded: int = 0
    join_capacity_exceeded: int = 0
    unmatched_call_facts: int = 0
    unmatched_thread_facts: int = 0
    clock_invalid: int = 0
    cct_segment_publish_failed: int = 0
    evidence_queue_full: int = 0
    evidence_segment_publish_failed: int = 0
    structural_transport_exceeded: int = 0
    value_attempt_transport_exceeded: int = 0
    applicable_error_unwinds: int = 0
    error_captures_queued: int = 0
    error_captures_committed: int = 0
    error_capture_attempt_transport_exceeded: int = 0
    error_capture_missing_structural_join: int = 0
    error_capture_start_uncommitted: int = 0
    error_capture_evidence_queue_full: int = 0
    error_capture_evidence_publish_failed: int = 0
    terminal_error_links_observed: int = 0
    terminal_error_links_queued: int = 0
    terminal_error_links_committed: int = 0
    terminal_error_link_transport_exceeded: int = 0
    terminal_error_link_start_uncommitted: int = 0
    terminal_error_link_evidence_publish_failed: int = 0

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


HEALTH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(HealthSnapshot))
HEALTH_COUNT = len(HEALTH_FIELDS)
HEALTH_LEN = 8 * HEALTH_COUNT
_HEALTH = struct.Struct(">" + "Q" * HEALTH_COUNT)
assert HEALTH_COUNT == 26


@dataclass(frozen=True, slots=True)
class StreamStarted:
    os_pid: int
    zero_unix_ns: int
    baml_version: str
    os_arch: str


@dataclass(frozen=True, slots=True)
class EngineStarted:
    engine_id: int
    program_id: bytes
    function_table_cid: bytes | None = None
    revision_label: str | None = None
    source_label: str | None = None


@dataclass(frozen=True, slots=True)
class RootStarted:
    root: ThreadRef
    started_ns: int
    runtime_id: bytes


@dataclass(frozen=True, slots=True)
class RootEnded:
    root: ThreadRef
    ended_ns: int
    status: ExecutionEndStatus
    flags: int
    data_first_seq: int
    data_last_seq: int
    data_segment_count: int
    health: HealthSnapshot = HealthSnapshot()

    @property
    def root_started_lost(self) -> bool:
        return bool(self.flags & ROOT_ENDED_FLAG_ROOT_STARTED_LOST)


MetaRecord = StreamStarted | EngineStarted | RootStarted | RootEnded


@dataclass(frozen=True, slots=True)
class MetaSegment:
    sequence: int
    euid: bytes
    data_high_water: int
    records: tuple[MetaRecord, ...]


# -- encode ------------------------------------------------------------------------------


def _encode_record(record: MetaRecord) -> tuple[int, bytes]:
    w = Writer()
    if isinstance(record, StreamStarted):
        w.u32(record.os_pid, "os_pid")
        w.u64(record.zero_unix_ns, "zero_unix_ns")
        w.string(record.baml_version, "baml_version")
        w.string(record.os_arch, "os_arch")
        return MetaTag.STREAM_STARTED, w.getvalue()
    if isinstance(record, EngineStarted):
        w.u64(record.engine_id, "engine_id")
        w.fixed(record.program_id, 16, "program_id")
        w.flag(record.function_table_cid is not None)
        if record.function_table_cid is not None:
            w.fixed(record.function_table_cid, 32, "function_table_cid")
        w.optional_string(record.revision_label, "revision_label")
        w.optional_string(record.source_label, "source_label")
        return MetaTag.ENGINE_STARTED, w.getvalue()
    if isinstance(record, RootStarted):
        _thread_ref(w, record.root)
        w.u64(record.started_ns, "started_ns")
        w.fixed(record.runtime_id, 16, "runtime_id")
        return MetaTag.ROOT_STARTED, w.getvalue()
    if isinstance(record, RootEnded):
        _thread_ref(w, record.root)
        w.u64(record.ended_ns, "ended_ns")
        w.u8(int(record.status), "status")
        w.u8(record.flags, "flags")
        w.u64(record.data_first_seq, "data_first_seq")
        w.u64(record.data_last_seq, "data_last_seq")
        w.u64(record.data_segment_count, "data_segment_count")
        w.u32(HEALTH_LEN)
        try:
            w.raw(_HEALTH.pack(*record.health.as_tuple()))
        except struct.error as exc:
            raise EncodeError(f"health counter out of u64 range: {exc}") from None
        return MetaTag.ROOT_ENDED, w.getvalue()
    raise EncodeError(f"not a meta record: {type(record).__name__}")


def _thread_ref(w: Writer, ref: ThreadRef) -> None:
    w.fixed(ref.euid, 16, "ThreadRef euid")
    w.u64(ref.engine_id, "engine_id")
    w.u64(ref.thread_id, "thread_id")


def encode_meta_segment(segment: MetaSegment) -> bytes:
    """The complete ``.bamlmeta`` file; deterministic."""
    payload = Writer()
    for record in segment.records:
        tag, body = _encode_record(record)
        payload.u8(tag)
        payload.length_prefixed_u32(body, "record body")
    head = Writer()
    head.raw(META_MAGIC)
    head.u16(SCHEMA_VERSION)
    head.u64(segment.sequence, "sequence")
    head.fixed(segment.euid, 16, "euid")
    head.u64(segment.data_high_water, "data_high_water")
    head.u64(len(segment.records))
    head.u64(len(payload.buf))
    return append_trailer(bytes(head.buf + payload.buf))


# -- decode ------------------------------------------------------------------------------


def _decode_record(tag: int, r: Reader) -> MetaRecord:
    record: MetaRecord
    if tag == MetaTag.STREAM_STARTED:
        record = StreamStarted(
            r.u32("os_pid"), r.u64("zero_unix_ns"), r.string("baml_version"), r.string("os_arch")
        )
    elif tag == MetaTag.ENGINE_STARTED:
        engine_id = r.u64("engine_id")
        program_id = r.fixed(16, "program_id")
        cid = r.fixed(32, "function_table_cid") if r.flag("function_table_cid") else None
        record = EngineStarted(
            engine_id, program_id, cid, r.optional_string("revision_label"), r.optional_string("source_label")
        )
    elif tag == MetaTag.ROOT_STARTED:
        record = RootStarted(
            ThreadRef.from_bytes(r.fixed(THREAD_REF_LEN, "root")),
            r.u64("started_ns"),
            r.fixed(16, "runtime_id"),
        )
    else:
        root = ThreadRef.from_bytes(r.fixed(THREAD_REF_LEN, "root"))
        ended_ns = r.u64("ended_ns")
        status = _EXECUTIONENDSTATUS[r.tag("RootEnded status", len(_EXECUTIONENDSTATUS))]
        flags = r.u8("flags")
        first, last, count = r.u64("data_first_seq"), r.u64("data_last_seq"), r.u64("data_segment_count")
        at = r.pos
        health_len = r.u32("health_len")
        hr = r.sub(health_len, "health")
        if health_len != HEALTH_LEN:
            r.fail(
                MalformedError,
                f"health is {health_len} bytes, expected {HEALTH_LEN}",
                reason="invalid_health",
                at=at,
            )
        health = HealthSnapshot(*hr.unpack(_HEALTH, "health"))
        record = RootEnded(root, ended_ns, status, flags, first, last, count, health)
    if not r.at_end():  # the message is built only on failure
        r.finish(f"{type(record).__name__} body")
    return record


def _check_identity(
    r: Reader, sequence: int, euid: bytes, expected_euid: bytes | None, expected_sequence: int | None
) -> None:
    if expected_euid is not None and euid != expected_euid:
        r.fail(
            IdentityMismatchError,
            f"segment euid {euid.hex()} does not match its stream directory {expected_euid.hex()}",
            at=18,
        )
    if expected_sequence is not None and sequence != expected_sequence:
        r.fail(
            IdentityMismatchError,
            f"segment sequence {sequence} does not match its file name {expected_sequence}",
            at=10,
        )


def decode_meta_segment(
    data: bytes,
    *,
    file: str | None = None,
    expected_euid: bytes | None = None,
    expected_sequence: int | None = None,
) -> MetaSegment:
    """Verify and decode a whole meta segment."""
    body_end = len(verify_trailer(data, file=file))
    r = Reader(data, file=file, end=body_end)
    if r.fixed(8, "magic") != META_MAGIC:
        r.fail(BadMagicError, f"magic is not {META_MAGIC!r}", at=0)
    version = r.u16("version")
    if version not in SUPPORTED_SEGMENT_VERSIONS:
        r.fail(UnsupportedVersionError, f"meta segment version {version}", at=8)
    sequence = r.u64("sequence")
    euid = r.fixed(16, "euid")
    _check_identity(r, sequence, euid, expected_euid, expected_sequence)
    data_high_water = r.u64("data_high_water")
    record_count = r.u64("record_count")
    payload_len = r.u64("payload_len")
    payload = r.sub(payload_len, "payload")
    r.finish("meta segment")
    payload.check_count(record_count, _RECORD_MIN, "record_count")
    records: list[MetaRecord] = []
    for index in range(record_count):
        at = payload.pos
        tag = payload.u8("record tag")
        body = payload.sub(payload.u32("record body_len"), "record body")
        if tag >= len(MetaTag):
            payload.fail(MalformedError, f"unknown meta record tag {tag}", reason="unknown_tag", at=at)
        record = _decode_record(tag, body)
        if isinstance(record, StreamStarted) and (sequence != 1 or index != 0):
            payload.fail(
                MalformedError,
                f"StreamStarted as record {index + 1} of sequence {sequence}; only record 1 of sequence 1 may"
                " hold it",
                reason="misplaced_stream_started",
                at=at,
            )
        records.append(record)
    payload.finish("meta payload")
    return MetaSegment(sequence, euid, data_high_water, tuple(records))


def decode_meta_file(path: str) -> MetaSegment:
    """Read and decode ``streams/<euid>/meta/<seq20>.bamlmeta``; euid and sequence must match the path."""
    where = parse_segment_path(path)
    if where.plane is not Plane.META:
        raise BadMagicError("not a meta segment path", file=path)
    with open(path, "rb") as fh:
        data = fh.read()
    return decode_meta_segment(data, file=path, expected_euid=where.euid, expected_sequence=where.sequence)


def read_meta_header(data: bytes, *, file: str | None = None) -> SegmentHeader:
    """Publisher peek: magic, version, sequence, euid; no hashing, no payload parsing."""
    return read_segment_header(data, file=file, plane=Plane.META)
