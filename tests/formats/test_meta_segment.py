"""Meta segment codec: round trips, table-driven bytes, one test per bad-input reason."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from prof_strategies import meta_segments

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    FormatError,
    IdentityMismatchError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.ids import ThreadRef
from formats.integrity import append_trailer
from formats.meta_segment import (
    HEALTH_LEN,
    EngineStarted,
    ExecutionEndStatus,
    HealthSnapshot,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
    decode_meta_file,
    decode_meta_segment,
    encode_meta_segment,
    read_meta_header,
)
from formats.segment_names import Plane, segment_relative_path
from formats.wire import EncodeError

EUID = bytes(range(16))
ROOT = ThreadRef(EUID, 1, 3)


def rehash(data: bytes) -> bytes:
    """Recompute the trailer after editing the body, so the decoder reaches later checks."""
    return append_trailer(data[:-32])


def segment(*records, sequence: int = 1) -> MetaSegment:
    return MetaSegment(sequence, EUID, 0, tuple(records))


@settings(max_examples=80, deadline=None)
@given(meta_segments())
def test_round_trip(seg: MetaSegment) -> None:
    data = encode_meta_segment(seg)
    assert decode_meta_segment(data, expected_euid=seg.euid, expected_sequence=seg.sequence) == seg
    assert encode_meta_segment(decode_meta_segment(data)) == data


# (record, body hex) pairs drive both directions.
TABLE = [
    (
        StreamStarted(42, 1000, "v", "a"),
        "0000002a00000000000003e800000001760000000161",
    ),
    (
        EngineStarted(1, bytes(16), None, None, "s"),
        "0000000000000001" + "00" * 16 + "0000010000000173",
    ),
    (
        RootStarted(ROOT, 10, bytes([9]) * 16),
        EUID.hex() + "00000000000000010000000000000003000000000000000a" + "09" * 16,
    ),
]


@pytest.mark.parametrize(
    ("record", "body_hex"), TABLE, ids=lambda v: type(v).__name__ if not isinstance(v, str) else ""
)
def test_table_encode_decode(record, body_hex: str) -> None:
    data = encode_meta_segment(segment(record))
    body = bytes.fromhex(body_hex)
    tag = {StreamStarted: 0, EngineStarted: 1, RootStarted: 2}[type(record)]
    assert data[58:-32] == bytes([tag]) + struct.pack(">I", len(body)) + body
    assert decode_meta_segment(data).records == (record,)


def test_header_layout_and_peek() -> None:
    data = encode_meta_segment(MetaSegment(5, EUID, 3, ()))
    assert data[:8] == b"BAMLMET1"
    assert struct.unpack(">HQ", data[8:18]) == (2, 5)
    assert data[18:34] == EUID
    assert struct.unpack(">QQQ", data[34:58]) == (3, 0, 0)
    assert len(data) == 58 + 32
    head = read_meta_header(data)
    assert (head.plane, head.version, head.sequence, head.euid) == (Plane.META, 2, 5, EUID)


def test_root_ended_health_is_26_u64() -> None:
    health = HealthSnapshot(*range(1, 27))
    rec = RootEnded(ROOT, 20, ExecutionEndStatus.ABANDONED, 1, 2, 3, 2, health)
    out = decode_meta_segment(encode_meta_segment(segment(rec))).records[0]
    assert out == rec and isinstance(out, RootEnded)
    assert out.root_started_lost and out.health.as_tuple() == tuple(range(1, 27))
    assert HEALTH_LEN == 208


def test_decode_file_checks_path(tmp_path) -> None:
    rel = segment_relative_path(EUID, Plane.META, 4)
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_meta_segment(segment(sequence=4)))
    assert decode_meta_file(str(path)).sequence == 4
    wrong = path.with_name("00000000000000000005.bamlmeta")
    wrong.write_bytes(path.read_bytes())
    with pytest.raises(IdentityMismatchError):
        decode_meta_file(str(wrong))


# -- bad input: one test per reason ------------------------------------------------------

GOOD = encode_meta_segment(segment(StreamStarted(1, 2, "x", "y"), RootStarted(ROOT, 1, bytes(16))))


def test_truncated() -> None:
    with pytest.raises(TruncatedError) as e:
        decode_meta_segment(GOOD[:20], file="m.bamlmeta")
    assert e.value.file == "m.bamlmeta"
    for cut in range(len(GOOD)):
        with pytest.raises(FormatError):
            decode_meta_segment(GOOD[:cut])


def test_bad_magic() -> None:
    with pytest.raises(BadMagicError) as e:
        decode_meta_segment(rehash(b"BAMLDAT1" + GOOD[8:]))
    assert e.value.offset == 0 and e.value.reason == "bad_magic"


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError) as e:
        decode_meta_segment(rehash(GOOD[:8] + b"\x00\x03" + GOOD[10:]))
    assert e.value.offset == 8


def test_bad_checksum() -> None:
    bad = bytearray(GOOD)
    bad[40] ^= 1
    with pytest.raises(ChecksumMismatchError) as e:
        decode_meta_segment(bytes(bad), file="f")
    assert e.value.reason == "checksum_mismatch" and e.value.file == "f"


def test_unknown_tag() -> None:
    bad = bytearray(GOOD[:-32])
    bad[58] = 9
    with pytest.raises(MalformedError) as e:
        decode_meta_segment(append_trailer(bytes(bad)))
    assert e.value.reason == "unknown_tag" and e.value.offset == 58


def test_unknown_status() -> None:
    rec = RootEnded(ROOT, 20, ExecutionEndStatus.FAILED, 0, 1, 1, 1)
    data = bytearray(encode_meta_segment(segment(rec))[:-32])
    data[58 + 5 + 40] = 5
    with pytest.raises(MalformedError, match="status"):
        decode_meta_segment(append_trailer(bytes(data)))


def test_oversize_length() -> None:
    bad = bytearray(GOOD[:-32])
    bad[50:58] = struct.pack(">Q", 10**9)  # payload_len
    with pytest.raises(LimitExceededError) as e:
        decode_meta_segment(append_trailer(bytes(bad)))
    assert e.value.reason == "oversize_length"


def test_record_count_larger_than_payload() -> None:
    bad = bytearray(GOOD[:-32])
    bad[42:50] = struct.pack(">Q", 2**40)
    with pytest.raises(LimitExceededError):
        decode_meta_segment(append_trailer(bytes(bad)))


def test_string_over_64k() -> None:
    with pytest.raises(EncodeError):
        encode_meta_segment(segment(StreamStarted(1, 2, "x" * 65537, "y")))
    body = struct.pack(">IQ", 1, 2) + struct.pack(">I", 65537) + b"x" * 65537 + struct.pack(">I", 0)
    payload = b"\x00" + struct.pack(">I", len(body)) + body
    head = b"BAMLMET1" + struct.pack(">HQ", 2, 1) + EUID + struct.pack(">QQQ", 0, 1, len(payload))
    with pytest.raises(LimitExceededError) as e:
        decode_meta_segment(append_trailer(head + payload))
    assert e.value.reason == "string_too_long"


def test_bad_utf8() -> None:
    data = encode_meta_segment(segment(StreamStarted(1, 2, "ab", "y")))
    i = data.index(b"ab")
    with pytest.raises(MalformedError) as e:
        decode_meta_segment(rehash(data[:i] + b"\xff\xfe" + data[i + 2 :]))
    assert e.value.reason == "bad_utf8" and e.value.offset == i


def test_wrong_euid() -> None:
    with pytest.raises(IdentityMismatchError) as e:
        decode_meta_segment(GOOD, expected_euid=bytes(16))
    assert e.value.offset == 18


def test_wrong_sequence() -> None:
    with pytest.raises(IdentityMismatchError) as e:
        decode_meta_segment(GOOD, expected_sequence=2)
    assert e.value.offset == 10


def test_stream_started_misplaced() -> None:
    late = encode_meta_segment(segment(RootStarted(ROOT, 1, bytes(16)), StreamStarted(1, 2, "x", "y")))
    with pytest.raises(MalformedError) as e:
        decode_meta_segment(late)
    assert e.value.reason == "misplaced_stream_started"
    with pytest.raises(MalformedError):
        decode_meta_segment(encode_meta_segment(segment(StreamStarted(1, 2, "x", "y"), sequence=2)))


def test_trailing_bytes_inside_file() -> None:
    with pytest.raises(TrailingBytesError):
        decode_meta_segment(append_trailer(GOOD[:-32] + b"\x00"))


def test_trailing_bytes_in_record_body() -> None:
    data = bytearray(encode_meta_segment(segment(RootStarted(ROOT, 1, bytes(16))))[:-32])
    data[59:63] = struct.pack(">I", 73)
    with pytest.raises(FormatError):
        decode_meta_segment(append_trailer(bytes(data) + b"\x00"))


def test_bad_health_length() -> None:
    rec = RootEnded(ROOT, 20, ExecutionEndStatus.FAILED, 0, 1, 1, 1)
    data = encode_meta_segment(segment(rec))
    i = data.index(struct.pack(">I", HEALTH_LEN))
    forged = data[:i] + struct.pack(">I", HEALTH_LEN - 8) + data[i + 4 : -40]
    forged = forged[:59] + struct.pack(">I", len(forged) - 63) + forged[63:]
    forged = forged[:50] + struct.pack(">Q", len(forged) - 58) + forged[58:]
    with pytest.raises(MalformedError) as e:
        decode_meta_segment(append_trailer(forged))
    assert e.value.reason == "invalid_health"


def test_bad_presence_flag() -> None:
    data = bytearray(encode_meta_segment(segment(EngineStarted(1, bytes(16))))[:-32])
    data[58 + 5 + 24] = 2
    with pytest.raises(MalformedError) as e:
        decode_meta_segment(append_trailer(bytes(data)))
    assert e.value.reason == "unknown_tag"
