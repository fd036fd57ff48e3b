"""CCT payload codec: round trips, key verification, counts and bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from prof_strategies import cct_payloads

from formats import cct
from formats.cct import (
    CctCounters,
    CctPayload,
    ContextDelta,
    CounterHealth,
    OverflowDelta,
    OverflowReason,
    decode_cct_health,
    decode_cct_payload,
    encode_cct_payload,
)
from formats.errors import FormatError, LimitExceededError, MalformedError, TrailingBytesError, TruncatedError
from formats.ids import CallSite, ContextTuple, EdgeKind
from formats.wire import EncodeError

TUPLE = ContextTuple(bytes(16), None, 3, CallSite(1, 2, 3, 4), EdgeKind.CALL)
BIG = CctCounters(1, 2, 3, 4, 5, 6, 2**100 + 7, 2**127, 9, 10)


@settings(max_examples=80, deadline=None)
@given(cct_payloads)
def test_round_trip(payload: CctPayload) -> None:
    data = encode_cct_payload(payload)
    assert decode_cct_payload(data, payload.record_count) == payload


def test_layout_of_one_context_and_one_overflow() -> None:
    payload = CctPayload(
        (ContextDelta.for_tuple(TUPLE, BIG),),
        (OverflowDelta(OverflowReason.INVALID_PARENT_CONTEXT, EdgeKind.SPAWN, CctCounters()),),
    )
    data = encode_cct_payload(payload)
    assert struct.unpack(">Q", data[:8]) == (1,)
    tuple_len = 16 + 1 + 4 + 1 + 16 + 1
    assert len(data) == 8 + 32 + 1 + tuple_len + 104 + 8 + 2 + 104
    counters_at = 8 + 32 + 1 + tuple_len
    assert data[counters_at + 48 : counters_at + 64] == (2**100 + 7).to_bytes(16, "big")
    assert data[-106:-104] == b"\x01\x02"


def test_health_byte() -> None:
    assert CounterHealth(True, True, True).to_byte() == 7
    assert decode_cct_health(5) == CounterHealth(True, False, True)
    with pytest.raises(MalformedError):
        decode_cct_health(8)


def test_context_key_must_match_tuple() -> None:
    data = bytearray(encode_cct_payload(CctPayload((ContextDelta.for_tuple(TUPLE, BIG),))))
    data[8] ^= 1
    with pytest.raises(MalformedError) as e:
        decode_cct_payload(bytes(data), 1)
    assert e.value.reason == "context_key_mismatch" and e.value.offset == 8


def test_record_count_mismatch() -> None:
    data = encode_cct_payload(CctPayload((ContextDelta(bytes(32), None, BIG),)))
    with pytest.raises(MalformedError) as e:
        decode_cct_payload(data, 2)
    assert e.value.reason == "record_count_mismatch"


def test_every_truncation_fails_typed() -> None:
    data = encode_cct_payload(CctPayload((ContextDelta.for_tuple(TUPLE, BIG),)))
    for cut in range(len(data)):
        with pytest.raises(FormatError):
            decode_cct_payload(data[:cut], 1)
    with pytest.raises(TruncatedError):
        decode_cct_payload(data[:4], 1)


def test_trailing_bytes() -> None:
    data = encode_cct_payload(CctPayload())
    with pytest.raises(TrailingBytesError):
        decode_cct_payload(data + b"\x00", 0)


def test_oversize_count() -> None:
    with pytest.raises(LimitExceededError):
        decode_cct_payload(struct.pack(">Q", 10) + bytes(200), 10)


def test_unknown_edge_and_reason() -> None:
    data = bytearray(
        encode_cct_payload(CctPayload((), (OverflowDelta(OverflowReason(0), EdgeKind.ROOT, CctCounters()),)))
    )
    data[16] = 2
    with pytest.raises(MalformedError):
        decode_cct_payload(bytes(data), 1)
    data[16] = 0
    data[17] = 3
    with pytest.raises(MalformedError) as e:
        decode_cct_payload(bytes(data), 1)
    assert e.value.reason == "unknown_tag" and e.value.offset == 17


def test_counter_out_of_range_is_an_encode_error() -> None:
    with pytest.raises(EncodeError):
        encode_cct_payload(CctPayload((ContextDelta(bytes(32), None, CctCounters(inclusive_ns=2**128)),)))


def _outcome(data: bytes, count: int) -> object:
    try:
        return decode_cct_payload(data, count)
    except FormatError as exc:
        return (type(exc), str(exc), exc.offset, exc.reason)


def test_a_remembered_context_head_decodes_and_fails_as_a_first_sight_does() -> None:
    """Heads are decoded once per process (``cct._HEADS``): with every head of the payload
    remembered, each single-byte change and each truncation of it decodes, or fails with the
    same error at the same offset, as with nothing remembered."""
    parent = ContextTuple(bytes(range(16)), bytes(32), 7, None, EdgeKind.SPAWN)
    payload = CctPayload(
        (
            ContextDelta.for_tuple(TUPLE, BIG),
            ContextDelta.for_tuple(parent, CctCounters(1)),
            ContextDelta(bytes(32), None, CctCounters(2)),
        ),
        (OverflowDelta(OverflowReason(0), EdgeKind.ROOT, CctCounters()),),
    )
    data = encode_cct_payload(payload)
    variants = [data[:cut] for cut in range(len(data))]
    for at in range(len(data)):
        for byte in {0, 1, 2, data[at] ^ 1, 0xFF}:
            variants.append(data[:at] + bytes([byte]) + data[at + 1 :])
    cct._HEADS.clear()
    first_sight = []
    for v in variants:
        first_sight.append(_outcome(v, 4))
        cct._HEADS.clear()
    assert decode_cct_payload(data, 4) == payload
    assert len(cct._HEADS) == 2  # the two heads with a tuple
    remembered = [_outcome(v, 4) for v in variants]
    assert remembered == first_sight
    assert sum(isinstance(o, CctPayload) for o in first_sight) > len(data)  # counters decode as well
