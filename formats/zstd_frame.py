"""One zstd frame per object, with fixed reference settings (docs/objects.md).

Every object in the bucket is one profiler file (or one value pack) compressed as
exactly one frame:

* level 3 (zstd's default: fast, and the ratio barely moves above it for these files);
* the decompressed size written in the frame header, so a reader can bound memory
  before it decompresses anything;
* the 4-byte content checksum (XXH64) on, so corruption is detected by zstd itself,
  including in a pack's manifest, which has no SHA-256 of its own;
* no dictionary id, single-threaded (multi-threaded zstd may emit different bytes).

With one libzstd version, the same input therefore always gives the same object,
which the gateway relies on (``stored`` vs ``conflict`` compares checksums).

:func:`decompress_object` returns the exact file or raises a
:class:`formats.errors.FormatError`; no ``zstandard.ZstdError`` escapes.
"""

from __future__ import annotations

import zstandard

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
)

LEVEL = 3
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Above the largest profiler file (16 MiB values, 4 MiB segment target, oversize data groups).
DEFAULT_MAX_OUTPUT = 512 * 1024 * 1024

_COMPRESSOR_ARGS = {
    "level": LEVEL,
    "write_content_size": True,
    "write_checksum": True,
    "write_dict_id": False,
}


def compress_object(raw: bytes | bytearray | memoryview) -> bytes:
    """Compress one whole file into one frame with the reference settings."""
    # A compressor is cheap and not thread-safe; one per call keeps this function thread-safe.
    return zstandard.ZstdCompressor(**_COMPRESSOR_ARGS).compress(raw)  # type: ignore[arg-type]


def _is_frame_start(data: bytes) -> bool:
    # A zstd frame, or a skippable frame (magic 0x184D2A50..0x184D2A5F, little-endian).
    return data[:4] == ZSTD_MAGIC or (
        len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50
    )


def decompress_object(
    data: bytes | bytearray | memoryview, *, file: str | None = None, max_output: int = DEFAULT_MAX_OUTPUT
) -> bytes:
    """Decompress an object written by :func:`compress_object`.

    Rejects: input that does not start with a zstd frame (``bad_magic``), a frame
    without a declared content size (``no_content_size``), a declared size above
    ``max_output`` (``limit_exceeded``), a cut frame (``truncated``), a second frame
    (``multi_frame``), other bytes after the frame (``trailing_bytes``), a failed
    content checksum (``checksum_mismatch``) and any other corrupt frame (``malformed``).
    """
    data = bytes(data)
    if len(data) < 4:
        raise TruncatedError(f"{len(data)} bytes cannot hold a zstd frame header", file=file, offset=0)
    if data[:4] != ZSTD_MAGIC:
        raise BadMagicError("object does not start with a zstd frame", file=file, offset=0)
    try:
        params = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError:
        raise TruncatedError("zstd frame header is incomplete or invalid", file=file, offset=0) from None
    if params.content_size == zstandard.CONTENTSIZE_UNKNOWN:
        raise MalformedError(
            "zstd frame does not declare its content size", file=file, offset=4, reason="no_content_size"
        )
    if params.content_size > max_output:
        raise LimitExceededError(
            f"declared content size {params.content_size} exceeds the limit {max_output}", file=file, offset=4
        )
    dobj = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = dobj.decompress(data)
    except zstandard.ZstdError as exc:
        if "checksum" in str(exc).lower():
            raise ChecksumMismatchError("zstd content checksum does not match", file=file) from None
        raise MalformedError("zstd frame is corrupt", file=file) from None
    if not dobj.eof:
        raise TruncatedError("zstd frame ends before its last block", file=file, offset=len(data))
    rest = dobj.unused_data
    frame_end = len(data) - len(rest)
    if rest:
        if _is_frame_start(rest):
            raise MalformedError(
                "object holds more than one zstd frame", file=file, offset=frame_end, reason="multi_frame"
            )
        raise TrailingBytesError(f"{len(rest)} bytes follow the zstd frame", file=file, offset=frame_end)
    if len(out) != params.content_size:  # zstd checks this itself; kept as a cheap guard
        raise MalformedError("decompressed size differs from the declared content size", file=file)
    return out


def is_reference_frame(data: bytes) -> bool:
    """True when ``data`` is one frame with the header flags :func:`compress_object` sets."""
    try:
        params = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError:
        return False
    return (
        data[:4] == ZSTD_MAGIC
        and params.content_size != zstandard.CONTENTSIZE_UNKNOWN
        and params.has_checksum
        and params.dict_id == 0
    )
