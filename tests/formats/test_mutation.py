"""Mutation fuzzing: random byte flips and truncations raise only FormatError subclasses.

Seeded and bounded (about 3000 mutations in total). Each corpus file is a real
encoding of every record kind; a flip must either be caught (almost always by
the trailing SHA-256) or decode cleanly, and nothing but a FormatError may
escape. A second pass re-seals the trailer after each flip so the structural
checks behind the checksum are exercised too.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from test_golden_upstream import _evidence_fixture
from test_meta_segment import GOOD as META_GOOD

from formats.cas import decode_cas_object, encode_cas_object
from formats.cct import CctCounters, CctPayload, ContextDelta, OverflowDelta, OverflowReason
from formats.data_segment import DataGroup, DataSegment, decode_data_segment, encode_data_segment
from formats.errors import ChecksumMismatchError, FormatError
from formats.evidence import CallScope, LogEvent, ValueAvailable, ValueLossReason, ValueLost
from formats.function_table import (
    FunctionEntry,
    FunctionFile,
    FunctionSpan,
    FunctionTable,
    decode_function_table,
    encode_function_table,
)
from formats.ids import CallSite, ContextTuple, EdgeKind, ThreadRef
from formats.integrity import append_trailer
from formats.meta_segment import (
    EngineStarted,
    ExecutionEndStatus,
    HealthSnapshot,
    MetaSegment,
    RootEnded,
    decode_meta_segment,
    encode_meta_segment,
)

EUID = bytes([1]) * 16


def _data_file() -> bytes:
    t = ContextTuple(bytes(16), None, 3, CallSite(1, 2, 3, 4), EdgeKind.ROOT)
    cct = CctPayload(
        (
            ContextDelta.for_tuple(t, CctCounters(1, 1, 1, 0, 0, 0, 100, 0, 0, 0)),
            ContextDelta(bytes(32), None, CctCounters()),
        ),
        (OverflowDelta(OverflowReason(1), EdgeKind.CALL, CctCounters(inclusive_ns=5)),),
    )
    call = _evidence_fixture()[1].call_ref
    facts = [
        *_evidence_fixture(),
        LogEvent(
            call,
            1,
            "info",
            None,
            3,
            "m",
            "e",
            "d",
            ValueLost(ValueLossReason(2)),
            ValueAvailable(bytes(32), 1, 2),
        ),
        CallScope(call, "u", ValueLost(ValueLossReason(0))),
    ]
    groups = (
        DataGroup.build(ThreadRef(EUID, 1, 1), cct=cct, facts=facts),
        DataGroup.build(ThreadRef(EUID, 1, 2), facts=facts[:3]),
    )
    return encode_data_segment(DataSegment(3, EUID, groups))


def _meta_file() -> bytes:
    records = (
        EngineStarted(1, bytes(16), bytes(32), None, "abc"),
        RootEnded(
            ThreadRef(EUID, 1, 1), 9, ExecutionEndStatus.PANICKED, 1, 1, 3, 3, HealthSnapshot(*range(26))
        ),
    )
    return encode_meta_segment(MetaSegment(2, EUID, 3, records))


def _table_body() -> bytes:
    return encode_function_table(
        FunctionTable(
            (
                FunctionEntry(
                    1, "a.B", "B", "k", 0, None, 0, "a.baml", FunctionSpan(1, 2, 3), "a", ("x", "y")
                ),
                FunctionEntry(4, "c", "c"),
            ),
            (FunctionFile(1, "a.baml"), FunctionFile(2, "b.baml")),
        )
    )


CORPUS: dict[str, tuple[bytes, Callable[[bytes], object], bool]] = {
    "meta": (META_GOOD, decode_meta_segment, True),
    "meta2": (_meta_file(), decode_meta_segment, True),
    "data": (_data_file(), lambda b: decode_data_segment(b, deep=True), True),
    "cas": (encode_cas_object(1, b"\x1a\x05hello" * 20), decode_cas_object, True),
    "table-cas": (encode_cas_object(2, _table_body()), decode_cas_object, True),
    "table": (_table_body(), decode_function_table, False),
}


def _mutate(rng: random.Random, data: bytes) -> bytes:
    choice = rng.random()
    if choice < 0.15:
        return data[: rng.randrange(len(data))]
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
    return bytes(buf)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_flips_and_truncations_raise_only_format_errors(name: str) -> None:
    data, decode, trailer = CORPUS[name]
    decode(data)  # the corpus itself is valid
    rng = random.Random(f"mutation-{name}")
    caught = 0
    n = 300
    for _ in range(n):
        mutated = _mutate(rng, data)
        try:
            decode(mutated)
        except FormatError:
            caught += 1
    if trailer:
        assert caught == n, "a flip escaped the trailing SHA-256"


@pytest.mark.parametrize("name", [k for k, v in CORPUS.items() if v[2]])
def test_flips_behind_a_resealed_trailer_raise_only_format_errors(name: str) -> None:
    data, decode, _ = CORPUS[name]
    rng = random.Random(f"resealed-{name}")
    outcomes: dict[str, int] = {}
    for _ in range(200):
        body = _mutate(rng, data[:-32])
        if not body:
            continue
        try:
            decode(append_trailer(body))
            key = "ok"
        except ChecksumMismatchError as exc:
            key = exc.reason
        except FormatError as exc:
            key = exc.reason
        outcomes[key] = outcomes.get(key, 0) + 1
    assert sum(outcomes.values()) > 150
    assert len(outcomes) > 1, outcomes
