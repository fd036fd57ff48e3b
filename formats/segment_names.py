"""Segment file names, path expectations and the cheap header peek.

Profile directory layout (DESIGN.md section 5, real source ``store.rs``)::

    streams/<euid32hex>/meta/<seq20>.bamlmeta
    streams/<euid32hex>/data/<seq20>.bamldata

Bucket keys add a scope prefix and a ``.zst`` suffix; :func:`parse_segment_path`
accepts both. The header peek reads magic, version, sequence and euid without
hashing or parsing payloads: it is what the publisher needs.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass

from formats.errors import BadMagicError, MalformedError, TruncatedError, UnsupportedVersionError
from formats.ids import euid_hex, parse_euid_hex

META_MAGIC = b"BAMLMET1"
DATA_MAGIC = b"BAMLDAT1"
SCHEMA_VERSION = 2
SUPPORTED_SEGMENT_VERSIONS: tuple[int, ...] = (SCHEMA_VERSION,)
SEGMENT_PEEK_LEN = 34  # magic 8 + version 2 + sequence 8 + euid 16

_PEEK = struct.Struct(">8sHQ16s")
_SEGMENT_RE = re.compile(r"(?:^|/)streams/([^/]+)/(meta|data)/(\d{20})\.(bamlmeta|bamldata)(?:\.zst)?$")


class Plane(enum.Enum):
    META = "meta"
    DATA = "data"

    @property
    def extension(self) -> str:
        return "bamlmeta" if self is Plane.META else "bamldata"

    @property
    def magic(self) -> bytes:
        return META_MAGIC if self is Plane.META else DATA_MAGIC


@dataclass(frozen=True, slots=True)
class SegmentLocation:
    """What a segment's path promises about its contents."""

    euid: bytes
    plane: Plane
    sequence: int


def segment_relative_path(euid: bytes, plane: Plane, sequence: int) -> str:
    """``streams/<euid32hex>/<plane>/<seq20>.<ext>`` (the store's ``segment_path``)."""
    if not 0 <= sequence < 10**20:
        raise ValueError(f"sequence {sequence} does not fit in 20 digits")
    return f"streams/{euid_hex(euid)}/{plane.value}/{sequence:020d}.{plane.extension}"


def parse_segment_path(path: str) -> SegmentLocation:
    """Parse a segment path or bucket key into the euid, plane and sequence it names."""
    m = _SEGMENT_RE.search(path.replace("\\", "/"))
    if m is None or m.group(2) != ("meta" if m.group(4) == "bamlmeta" else "data"):
        raise MalformedError(f"{path!r} is not streams/<euid>/<meta|data>/<seq20>.<ext>", reason="bad_path")
    try:
        euid = parse_euid_hex(m.group(1))
    except MalformedError as exc:
        raise MalformedError(exc.message, file=path, reason="bad_path") from None
    return SegmentLocation(euid, Plane(m.group(2)), int(m.group(3)))


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    plane: Plane
    version: int
    sequence: int
    euid: bytes


def read_segment_header(data: bytes, *, file: str | None = None, plane: Plane | None = None) -> SegmentHeader:
    """Magic, version, sequence and euid of a meta or data segment; no hashing, no payload parsing."""
    if len(data) < SEGMENT_PEEK_LEN:
        raise TruncatedError(f"{len(data)} bytes cannot hold a segment header", file=file, offset=0)
    magic, version, sequence, euid = _PEEK.unpack_from(data, 0)
    if magic == META_MAGIC:
        found = Plane.META
    elif magic == DATA_MAGIC:
        found = Plane.DATA
    else:
        raise BadMagicError(f"magic {magic!r} is neither BAMLMET1 nor BAMLDAT1", file=file, offset=0)
    if plane is not None and found is not plane:
        raise BadMagicError(f"expected a {plane.value} segment, found {found.value}", file=file, offset=0)
    if version not in SUPPORTED_SEGMENT_VERSIONS:
        raise UnsupportedVersionError(
            f"segment version {version} (supported: {SUPPORTED_SEGMENT_VERSIONS})", file=file, offset=8
        )
    return SegmentHeader(found, version, sequence, bytes(euid))
