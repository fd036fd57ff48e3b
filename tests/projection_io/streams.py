"""Hand-built streams in the shape the real writer gives them, uploaded to a bucket.

One publish cycle is a meta-pre object (the RootStarted records admitted in the cycle), one data
segment (the groups of the executions that end in the cycle), then a meta-post object (their
RootEnded records), each object only when it has records. EngineStarted is written once, in meta
sequence 1, with StreamStarted: as upstream's writer does at profiler activation. Each execution
is a root call with no values, so nothing but the meta and data planes (and the function table)
is needed in the bucket. Damage is applied by leaving objects out or corrupting them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from formats import evidence as ev
from formats import object_keys
from formats.cas import CODEC_FUNCTION_TABLE, encode_cas_object, value_cid
from formats.data_segment import DataGroup, DataSegment, encode_data_segment
from formats.function_table import FunctionEntry, FunctionTable, encode_function_table
from formats.ids import CallRef, EdgeKind, ThreadRef
from formats.meta_segment import (
    ROOT_ENDED_FLAG_ROOT_STARTED_LOST,
    EngineStarted,
    ExecutionEndStatus,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
    encode_meta_segment,
)
from formats.object_keys import Scope
from formats.zstd_frame import compress_object

ZERO = 1_796_083_200_000_000_000
CYCLE_NS = 1_000_000_000
TABLE = FunctionTable((FunctionEntry(0, "app.Main", "Main"),), ())
TABLE_BODY = encode_function_table(TABLE)
TABLE_CID = value_cid(CODEC_FUNCTION_TABLE, TABLE_BODY)
PROGRAM = bytes(range(16))
CONTEXT = ev.NormalContext(b"\x11" * 32)


@dataclass
class Execution:
    root: ThreadRef
    start_cycle: int
    end_cycle: int | None  # None: never ends (the sweep's case)
    root_started_lost: bool = False  # flag bit 0: the admitted batch was lost, no RootStarted

    @property
    def execution_id(self) -> str:
        return self.root.execution_id


@dataclass
class Stream:
    scope: Scope
    euid: bytes = field(default_factory=lambda: os.urandom(16))
    executions: list[Execution] = field(default_factory=list)
    bodies: dict[str, bytes] = field(default_factory=dict)  # key -> stored (compressed) object
    meta_keys: list[str] = field(default_factory=list)
    data_keys: list[str] = field(default_factory=list)
    # execution id -> (meta seq of its RootStarted or None, meta seq of its RootEnded or None, data seq)
    where: dict[str, tuple[int | None, int | None, int | None]] = field(default_factory=dict)

    @property
    def euid_hex(self) -> str:
        return self.euid.hex()

    def meta_key(self, seq: int) -> str:
        return object_keys.meta_segment_key(self.scope, self.euid_hex, seq)

    def data_key(self, seq: int) -> str:
        return object_keys.data_segment_key(self.scope, self.euid_hex, seq)


def _facts(root: ThreadRef, t0: int) -> list[ev.EvidenceFact]:
    ref = CallRef(root.euid, root.engine_id, root.thread_id, 1)
    return [
        ev.ThreadStart(root, None, None, None, t0, ev.ThreadStartKind.ROOT),
        ev.SpanStart(ref, None, root, CONTEXT, 0, None, EdgeKind.ROOT, t0, ev.SELECTED_ROOT, 0),
        ev.SpanEnd(ref, t0 + 500, ev.FunctionEndStatus.OK, 500),
        ev.ThreadEnd(root, t0 + 600, ev.ThreadEndStatus.COMPLETED),
    ]


def build_stream(
    scope: Scope,
    durations: list[int | None],
    *,
    lost_admitted: frozenset[int] = frozenset(),
    engine_id: int = 1,
) -> Stream:
    """Execution i starts in cycle i and ends ``durations[i]`` cycles later (None: never)."""
    s = Stream(scope)
    for i, d in enumerate(durations):
        root = ThreadRef(s.euid, engine_id, 100 + i)
        s.executions.append(Execution(root, i, None if d is None else i + d, i in lost_admitted))
    cycles = max([e.start_cycle for e in s.executions] + [e.end_cycle or 0 for e in s.executions]) + 1
    meta_seq = 1
    data_seq = 0
    header: list[Any] = [
        StreamStarted(4242, ZERO, "0.0.0-test", "linux-x86_64"),
        EngineStarted(engine_id, PROGRAM, TABLE_CID, None, None),
    ]
    _put_meta(s, MetaSegment(meta_seq, s.euid, 0, tuple(header)))
    for cycle in range(cycles):
        t = cycle * CYCLE_NS
        starts = [e for e in s.executions if e.start_cycle == cycle and not e.root_started_lost]
        ends = [e for e in s.executions if e.end_cycle == cycle]
        started_at: dict[str, int] = {}
        if starts:
            meta_seq += 1
            records = tuple(RootStarted(e.root, t + 10, b"\x05" * 16) for e in starts)
            _put_meta(s, MetaSegment(meta_seq, s.euid, data_seq, records))
            started_at = {e.execution_id: meta_seq for e in starts}
        for e in s.executions:
            if e.execution_id in started_at:
                s.where[e.execution_id] = (started_at[e.execution_id], None, None)
        if not ends:
            continue
        data_seq += 1
        groups = tuple(
            DataGroup.build(e.root, facts=_facts(e.root, e.start_cycle * CYCLE_NS + 20)) for e in ends
        )
        body = encode_data_segment(DataSegment(data_seq, s.euid, groups))
        key = s.data_key(data_seq)
        s.bodies[key] = compress_object(body)
        s.data_keys.append(key)
        meta_seq += 1
        ended = tuple(
            RootEnded(
                e.root,
                t + 900,
                ExecutionEndStatus.SUCCEEDED,
                ROOT_ENDED_FLAG_ROOT_STARTED_LOST if e.root_started_lost else 0,
                data_seq,
                data_seq,
                1,
            )
            for e in ends
        )
        _put_meta(s, MetaSegment(meta_seq, s.euid, data_seq, ended))
        for e in ends:
            started = s.where.get(e.execution_id, (None, None, None))[0]
            s.where[e.execution_id] = (started, meta_seq, data_seq)
    return s


def _put_meta(s: Stream, segment: MetaSegment) -> None:
    key = s.meta_key(segment.sequence)
    s.bodies[key] = compress_object(encode_meta_segment(segment))
    s.meta_keys.append(key)


def corrupt(body: bytes) -> bytes:
    """The same object with its trailing checksum broken (decompresses, fails verification)."""
    from formats.zstd_frame import decompress_object

    raw = bytearray(decompress_object(body))
    raw[-1] ^= 0xFF
    return compress_object(bytes(raw))


def upload(
    s3: Any,
    bucket: str,
    s: Stream,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    corrupted: set[str] | frozenset[str] = frozenset(),
) -> None:
    """The function table, then data, then meta: the publisher's order."""
    s3.put_object(
        Bucket=bucket,
        Key=object_keys.table_key(s.scope, TABLE_CID),
        Body=compress_object(encode_cas_object(CODEC_FUNCTION_TABLE, TABLE_BODY)),
    )
    for key in [*s.data_keys, *s.meta_keys]:
        if key in skip:
            continue
        body = corrupt(s.bodies[key]) if key in corrupted else s.bodies[key]
        s3.put_object(Bucket=bucket, Key=key, Body=body)
