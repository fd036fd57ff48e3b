"""Profiler identities: euid, ThreadRef, CallRef, runtime ids and CCT context keys.

Facts from the real source (``bex_prof_store/src/ids.rs``, ``prof/backend/domain.rs``):

- process euid: 16 bytes, a UUIDv7 chosen once per process; its lowercase hex
  is the stream directory name;
- ThreadRef: ``euid[16] ‖ engine_id u64 ‖ thread_id u64`` (32 bytes); a root
  ThreadRef is an execution, and ``execution_id`` is the hex of those 32 bytes;
- CallRef: ThreadRef ‖ ``call_id u64`` (40 bytes);
- string forms: ``baml_id_1_`` + base64url (no padding) of the raw 16-byte
  boundary id; ``baml_thread_1_`` / ``baml_call_1_`` + base64url of a payload
  that starts with a version byte (1) followed by the binary ref;
- CCT context key: SHA-256 of ``"baml-cct-context-v1" ‖ program_id[16] ‖
  optional parent_key[32] ‖ function_id u32 ‖ optional call_site (file_id,
  start_offset, end_offset, line as u32) ‖ edge_kind u8``;
- content-hashed program id: the first 16 bytes of SHA-256 over
  ``"baml-program-v1" ‖ framed(baml_version) ‖ for each project file, sorted by
  path bytes: framed(path) ‖ framed(file bytes)``, where ``framed(x)`` is
  ``len(x)`` as u64 big-endian ‖ ``x`` (``program_content_hash``, newest upstream
  revision; an older one used NUL delimiters instead of lengths).

Decoding a string form raises :class:`~formats.errors.MalformedError` (bad
prefix, base64 or length) or :class:`~formats.errors.UnsupportedVersionError`.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass

from formats.errors import MalformedError, UnsupportedVersionError

EUID_LEN = 16
THREAD_REF_LEN = 32
CALL_REF_LEN = 40
PROGRAM_ID_LEN = 16
BOUNDARY_ID_LEN = 16
CONTEXT_KEY_LEN = 32

BOUNDARY_ID_PREFIX = "baml_id_1_"
THREAD_REF_PREFIX = "baml_thread_1_"
CALL_REF_PREFIX = "baml_call_1_"
_PAYLOAD_VERSION = 1
_CONTEXT_DOMAIN = b"baml-cct-context-v1"
_PROGRAM_DOMAIN = b"baml-program-v1"

_QQ = struct.Struct(">QQ")
_QQQ = struct.Struct(">QQQ")


class EdgeKind(enum.IntEnum):
    """How a call path edge was entered (``domain.rs`` ``EdgeKind``)."""

    ROOT = 0
    CALL = 1
    SPAWN = 2


@dataclass(frozen=True, slots=True)
class ThreadRef:
    """``euid[16] ‖ engine_id u64 ‖ thread_id u64``; a root ThreadRef names an execution."""

    euid: bytes
    engine_id: int
    thread_id: int

    def to_bytes(self) -> bytes:
        return self.euid + _QQ.pack(self.engine_id, self.thread_id)

    @classmethod
    def from_bytes(cls, data: bytes) -> ThreadRef:
        engine_id, thread_id = _QQ.unpack_from(data, 16)
        return cls(bytes(data[:16]), engine_id, thread_id)

    @property
    def execution_id(self) -> str:
        """Hex of the 32 bytes: the ``execution_id`` column when this is a root."""
        return self.to_bytes().hex()

    def encode_string(self) -> str:
        """The ``baml_thread_1_…`` form."""
        return THREAD_REF_PREFIX + _b64encode(bytes([_PAYLOAD_VERSION]) + self.to_bytes())

    @classmethod
    def decode_string(cls, value: str) -> ThreadRef:
        payload = _decode_versioned(value, THREAD_REF_PREFIX, 1 + THREAD_REF_LEN)
        return cls.from_bytes(payload[1:])


@dataclass(frozen=True, slots=True)
class CallRef:
    """``ThreadRef ‖ call_id u64``: one call, unique within its thread."""

    euid: bytes
    engine_id: int
    thread_id: int
    call_id: int

    @property
    def thread(self) -> ThreadRef:
        return ThreadRef(self.euid, self.engine_id, self.thread_id)

    def to_bytes(self) -> bytes:
        return self.euid + _QQQ.pack(self.engine_id, self.thread_id, self.call_id)

    @classmethod
    def from_bytes(cls, data: bytes) -> CallRef:
        engine_id, thread_id, call_id = _QQQ.unpack_from(data, 16)
        return cls(bytes(data[:16]), engine_id, thread_id, call_id)

    def encode_string(self) -> str:
        """The ``baml_call_1_…`` form (the default ``$id`` of a call)."""
        return CALL_REF_PREFIX + _b64encode(bytes([_PAYLOAD_VERSION]) + self.to_bytes())

    @classmethod
    def decode_string(cls, value: str) -> CallRef:
        payload = _decode_versioned(value, CALL_REF_PREFIX, 1 + CALL_REF_LEN)
        return cls.from_bytes(payload[1:])


@dataclass(frozen=True, slots=True)
class CallSite:
    """A caller-side source span (``record.rs`` ``CallSiteSourceSpan``); wire order as fields."""

    file_id: int
    start_offset: int
    end_offset: int
    line: int


@dataclass(frozen=True, slots=True)
class ContextTuple:
    """The canonical CCT identity tuple; its hash is the context key."""

    program_id: bytes
    parent_key: bytes | None
    function_id: int
    call_site: CallSite | None
    edge_kind: EdgeKind

    def key(self) -> bytes:
        return context_key(self)


def context_key(t: ContextTuple) -> bytes:
    """SHA-256 over the domain tag and the tuple's fixed-endian encoding (``ContextKey::for_tuple``)."""
    h = hashlib.sha256(_CONTEXT_DOMAIN)
    h.update(t.program_id)
    if t.parent_key is None:
        h.update(b"\x00")
    else:
        h.update(b"\x01" + t.parent_key)
    h.update(struct.pack(">I", t.function_id))
    site = t.call_site
    if site is None:
        h.update(b"\x00")
    else:
        h.update(b"\x01" + struct.pack(">IIII", site.file_id, site.start_offset, site.end_offset, site.line))
    h.update(bytes([int(t.edge_kind)]))
    return h.digest()


