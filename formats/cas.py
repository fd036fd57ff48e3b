"""CAS objects (``BAMLVAL1``) and value CIDs.

Layout (real source ``store.rs`` ``encode_cas_object``; 84-byte frame)::

    +-----------+------------+-----------+--------------+---------+------+------------+
    | "BAMLVAL1"| u16 format | u16 codec | u64 body_len | cid[32] | body | sha256[32] |
    |  8 bytes  |   = 1      |           |              |         |      | over all   |
    +-----------+------------+-----------+--------------+---------+------+------------+

    cid = SHA-256("baml-value-v1" ‖ codec u16 BE ‖ body)      string form: bamlv_1_<hex64>

Decode order follows the real decoder: trailing SHA-256, magic, format
version, codec, body length, CID, body, no trailing bytes, CID recomputed.
Codec 1 is a value body (protobuf), codec 2 a function table.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass

from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    IdentityMismatchError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)
from formats.integrity import DIGEST_LEN, append_trailer, verify_trailer
from formats.wire import EncodeError, Reader

CAS_MAGIC = b"BAMLVAL1"
CAS_FORMAT_VERSION = 1
SUPPORTED_CAS_FORMAT_VERSIONS: tuple[int, ...] = (CAS_FORMAT_VERSION,)
CODEC_VALUE = 1
CODEC_FUNCTION_TABLE = 2
SUPPORTED_CODECS: tuple[int, ...] = (CODEC_VALUE, CODEC_FUNCTION_TABLE)
FRAME_LEN = 84
HEADER_LEN = 52
CID_LEN = 32
CID_PREFIX = "bamlv_1_"
_VALUE_DOMAIN = b"baml-value-v1"
_HEADER = struct.Struct(">8sHHQ32s")
_CID_RE = re.compile(r"^bamlv_1_([0-9a-f]{64})$")
_HEX64_RE = re.compile(r"^[0-9a-f]{64}$")


def value_cid(codec: int, body: bytes) -> bytes:
    """``SHA-256("baml-value-v1" ‖ codec u16 BE ‖ body)`` (``ValueCid::for_encoded``)."""
    h = hashlib.sha256(_VALUE_DOMAIN)
    h.update(struct.pack(">H", codec))
    h.update(body)
    return h.digest()


def cid_to_string(cid: bytes) -> str:
    if len(cid) != CID_LEN:
        raise ValueError(f"a CID is {CID_LEN} bytes, got {len(cid)}")
    return CID_PREFIX + cid.hex()


def cid_from_string(text: str) -> bytes:
    m = _CID_RE.match(text)
    if m is None:
        raise MalformedError(
            f"{text!r} is not bamlv_1_ followed by 64 lowercase hex digits", reason="bad_cid"
        )
    return bytes.fromhex(m.group(1))


def cas_relative_path(cid: bytes) -> str:
    """``cas/sha256/<hex2>/<hex64>.bamlvalue`` inside the profile directory."""
    digest = cid.hex()
    return f"cas/sha256/{digest[:2]}/{digest}.bamlvalue"


def cid_from_path(path: str) -> bytes | None:
    """The CID a ``…/<hex2>/<hex64>.bamlvalue[.zst]`` path (or bucket key) promises, else None."""
    parts = path.replace("\\", "/").split("/")
    if len(parts) < 2:
        return None
    name = parts[-1]
    for suffix in (".bamlvalue.zst", ".bamltable.zst", ".bamlvalue", ".bamltable"):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            break
    else:
        return None
    if not _HEX64_RE.match(stem) or parts[-2] != stem[:2]:
        return None
    return bytes.fromhex(stem)


@dataclass(frozen=True, slots=True)
class CasObject:
    codec: int
    body: bytes
    cid: bytes

    @classmethod
    def of(cls, codec: int, body: bytes) -> CasObject:
        return cls(codec, body, value_cid(codec, body))


@dataclass(frozen=True, slots=True)
class CasHeader:
    """What the publisher reads without touching the body (guide, "What the publisher reads")."""

    version: int
    codec: int
    body_len: int
    cid: bytes


def encode_cas_object(codec: int, body: bytes) -> bytes:
    """The complete ``.bamlvalue`` file for ``body``; deterministic."""
    if not 0 <= codec <= 0xFFFF:
        raise EncodeError(f"codec {codec} does not fit in u16")
    cid = value_cid(codec, body)
    return append_trailer(_HEADER.pack(CAS_MAGIC, CAS_FORMAT_VERSION, codec, len(body), cid) + body)


def _check_codec(codec: int, *, file: str | None) -> None:
    if codec not in SUPPORTED_CODECS:
        raise UnsupportedVersionError(
            f"CAS codec {codec} is not one of {SUPPORTED_CODECS}",
            file=file,
            offset=10,
            reason="unsupported_codec",
        )


def read_cas_header(data: bytes, *, file: str | None = None) -> CasHeader:
    """Magic, format, codec, body length and CID, without hashing; checks the size adds up."""
    if len(data) < HEADER_LEN:
        raise TruncatedError(
            f"{len(data)} bytes cannot hold the {HEADER_LEN}-byte CAS header", file=file, offset=0
        )
    magic, version, codec, body_len, cid = _HEADER.unpack_from(data, 0)
    if magic != CAS_MAGIC:
        raise BadMagicError(f"magic {magic!r} is not {CAS_MAGIC!r}", file=file, offset=0)
    if version not in SUPPORTED_CAS_FORMAT_VERSIONS:
        raise UnsupportedVersionError(f"CAS format version {version}", file=file, offset=8)
    _check_codec(codec, file=file)
    if FRAME_LEN + body_len != len(data):
        cls = TruncatedError if FRAME_LEN + body_len > len(data) else TrailingBytesError
        raise cls(
            f"body_len {body_len} implies {FRAME_LEN + body_len} bytes, file has {len(data)}",
            file=file,
            offset=12,
        )
    return CasHeader(version, codec, body_len, bytes(cid))


def decode_cas_object(
    data: bytes,
    *,
    file: str | None = None,
    expected_cid: bytes | None = None,
    expected_codec: int | None = None,
) -> CasObject:
    """Fully verify one CAS object (trailer, frame, CID) and return it."""
    body_end = len(verify_trailer(data, file=file))
    r = Reader(data, file=file, end=body_end)
    if r.fixed(8, "magic") != CAS_MAGIC:
        r.fail(BadMagicError, f"magic is not {CAS_MAGIC!r}", at=0)
    version = r.u16("format version")
    if version not in SUPPORTED_CAS_FORMAT_VERSIONS:
        r.fail(UnsupportedVersionError, f"CAS format version {version}", at=8)
    codec = r.u16("codec")
    _check_codec(codec, file=file)
    body_len = r.u64("body_len")
    cid = r.fixed(CID_LEN, "cid")
    start, end = r.region(body_len, "body")
    r.finish("CAS object")
    body = bytes(data[start:end])
    if value_cid(codec, body) != cid:
        raise ChecksumMismatchError(
            "CID does not match SHA-256(domain ‖ codec ‖ body)", file=file, offset=20, reason="cid_mismatch"
        )
    if expected_cid is not None and cid != expected_cid:
        raise IdentityMismatchError(
            f"object holds {cid_to_string(cid)}, its path names {cid_to_string(expected_cid)}",
            file=file,
            offset=20,
        )
    if expected_codec is not None and codec != expected_codec:
        raise IdentityMismatchError(f"codec {codec}, expected {expected_codec}", file=file, offset=10)
    return CasObject(codec, body, cid)


def decode_cas_file(path: str) -> CasObject:
    """Read and verify a CAS file, checking the CID its path promises."""
    with open(path, "rb") as fh:
        data = fh.read()
    return decode_cas_object(data, file=path, expected_cid=cid_from_path(path))


assert FRAME_LEN == HEADER_LEN + DIGEST_LEN
