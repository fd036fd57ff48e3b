"""Evidence payload codec: every tag round-trips; nested records; bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from prof_strategies import fact_lists, facts

from formats.errors import (
    BadMagicError,
    FormatError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    UnsupportedVersionError,
)
from formats.evidence import (
    MAX_THREAD_NAME_LEN,
    CallScope,
    ErrorCaptureLossReason,
    ErrorTargetLost,
    FactTag,
    LogEvent,
    TerminalErrorRef,
    ThreadStart,
    ThreadStartKind,
    ValueAvailable,
    ValueLossReason,
    ValueLost,
    capped_thread_name,
    decode_evidence_payload,
    encode_evidence_payload,
    encode_fact,
)
from formats.ids import CallRef, CallSite

CALL = CallRef(bytes([1]) * 16, 2, 3, 4)
THREAD = CALL.thread


@settings(max_examples=100, deadline=None)
@given(fact_lists)
def test_round_trip(items: list) -> None:
    data = encode_evidence_payload(items)
    assert decode_evidence_payload(data, len(items)) == items


@settings(max_examples=60, deadline=None)
@given(facts)
def test_single_fact_every_truncation_is_typed(fact) -> None:
    data = encode_evidence_payload([fact])
    for cut in range(0, len(data), max(1, len(data) // 12)):
        with pytest.raises(FormatError):
            decode_evidence_payload(data[:cut], 1)


def test_tags_cover_the_real_source() -> None:
    assert [t.value for t in FactTag] == list(range(10))


def test_log_event_uses_u64_string_lengths() -> None:
    log = LogEvent(
        CALL,
        1234,
        "info",
        CallSite(2, 3, 4, 5),
        6,
        "m",
        None,
        "é",
        ValueLost(ValueLossReason(3)),
        ValueAvailable(bytes(32), 1, 9),
    )
    tag, body = encode_fact(log)
    assert tag == 8
    assert body[49:58] == b"\x01" + struct.pack(">Q", 4)  # level "info"
    assert decode_evidence_payload(encode_evidence_payload([log]), 1) == [log]


def test_call_scope_with_empty_distinct_id() -> None:
    fact = CallScope(CALL, "", ValueAvailable(bytes([3]) * 32, 1, 2))
    assert decode_evidence_payload(encode_evidence_payload([fact]), 1) == [fact]


def test_terminal_error_lost_target() -> None:
    fact = TerminalErrorRef(CALL, ErrorTargetLost(ErrorCaptureLossReason.MISSING_STRUCTURAL_JOIN))
    tag, body = encode_fact(fact)
    assert tag == 5 and body[:8] == b"BAMLTER1" and body[-2:] == b"\x01\x01"
    assert decode_evidence_payload(encode_evidence_payload([fact]), 1) == [fact]


def test_thread_name_capped_on_char_boundary() -> None:
    name = "a" * (MAX_THREAD_NAME_LEN - 1) + "é" + "tail"
    assert capped_thread_name(name) == b"a" * (MAX_THREAD_NAME_LEN - 1)
    fact = ThreadStart(THREAD, None, None, None, 1, ThreadStartKind.ROOT, name)
    out = decode_evidence_payload(encode_evidence_payload([fact]), 1)[0]
    assert isinstance(out, ThreadStart) and out.name == "a" * (MAX_THREAD_NAME_LEN - 1)


# -- bad input ---------------------------------------------------------------------------


def frame(tag: int, body: bytes) -> bytes:
    return struct.pack(">Q", 1) + bytes([tag]) + struct.pack(">I", len(body)) + body


def test_unknown_tag() -> None:
    with pytest.raises(MalformedError) as e:
        decode_evidence_payload(frame(10, b""), 1, base=100)
    assert e.value.reason == "unknown_tag" and e.value.offset == 108


def test_unknown_enum_value() -> None:
    body = THREAD.to_bytes() + struct.pack(">Q", 1) + b"\x03"  # ThreadEnd status 3
    with pytest.raises(MalformedError):
        decode_evidence_payload(frame(7, body), 1)


def test_thread_name_too_long() -> None:
    body = (
        THREAD.to_bytes() + b"\x00\x00\x00" + struct.pack(">QB", 1, 0) + struct.pack(">I", 257) + b"a" * 257
    )
    with pytest.raises(LimitExceededError) as e:
        decode_evidence_payload(frame(6, body), 1)
    assert e.value.reason == "name_too_long"


def test_thread_name_bad_utf8() -> None:
    body = THREAD.to_bytes() + b"\x00\x00\x00" + struct.pack(">QB", 1, 0) + struct.pack(">I", 1) + b"\xff"
    with pytest.raises(MalformedError) as e:
        decode_evidence_payload(frame(6, body), 1)
    assert e.value.reason == "bad_utf8"


def test_reserved_role_bits() -> None:
    from formats.evidence import NormalContext, SpanStart
    from formats.ids import EdgeKind

    _, body = encode_fact(
        SpanStart(CALL, None, THREAD, NormalContext(bytes(32)), 1, None, EdgeKind.ROOT, 0, 1, 7)
    )
    bad = bytearray(body)
    bad[-2] = 0x08  # roles
    with pytest.raises(MalformedError) as e:
        decode_evidence_payload(frame(0, bytes(bad)), 1)
    assert e.value.reason == "invalid_bits"


def test_nested_error_record_magic_and_version() -> None:
    _, body = encode_fact(TerminalErrorRef(CALL, ErrorTargetLost(ErrorCaptureLossReason(0))))
    with pytest.raises(BadMagicError):
        decode_evidence_payload(frame(5, b"BAMLERR1" + body[8:]), 1)
    with pytest.raises(UnsupportedVersionError):
        decode_evidence_payload(frame(5, body[:8] + b"\x00\x02" + body[10:]), 1)


def test_trailing_bytes_in_body_and_payload() -> None:
    body = THREAD.to_bytes() + struct.pack(">QB", 1, 0)
    with pytest.raises(TrailingBytesError):
        decode_evidence_payload(frame(7, body + b"\x00"), 1)
    with pytest.raises(TrailingBytesError):
        decode_evidence_payload(frame(7, body) + b"\x00", 1)


def test_oversize_body_length_and_count() -> None:
    with pytest.raises(LimitExceededError):
        decode_evidence_payload(struct.pack(">Q", 1) + b"\x07" + struct.pack(">I", 999) + bytes(10), 1)
    with pytest.raises(LimitExceededError):
        decode_evidence_payload(struct.pack(">Q", 2**60), 2**60)


def test_record_count_mismatch() -> None:
    body = THREAD.to_bytes() + struct.pack(">QB", 1, 0)
    with pytest.raises(MalformedError) as e:
        decode_evidence_payload(frame(7, body), 2)
    assert e.value.reason == "record_count_mismatch"


def test_log_string_bad_utf8() -> None:
    body = b"\x00" + struct.pack(">Q", 1) + b"\x01" + struct.pack(">Q", 1) + b"\xff"
    with pytest.raises(MalformedError) as e:
        decode_evidence_payload(frame(8, body), 1)
    assert e.value.reason == "bad_utf8"
