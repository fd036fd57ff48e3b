"""Data segment codec: round trips, layout, group ordering and bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from prof_strategies import data_segments

from formats.cct import CounterHealth
from formats.data_segment import (
    DataGroup,
    DataSegment,
    decode_data_file,
    decode_data_segment,
    encode_data_segment,
    read_data_header,
    sorted_groups,
)
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
from formats.evidence import ThreadEnd, ThreadEndStatus
from formats.ids import ThreadRef
from formats.integrity import append_trailer
from formats.segment_names import Plane, segment_relative_path
from formats.wire import EncodeError

EUID = bytes([7]) * 16


def group(thread_id: int, evidence: bytes = b"e", cct: bytes = b"") -> DataGroup:
    return DataGroup(ThreadRef(EUID, 1, thread_id), CounterHealth(), 1 if cct else 0, cct, 1, evidence)


def seg(*groups: DataGroup, sequence: int = 1) -> bytes:
    return encode_data_segment(DataSegment(sequence, EUID, groups))


@settings(max_examples=60, deadline=None)
@given(data_segments())
def test_round_trip_deep(segment: DataSegment) -> None:
    data = encode_data_segment(segment)
    out = decode_data_segment(data, expected_euid=segment.euid, expected_sequence=segment.sequence, deep=True)
    assert out == segment
    assert encode_data_segment(out) == data
    for g in out.groups:
        ev = g.evidence_facts()
        assert len(ev) == g.evidence_record_count


def test_typed_group_round_trip() -> None:
    root = ThreadRef(EUID, 1, 1)
    fact = ThreadEnd(root, 5, ThreadEndStatus.ERRORED)
    g = DataGroup.build(root, facts=[fact], cct_health=CounterHealth(True, False, True))
    out = decode_data_segment(seg(g)).groups[0]
    assert out.cct_payload() is None
    assert out.evidence_facts() == [fact]
    assert out.cct_health == CounterHealth(True, False, True)


def test_layout() -> None:
    g = group(1, b"xyz")
    data = seg(g)
    assert data[:8] == b"BAMLDAT1"
    assert struct.unpack(">HQ", data[8:18]) == (2, 1)
    assert data[18:34] == EUID
    assert struct.unpack(">QQ", data[34:50]) == (1, 65 + 3)
    assert data[50:82] == g.root.to_bytes()
    assert data[82] == 0
    head = read_data_header(data)
    assert (head.plane, head.sequence, head.euid) == (Plane.DATA, 1, EUID)
    with pytest.raises(BadMagicError):
        read_data_header(encode_data_segment(DataSegment(1, EUID, ()))[:0] + b"BAMLMET1" + data[8:])


def test_payload_offsets_point_into_the_file() -> None:
    data = seg(group(1, b"\x00" * 8))
    g = decode_data_segment(data, file="d").groups[0]
    with pytest.raises(FormatError) as e:
        g.evidence_facts()  # count 0 but header says 1
    assert e.value.file == "d" and 50 < (e.value.offset or 0) < len(data)


def test_sorted_groups_helper() -> None:
    a, b = group(1), group(2)
    assert sorted_groups([b, a]) == (a, b)
    with pytest.raises(EncodeError):
        sorted_groups([a, a])


def test_decode_file(tmp_path) -> None:
    path = tmp_path / segment_relative_path(EUID, Plane.DATA, 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(seg(group(1), sequence=3))
    assert decode_data_file(str(path)).sequence == 3
    other = tmp_path / segment_relative_path(bytes(16), Plane.DATA, 3)
    other.parent.mkdir(parents=True)
    other.write_bytes(path.read_bytes())
    with pytest.raises(IdentityMismatchError):
        decode_data_file(str(other))


# -- bad input ----------------------------------------------------------------------------

GOOD = seg(group(1), group(2, cct=b"c"))


def rehash(body: bytes) -> bytes:
    return append_trailer(body)


def test_unsorted_groups() -> None:
    with pytest.raises(MalformedError) as e:
        decode_data_segment(seg(group(2), group(1)))
    assert e.value.reason == "unsorted_groups"


def test_duplicate_group() -> None:
    with pytest.raises(MalformedError) as e:
        decode_data_segment(seg(group(1), group(1)))
    assert e.value.reason == "duplicate_group"


def test_empty_group() -> None:
    with pytest.raises(MalformedError) as e:
        decode_data_segment(seg(DataGroup(ThreadRef(EUID, 1, 1), CounterHealth(), 0, b"", 0, b"")))
    assert e.value.reason == "empty_group"


def test_reserved_health_bits() -> None:
    bad = bytearray(GOOD[:-32])
    bad[82] = 0x80
    with pytest.raises(MalformedError) as e:
        decode_data_segment(rehash(bytes(bad)))
    assert e.value.reason == "invalid_health" and e.value.offset == 82


def test_truncated() -> None:
    with pytest.raises(TruncatedError):
        decode_data_segment(GOOD[:31])
    for cut in range(len(GOOD)):
        with pytest.raises(FormatError):
            decode_data_segment(GOOD[:cut])


def test_bad_magic_version_checksum() -> None:
    with pytest.raises(BadMagicError):
        decode_data_segment(rehash(b"XAMLDAT1" + GOOD[8:-32]))
    with pytest.raises(UnsupportedVersionError):
        decode_data_segment(rehash(GOOD[:8] + b"\x00\x01" + GOOD[10:-32]))
    flipped = bytearray(GOOD)
    flipped[-1] ^= 0xFF
    with pytest.raises(ChecksumMismatchError):
        decode_data_segment(bytes(flipped))


def test_wrong_euid_and_sequence() -> None:
    with pytest.raises(IdentityMismatchError):
        decode_data_segment(GOOD, expected_euid=bytes(16))
    with pytest.raises(IdentityMismatchError):
        decode_data_segment(GOOD, expected_sequence=9)


def test_oversize_lengths() -> None:
    bad = bytearray(GOOD[:-32])
    bad[34:42] = struct.pack(">Q", 2**50)  # group_count
    with pytest.raises(LimitExceededError):
        decode_data_segment(rehash(bytes(bad)))
    bad = bytearray(GOOD[:-32])
    bad[91:99] = struct.pack(">Q", 2**40)  # first group's cct_len
    with pytest.raises(LimitExceededError) as e:
        decode_data_segment(rehash(bytes(bad)))
    assert e.value.reason == "oversize_length"


def test_trailing_bytes() -> None:
    with pytest.raises(TrailingBytesError):
        decode_data_segment(rehash(GOOD[:-32] + b"\x00"))
    bad = bytearray(GOOD[:-32] + b"\x00")
    bad[42:50] = struct.pack(">Q", struct.unpack(">Q", bad[42:50])[0] + 1)
    with pytest.raises(TrailingBytesError):
        decode_data_segment(rehash(bytes(bad)))