def program_content_hash(baml_version: str, files: Iterable[tuple[str, bytes]]) -> bytes:
    """The 32-byte source-content hash of a build: identical builds hash the same in any process.

    Files are sorted by path bytes, so the caller's order does not matter; every field carries
    its length, so no two distinct inputs share a byte stream.
    """
    h = hashlib.sha256(_PROGRAM_DOMAIN)

    def framed(raw: bytes) -> None:
        h.update(struct.pack(">Q", len(raw)))
        h.update(raw)

    framed(baml_version.encode())
    for path, body in sorted(((p.encode(), b) for p, b in files), key=lambda pb: pb[0]):
        framed(path)
        framed(body)
    return h.digest()


def content_program_id(baml_version: str, files: Iterable[tuple[str, bytes]]) -> bytes:
    """``EngineStarted.program_id`` of a build: the first 16 bytes of :func:`program_content_hash`."""
    return program_content_hash(baml_version, files)[:PROGRAM_ID_LEN]


# -- boundary ids (baml_id_1_) ---------------------------------------------------


def encode_boundary_id(raw: bytes) -> str:
    """``baml_id_1_`` + base64url(no padding) of the raw 16 bytes (no version byte)."""
    if len(raw) != BOUNDARY_ID_LEN:
        raise ValueError(f"a boundary id is {BOUNDARY_ID_LEN} bytes, got {len(raw)}")
    return BOUNDARY_ID_PREFIX + _b64encode(raw)


def decode_boundary_id(value: str) -> bytes:
    if not value.startswith(BOUNDARY_ID_PREFIX):
        raise MalformedError("not a baml_id_1_ string", reason="invalid_prefix")
    payload = _b64decode(value[len(BOUNDARY_ID_PREFIX) :])
    if len(payload) != BOUNDARY_ID_LEN:
        raise MalformedError(
            f"boundary id payload is {len(payload)} bytes, expected {BOUNDARY_ID_LEN}",
            reason="invalid_length",
        )
    return payload


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    # Strict like the Rust engine: URL-safe alphabet, no padding, canonical trailing bits.
    if "=" in text or len(text) % 4 == 1:
        raise MalformedError("invalid base64url payload", reason="invalid_base64")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise MalformedError("invalid base64url payload", reason="invalid_base64") from None
    if _b64encode(raw) != text:
        raise MalformedError("non-canonical base64url payload", reason="invalid_base64")
    return raw


def _decode_versioned(value: str, prefix: str, expected_len: int) -> bytes:
    if not value.startswith(prefix):
        raise MalformedError(f"not a {prefix} string", reason="invalid_prefix")
    payload = _b64decode(value[len(prefix) :])
    if len(payload) != expected_len:
        raise MalformedError(
            f"payload is {len(payload)} bytes, expected {expected_len}", reason="invalid_length"
        )
    if payload[0] != _PAYLOAD_VERSION:
        raise UnsupportedVersionError(f"runtime id payload version {payload[0]}")
    return payload


def decode_runtime_id(value: str) -> CallRef | bytes:
    """A ``$id`` value: a :class:`CallRef` (``baml_call_1_``) or a raw boundary id (``baml_id_1_``)."""
    if value.startswith(CALL_REF_PREFIX):
        return CallRef.decode_string(value)
    return decode_boundary_id(value)


# -- euids -----------------------------------------------------------------------------


def uuid7_bytes(unix_ms: int, rand: bytes) -> bytes:
    """A UUIDv7 from a millisecond timestamp and 10 random bytes (version and variant set)."""
    if len(rand) != 10:
        raise ValueError("UUIDv7 needs 10 random bytes")
    out = bytearray((unix_ms & 0xFFFF_FFFF_FFFF).to_bytes(6, "big") + rand)
    out[6] = 0x70 | (out[6] & 0x0F)
    out[8] = 0x80 | (out[8] & 0x3F)
    return bytes(out)


def new_euid() -> bytes:
    """A fresh process euid (UUIDv7: time-ordered, 74 random bits)."""
    return uuid7_bytes(time.time_ns() // 1_000_000, os.urandom(10))


def is_uuid7(raw: bytes) -> bool:
    return len(raw) == 16 and raw[6] >> 4 == 7 and raw[8] >> 6 == 0b10


def euid_hex(euid: bytes) -> str:
    """The stream directory name for ``euid``."""
    if len(euid) != EUID_LEN:
        raise ValueError(f"an euid is {EUID_LEN} bytes, got {len(euid)}")
    return euid.hex()


def parse_euid_hex(text: str) -> bytes:
    """Inverse of :func:`euid_hex`: exactly 32 lowercase hex digits."""
    if len(text) != 2 * EUID_LEN or text != text.lower():
        raise MalformedError(
            f"stream directory name {text!r} is not 32 lowercase hex digits", reason="bad_euid"
        )
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise MalformedError(
            f"stream directory name {text!r} is not 32 lowercase hex digits", reason="bad_euid"
        ) from None
