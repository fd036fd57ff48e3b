"""Wire primitives and the segment path/header helpers."""

from __future__ import annotations

import pytest

from formats.errors import (
    BadMagicError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.segment_names import Plane, parse_segment_path, read_segment_header, segment_relative_path
from formats.wire import MAX_STRING_BYTES, EncodeError, Reader, Writer


def test_integers_round_trip_big_endian() -> None:
    w = Writer()
    w.u8(1)
    w.u16(0x0203)
    w.u32(0x04050607)
    w.u64(2**64 - 1)
    w.u128(2**127 + 5)
    data = w.getvalue()
    assert data[:7] == bytes([1, 2, 3, 4, 5, 6, 7])
    r = Reader(data)
    assert (r.u8(), r.u16(), r.u32(), r.u64(), r.u128()) == (1, 0x0203, 0x04050607, 2**64 - 1, 2**127 + 5)
    r.finish("x")


@pytest.mark.parametrize("method", ["u8", "u16", "u32", "u64", "u128"])
def test_out_of_range_is_encode_error(method: str) -> None:
    with pytest.raises(EncodeError):
        getattr(Writer(), method)(-1)


def test_reader_errors_carry_file_and_absolute_offset() -> None:
    r = Reader(b"\x00\x00\x00\x05ab", file="f", base=100)
    with pytest.raises(LimitExceededError) as e:
        r.string("s")
    assert (e.value.file, e.value.offset, e.value.reason) == ("f", 104, "oversize_length")
    with pytest.raises(TruncatedError) as t:
        Reader(b"\x00", file="f", base=10).u32("n")
    assert t.value.offset == 10
    with pytest.raises(TrailingBytesError):
        Reader(b"\x00").finish("x")
    with pytest.raises(MalformedError):
        Reader(b"\x02").flag("f")


def test_string_cap_and_utf8() -> None:
    w = Writer()
    w.string("é" * 10, "s")
    assert Reader(w.getvalue()).string("s") == "é" * 10
    with pytest.raises(EncodeError):
        Writer().string("a" * (MAX_STRING_BYTES + 1), "s")
    Writer().string("a" * MAX_STRING_BYTES, "s")
    big = (MAX_STRING_BYTES + 1).to_bytes(4, "big") + b"a" * (MAX_STRING_BYTES + 1)
    with pytest.raises(LimitExceededError) as e:
        Reader(big).string("s")
    assert e.value.reason == "string_too_long"
    with pytest.raises(MalformedError) as m:
        Reader(b"\x00\x00\x00\x01\xff").string("s")
    assert m.value.reason == "bad_utf8"


def test_segment_paths() -> None:
    euid = bytes(range(16))
    rel = segment_relative_path(euid, Plane.META, 7)
    assert rel == f"streams/{euid.hex()}/meta/00000000000000000007.bamlmeta"
    loc = parse_segment_path("/x/.baml/profiles-v1/" + rel)
    assert (loc.euid, loc.plane, loc.sequence) == (euid, Plane.META, 7)
    key = f"evidence/v1/t/p/e/streams/{euid.hex()}/data/00000000000000000009.bamldata.zst"
    assert parse_segment_path(key).plane is Plane.DATA
    for bad in (
        f"streams/{euid.hex()}/meta/7.bamlmeta",
        f"streams/{euid.hex()}/meta/00000000000000000007.bamldata",
        "streams/XYZ/meta/00000000000000000007.bamlmeta",
    ):
        with pytest.raises(MalformedError):
            parse_segment_path(bad)


def test_header_peek_rejects_without_hashing() -> None:
    with pytest.raises(TruncatedError):
        read_segment_header(b"BAMLMET1")
    with pytest.raises(BadMagicError):
        read_segment_header(b"NOTMAGIC" + bytes(26))
    with pytest.raises(UnsupportedVersionError):
        read_segment_header(b"BAMLMET1\x00\x09" + bytes(24))
