"""zstd framing: reference settings, determinism and every rejection reason."""

from __future__ import annotations

import contextlib
import os

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import zstd_frame as zf
from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    FormatError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=4096))
def test_round_trip_and_determinism(raw: bytes) -> None:
    frame = zf.compress_object(raw)
    assert frame == zf.compress_object(raw)  # same bytes in, same object out
    assert zf.is_reference_frame(frame)
    assert zf.decompress_object(frame) == raw


def test_frame_header_carries_size_and_checksum() -> None:
    raw = os.urandom(1000) + b"a" * 100_000
    params = zstandard.get_frame_parameters(zf.compress_object(raw))
    assert params.content_size == len(raw)
    assert params.has_checksum
    assert params.dict_id == 0


def test_reference_level_is_three() -> None:
    raw = b"".join(b"line %d of a profiler file\n" % i for i in range(5000))
    expected = zstandard.ZstdCompressor(level=3, write_content_size=True, write_checksum=True).compress(raw)
    assert zf.compress_object(raw) == expected


def test_bad_magic() -> None:
    with pytest.raises(BadMagicError) as info:
        zf.decompress_object(b"BAMLMET1" + b"\x00" * 10, file="k")
    assert info.value.file == "k"


def test_too_short_is_truncated() -> None:
    with pytest.raises(TruncatedError):
        zf.decompress_object(b"\x28\xb5")


def test_cut_frame_is_truncated() -> None:
    frame = zf.compress_object(os.urandom(5000))
    with pytest.raises(TruncatedError):
        zf.decompress_object(frame[:-10])
    with pytest.raises(TruncatedError):
        zf.decompress_object(frame[:5])  # header itself incomplete


def test_missing_content_size_is_rejected() -> None:
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(b"abc")
    with pytest.raises(MalformedError) as info:
        zf.decompress_object(frame)
    assert info.value.reason == "no_content_size"
    streamed = zstandard.ZstdCompressor().compressobj()
    with pytest.raises(MalformedError):
        zf.decompress_object(streamed.compress(b"abc") + streamed.flush())


def test_oversize_output_is_rejected_before_decompressing() -> None:
    frame = zf.compress_object(b"\x00" * 10_000)
    with pytest.raises(LimitExceededError):
        zf.decompress_object(frame, max_output=9_999)
    assert zf.decompress_object(frame, max_output=10_000) == b"\x00" * 10_000


def test_two_frames_are_rejected() -> None:
    frame = zf.compress_object(b"one")
    with pytest.raises(MalformedError) as info:
        zf.decompress_object(frame + zf.compress_object(b"two"))
    assert info.value.reason == "multi_frame"
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"meta"
    with pytest.raises(MalformedError) as info:
        zf.decompress_object(frame + skippable)
    assert info.value.reason == "multi_frame"


def test_trailing_garbage_is_rejected() -> None:
    frame = zf.compress_object(b"payload" * 100)
    with pytest.raises(TrailingBytesError) as info:
        zf.decompress_object(frame + b"garbage")
    assert info.value.offset == len(frame)


def test_corrupt_content_checksum() -> None:
    frame = bytearray(zf.compress_object(os.urandom(2000)))
    frame[-1] ^= 0xFF  # the XXH64 checksum is the frame's last 4 bytes
    with pytest.raises(ChecksumMismatchError):
        zf.decompress_object(bytes(frame))


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=300), st.data())
def test_corruption_never_escapes_the_error_family(raw: bytes, data: st.DataObject) -> None:
    frame = bytearray(zf.compress_object(raw))
    i = data.draw(st.integers(0, len(frame) - 1))
    frame[i] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(FormatError):
        zf.decompress_object(bytes(frame))
