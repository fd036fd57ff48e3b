"""CAS objects and CIDs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.cas import (
    CasObject,
    cas_relative_path,
    cid_from_path,
    cid_from_string,
    cid_to_string,
    decode_cas_file,
    decode_cas_object,
    encode_cas_object,
    read_cas_header,
    value_cid,
)
from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    IdentityMismatchError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.integrity import append_trailer


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([1, 2]), st.binary(max_size=300))
def test_round_trip(codec: int, body: bytes) -> None:
    data = encode_cas_object(codec, body)
    assert len(data) == 84 + len(body)
    obj = decode_cas_object(data)
    assert obj == CasObject.of(codec, body)
    head = read_cas_header(data)
    assert (head.codec, head.body_len, head.cid) == (codec, len(body), obj.cid)


def test_frame_layout() -> None:
    data = encode_cas_object(1, b"abc")
    assert data[:8] == b"BAMLVAL1"
    assert struct.unpack(">HHQ", data[8:20]) == (1, 1, 3)
    assert data[20:52] == value_cid(1, b"abc")
    assert data[52:55] == b"abc"


def test_cid_string_and_paths(tmp_path) -> None:
    cid = value_cid(1, b"x")
    text = cid_to_string(cid)
    assert text == "bamlv_1_" + cid.hex() and cid_from_string(text) == cid
    with pytest.raises(MalformedError):
        cid_from_string("bamlv_1_" + "A" * 64)
    rel = cas_relative_path(cid)
    assert cid_from_path(rel) == cid
    assert cid_from_path(f"evidence/v1/t/p/e/cas/values/{cid.hex()[:2]}/{cid.hex()}.bamlvalue.zst") == cid
    assert cid_from_path("cas/sha256/00/" + cid.hex() + ".bamlvalue") is None
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_cas_object(1, b"x"))
    assert decode_cas_file(str(path)).body == b"x"
    other = tmp_path / cas_relative_path(value_cid(1, b"y"))
    other.parent.mkdir(parents=True)
    other.write_bytes(path.read_bytes())
    with pytest.raises(IdentityMismatchError):
        decode_cas_file(str(other))


GOOD = encode_cas_object(1, b"hello")


def test_bad_input() -> None:
    with pytest.raises(TruncatedError):
        decode_cas_object(GOOD[:10])
    with pytest.raises(ChecksumMismatchError):
        decode_cas_object(GOOD[:-1] + bytes([GOOD[-1] ^ 1]))
    with pytest.raises(BadMagicError):
        decode_cas_object(append_trailer(b"BAMLVAL2" + GOOD[8:-32]))
    with pytest.raises(UnsupportedVersionError):
        decode_cas_object(append_trailer(GOOD[:8] + b"\x00\x02" + GOOD[10:-32]))
    with pytest.raises(UnsupportedVersionError) as e:
        decode_cas_object(append_trailer(GOOD[:10] + b"\x00\x03" + GOOD[12:-32]))
    assert e.value.reason == "unsupported_codec"
    with pytest.raises(LimitExceededError):
        decode_cas_object(append_trailer(GOOD[:12] + struct.pack(">Q", 6) + GOOD[20:-32]))
    with pytest.raises(TrailingBytesError):
        decode_cas_object(append_trailer(GOOD[:-32] + b"!"))


def test_cid_mismatch() -> None:
    forged = append_trailer(GOOD[:52] + b"hellp")
    with pytest.raises(ChecksumMismatchError) as e:
        decode_cas_object(forged)
    assert e.value.reason == "cid_mismatch"


def test_expected_cid_and_codec() -> None:
    with pytest.raises(IdentityMismatchError):
        decode_cas_object(GOOD, expected_cid=bytes(32))
    with pytest.raises(IdentityMismatchError):
        decode_cas_object(GOOD, expected_codec=2)


def test_header_peek_errors() -> None:
    with pytest.raises(TruncatedError):
        read_cas_header(GOOD[:40])
    with pytest.raises(TruncatedError):
        read_cas_header(GOOD[:-1])
    with pytest.raises(TrailingBytesError):
        read_cas_header(GOOD + b"\x00")
    with pytest.raises(BadMagicError):
        read_cas_header(b"BAMLMET1" + GOOD[8:])
