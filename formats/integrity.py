"""The trailing SHA-256 every profiler file ends with (publisher guide, "Conventions")."""

from __future__ import annotations

import hashlib

from formats.errors import ChecksumMismatchError, TruncatedError

DIGEST_LEN = 32


def split_trailer(data: bytes, *, file: str | None = None) -> tuple[bytes, bytes]:
    """Split ``data`` into (body, trailing digest) or raise TruncatedError."""
    if len(data) < DIGEST_LEN:
        raise TruncatedError(
            f"{len(data)} bytes cannot hold a {DIGEST_LEN}-byte trailer", file=file, offset=0
        )
    return data[:-DIGEST_LEN], data[-DIGEST_LEN:]


def verify_trailer(data: bytes, *, file: str | None = None) -> bytes:
    """Check the trailing SHA-256 over every preceding byte; return the body without it."""
    body, digest = split_trailer(data, file=file)
    if hashlib.sha256(body).digest() != digest:
        raise ChecksumMismatchError(
            "trailing SHA-256 does not match the preceding bytes", file=file, offset=len(body)
        )
    return body


def has_valid_trailer(data: bytes) -> bool:
    return len(data) >= DIGEST_LEN and hashlib.sha256(data[:-DIGEST_LEN]).digest() == data[-DIGEST_LEN:]


def append_trailer(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()
