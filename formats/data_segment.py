"""Data segments (``BAMLDAT1``, schema version 2): CCT and evidence groups per execution.

Layout (real source ``store.rs`` ``encode_data_segment``)::

    "BAMLDAT1"  8      magic
    u16         2      version = 2
    u64         8      sequence (dense per stream, from 1)
    euid        16     must equal the stream directory
    u64         8      group_count
    u64         8      payload_len
    payload            group_count groups, strictly ascending by root ThreadRef bytes
    sha256      32     over every preceding byte

    group: ThreadRef[32] ‖ u8 cct_health ‖ u64 cct_record_count ‖ u64 cct_len ‖ cct payload
           ‖ u64 evidence_record_count ‖ u64 evidence_len ‖ evidence payload

The segment decoder is structural like the real one: it checks the frame,
group order (a repeated root is ``duplicate_group``, a smaller one
``unsorted_groups``), the health bits and that no group is empty, and keeps
each group's payloads as bytes; :meth:`DataGroup.cct_payload` and
:meth:`DataGroup.evidence_facts` decode them on demand (``deep=True`` decodes
them all up front).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from formats.cct import CctPayload, CounterHealth, decode_cct_health, decode_cct_payload, encode_cct_payload
from formats.errors import BadMagicError, IdentityMismatchError, MalformedError, UnsupportedVersionError
from formats.evidence import EvidenceFact, decode_evidence_payload, encode_evidence_payload
from formats.ids import THREAD_REF_LEN, ThreadRef
from formats.integrity import append_trailer, verify_trailer
from formats.segment_names import (
    DATA_MAGIC,
    SCHEMA_VERSION,
    SUPPORTED_SEGMENT_VERSIONS,
    Plane,
    SegmentHeader,
    parse_segment_path,
    read_segment_header,
)
from formats.wire import EncodeError, Reader, Writer

HEADER_LEN = 50
NO_SATURATION = CounterHealth()
_GROUP_MIN = 32 + 1 + 8 + 8 + 8 + 8  # 65: root, health, two (count, len) pairs


@dataclass(frozen=True, slots=True)
class DataGroup:
    """One execution's contribution to a data segment, payloads kept encoded."""

    root: ThreadRef
    cct_health: CounterHealth
    cct_record_count: int
    cct: bytes
    evidence_record_count: int
    evidence: bytes
    file: str | None = field(default=None, compare=False, repr=False)
    cct_offset: int = field(default=0, compare=False, repr=False)
    evidence_offset: int = field(default=0, compare=False, repr=False)
    # Decoded facts, memoised: the projector reads a group's facts twice (value prefetch, assembly).
    _facts: tuple[EvidenceFact, ...] | None = field(default=None, init=False, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        root: ThreadRef,
        *,
        cct: CctPayload | None = None,
        facts: list[EvidenceFact] | tuple[EvidenceFact, ...] | None = None,
        cct_health: CounterHealth = NO_SATURATION,
    ) -> DataGroup:
        """Encode typed payloads into a group (an absent part is stored empty, as the profiler does)."""
        cct_bytes = encode_cct_payload(cct) if cct is not None else b""
        ev_bytes = encode_evidence_payload(facts) if facts is not None else b""
        return cls(
            root,
            cct_health,
            cct.record_count if cct is not None else 0,
            cct_bytes,
            len(facts) if facts is not None else 0,
            ev_bytes,
        )

    def cct_payload(self) -> CctPayload | None:
        """The decoded CCT payload, or None when the group carries none."""
        if not self.cct and self.cct_record_count == 0:
            return None
        return decode_cct_payload(self.cct, self.cct_record_count, file=self.file, base=self.cct_offset)

    def evidence_facts(self) -> list[EvidenceFact]:
        if not self.evidence and self.evidence_record_count == 0:
            return []
        if self._facts is None:
            facts = decode_evidence_payload(
                self.evidence, self.evidence_record_count, file=self.file, base=self.evidence_offset
            )
            object.__setattr__(self, "_facts", tuple(facts))
            return facts
        return list(self._facts)


@dataclass(frozen=True, slots=True)
class DataSegment:
    sequence: int
    euid: bytes
    groups: tuple[DataGroup, ...]


def encode_data_segment(segment: DataSegment) -> bytes:
    """The complete ``.bamldata`` file. Groups are written in the given order (callers sort by root)."""
    payload = Writer()
    for g in segment.groups:
        payload.fixed(g.root.euid, 16, "root euid")
        payload.u64(g.root.engine_id, "engine_id")
        payload.u64(g.root.thread_id, "thread_id")
        payload.u8(g.cct_health.to_byte())
        payload.u64(g.cct_record_count, "cct_record_count")
        payload.u64(len(g.cct))
        payload.raw(g.cct)
        payload.u64(g.evidence_record_count, "evidence_record_count")
        payload.u64(len(g.evidence))
        payload.raw(g.evidence)
    head = Writer()
    head.raw(DATA_MAGIC)
    head.u16(SCHEMA_VERSION)
    head.u64(segment.sequence, "sequence")
    head.fixed(segment.euid, 16, "euid")
    head.u64(len(segment.groups))
    head.u64(len(payload.buf))
    return append_trailer(bytes(head.buf + payload.buf))


def sorted_groups(groups: list[DataGroup]) -> tuple[DataGroup, ...]:
    """Groups in the order the format requires; a repeated root is an encoding error."""
    ordered = sorted(groups, key=lambda g: g.root.to_bytes())
    for a, b in itertools.pairwise(ordered):
        if a.root == b.root:
            raise EncodeError(f"two groups for execution {a.root.execution_id}")
    return tuple(ordered)


def decode_data_segment(
    data: bytes,
    *,
    file: str | None = None,
    expected_euid: bytes | None = None,
    expected_sequence: int | None = None,
    deep: bool = False,
) -> DataSegment:
    """Verify and decode a data segment; ``deep`` also decodes every group's payloads."""
    body_end = len(verify_trailer(data, file=file))
    r = Reader(data, file=file, end=body_end)
    if r.fixed(8, "magic") != DATA_MAGIC:
        r.fail(BadMagicError, f"magic is not {DATA_MAGIC!r}", at=0)
    version = r.u16("version")
    if version not in SUPPORTED_SEGMENT_VERSIONS:
        r.fail(UnsupportedVersionError, f"data segment version {version}", at=8)
    sequence = r.u64("sequence")
    euid = r.fixed(16, "euid")
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
    group_count = r.u64("group_count")
    payload_len = r.u64("payload_len")
    p = r.sub(payload_len, "payload")
    r.finish("data segment")
    p.check_count(group_count, _GROUP_MIN, "group_count")
    groups: list[DataGroup] = []
    previous: bytes | None = None
    for _ in range(group_count):
        at = p.pos
        root_bytes = p.fixed(THREAD_REF_LEN, "group root")
        if previous is not None:
            if root_bytes == previous:
                p.fail(MalformedError, "two groups for one execution", reason="duplicate_group", at=at)
            if root_bytes < previous:
                p.fail(
                    MalformedError, "groups are not sorted by root ThreadRef", reason="unsorted_groups", at=at
                )
        previous = root_bytes
        health = decode_cct_health(p.u8("cct_health"), file=file, offset=p.offset - 1)
        cct_count = p.u64("cct_record_count")
        cct_start, cct_end = p.region(p.u64("cct_len"), "cct payload")
        ev_count = p.u64("evidence_record_count")
        ev_start, ev_end = p.region(p.u64("evidence_len"), "evidence payload")
        if cct_start == cct_end and ev_start == ev_end:
            p.fail(MalformedError, "group carries neither CCT nor evidence", reason="empty_group", at=at)
        group = DataGroup(
            ThreadRef.from_bytes(root_bytes),
            health,
            cct_count,
            bytes(data[cct_start:cct_end]),
            ev_count,
            bytes(data[ev_start:ev_end]),
            file,
            cct_start,
            ev_start,
        )
        if deep:
            group.cct_payload()
            group.evidence_facts()
        groups.append(group)
    p.finish("data payload")
    return DataSegment(sequence, euid, tuple(groups))


def decode_data_file(path: str, *, deep: bool = False) -> DataSegment:
    """Read and decode ``streams/<euid>/data/<seq20>.bamldata``; euid and sequence must match the path."""
    where = parse_segment_path(path)
    if where.plane is not Plane.DATA:
        raise BadMagicError("not a data segment path", file=path)
    with open(path, "rb") as fh:
        data = fh.read()
    return decode_data_segment(
        data, file=path, expected_euid=where.euid, expected_sequence=where.sequence, deep=deep
    )


def read_data_header(data: bytes, *, file: str | None = None) -> SegmentHeader:
    """Publisher peek: magic, version, sequence, euid; no hashing, no payload parsing."""
    return read_segment_header(data, file=file, plane=Plane.DATA)
