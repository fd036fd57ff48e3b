"""Value packs: many small CAS value files shipped as one object (publisher guide, "Value pack").

Layout (big-endian)::

    +------------+---------------+------------------+----------------------+------------------------+
    | "BAMLPCK1" | u16 version=1 | u32 manifest_len | manifest (canonical  | entries: raw CAS files |
    |  8 bytes   |               |                  | JSON, manifest_len)  | one after another      |
    +------------+---------------+------------------+----------------------+------------------------+

    manifest = {"entries":[{"cid":"bamlv_1_<hex64>","codec":1,"length":L,"offset":O,"size":L},...],
                "flush_id":"<ULID>","process_euid":"<hex32>","schema":"baml-pack/1"}

Canonical JSON here means: sorted keys, no whitespace, ASCII, exactly these keys.
Entries are laid out contiguously in manifest order from offset 0 and fill the
entries region exactly; ``size`` (the original file size) equals ``length``. There
is no pack-level digest: each entry is a complete CAS object with its own CID and
trailing SHA-256, and the whole pack travels as one zstd frame with a checksum.

Splitting (conformance item 6): a pack holds at most ``max_entry_bytes`` of entries
and ``max_entries`` entries, filled greedily in input order. Every pack of a flush
needs its own object key, and the key holds the flush id, so pack ``i`` of a flush
carries ``flush_id + i`` (the ULID read as a 128-bit number); pack 0 carries the
flush id itself, and the ids sort in pack order.

:func:`read_pack` returns a :class:`Pack` or raises a :class:`formats.errors.FormatError`.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from formats import cas
from formats.errors import (
    BadMagicError,
    FormatError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)

PACK_MAGIC = b"BAMLPCK1"
PACK_VERSION = 1
PACK_SCHEMA = "baml-pack/1"
HEADER = struct.Struct(">8sHI")
DEFAULT_MAX_ENTRY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_ENTRIES = 100_000
PACKED_CODEC = cas.CODEC_VALUE  # only small codec-1 values travel in packs; tables ship alone

_ENTRY_KEYS = frozenset({"cid", "codec", "offset", "length", "size"})
_MANIFEST_KEYS = frozenset({"schema", "flush_id", "process_euid", "entries"})
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_EUID = re.compile(r"[0-9a-f]{32}")
_CID = re.compile(r"bamlv_1_[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    cid: str  # bamlv_1_<hex64>
    codec: int
    offset: int  # inside the entries region
    length: int
    size: int  # the original file size, equal to length


@dataclass(frozen=True, slots=True)
class PackEntry:
    cid: str
    codec: int
    offset: int
    length: int
    size: int
    data: bytes  # the unchanged CAS object file


@dataclass(frozen=True, slots=True)
class PackManifest:
    """The manifest as read (no entry bytes: safe to print or log beyond CIDs and sizes)."""

    flush_id: str
    process_euid: str
    entries: tuple[ManifestEntry, ...]


@dataclass(frozen=True, slots=True)
class Pack:
    manifest: PackManifest
    entries: tuple[PackEntry, ...]

    @property
    def flush_id(self) -> str:
        return self.manifest.flush_id


# --- ULID arithmetic (no clock, no randomness: pure) ----------------------------------------------------


def _ulid_to_int(ulid: str) -> int:
    n = 0
    for ch in ulid:
        n = n * 32 + _CROCKFORD.index(ch)
    return n


def _int_to_ulid(n: int) -> str:
    chars = []
    for _ in range(26):
        n, r = divmod(n, 32)
        chars.append(_CROCKFORD[r])
    return "".join(reversed(chars))


def pack_flush_ids(flush_id: str, count: int) -> list[str]:
    """The flush ids of ``count`` packs of one flush: ``flush_id``, ``flush_id + 1``, ..."""
    _check_ulid(flush_id)
    base = _ulid_to_int(flush_id)
    if base + count - 1 >= 1 << 128:
        raise ValueError("flush_id is too close to the largest ULID")
    return [_int_to_ulid(base + i) for i in range(count)]


def _check_ulid(flush_id: str) -> None:
    if not isinstance(flush_id, str) or not _ULID.fullmatch(flush_id):
        raise ValueError("flush_id must be a 26-character ULID (Crockford base32, upper case)")


# --- building -------------------------------------------------------------------------------------------


def canonical_manifest(flush_id: str, process_euid: str, entries: Sequence[dict[str, object]]) -> bytes:
    doc = {
        "schema": PACK_SCHEMA,
        "flush_id": flush_id,
        "process_euid": process_euid,
        "entries": list(entries),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def split_sizes(
    sizes: Sequence[int],
    *,
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> list[range]:
    """Greedy split of entries (by size, in order) into index ranges, one per pack."""
    if max_entry_bytes < 1 or max_entries < 1:
        raise ValueError("pack limits must be positive")
    groups: list[range] = []
    start, used = 0, 0
    for i, size in enumerate(sizes):
        if size > max_entry_bytes:
            raise ValueError(
                f"entry {i} has {size} bytes, above the pack limit {max_entry_bytes}: ship as a large value"
            )
        if i > start and (used + size > max_entry_bytes or i - start >= max_entries):
            groups.append(range(start, i))
            start, used = i, 0
        used += size
    if start < len(sizes):
        groups.append(range(start, len(sizes)))
    return groups


def build_pack(files: Sequence[bytes], *, flush_id: str, process_euid: str) -> bytes:
    """One pack holding ``files`` (complete CAS value files) in order; no limits applied."""
    _check_ulid(flush_id)
    if not isinstance(process_euid, str) or not _EUID.fullmatch(process_euid):
        raise ValueError("process_euid must be 32 lowercase hex characters")
    if not files:
        raise ValueError("a pack holds at least one entry")
    entries: list[dict[str, object]] = []
    offset = 0
    for i, raw in enumerate(files):
        try:
            header = cas.read_cas_header(raw)
        except FormatError as exc:
            raise ValueError(f"pack entry {i} is not a CAS object: {exc.reason}") from None
        if header.codec != PACKED_CODEC:
            raise ValueError(
                f"pack entry {i} has codec {header.codec}; packs hold codec-{PACKED_CODEC} values"
            )
        entries.append(
            {
                "cid": cas.cid_to_string(header.cid),
                "codec": header.codec,
                "offset": offset,
                "length": len(raw),
                "size": len(raw),
            }
        )
        offset += len(raw)
    manifest = canonical_manifest(flush_id, process_euid, entries)
    return b"".join([HEADER.pack(PACK_MAGIC, PACK_VERSION, len(manifest)), manifest, *map(bytes, files)])


def build_packs(
    files: Iterable[bytes],
    *,
    flush_id: str,
    process_euid: str,
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> list[bytes]:
    """Pack one flush's small value files, split by the limits; pack ``i`` gets flush id ``flush_id + i``."""
    items = list(files)
    groups = split_sizes([len(f) for f in items], max_entry_bytes=max_entry_bytes, max_entries=max_entries)
    ids = pack_flush_ids(flush_id, len(groups))
    return [
        build_pack([items[i] for i in group], flush_id=fid, process_euid=process_euid)
        for fid, group in zip(ids, groups, strict=True)
    ]


# --- reading --------------------------------------------------------------------------------------------


def _bad(
    message: str, file: str | None, reason: str = "bad_manifest", offset: int | None = None
) -> MalformedError:
    return MalformedError(message, file=file, offset=offset, reason=reason)


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_pack(
    data: bytes,
    *,
    file: str | None = None,
    verify_entries: bool = True,
    max_entry_bytes: int | None = None,
    max_entries: int | None = None,
) -> Pack:
    """Validate a (decompressed) pack and return its manifest and entries.

    Order of checks: header (magic, version, manifest length), manifest JSON, its
    schema and field types, canonical form, limits, entry layout, then (with
    ``verify_entries``) each entry as a CAS object whose CID and codec match the manifest.
    """
    data = bytes(data)
    if len(data) < HEADER.size:
        raise TruncatedError(
            f"{len(data)} bytes cannot hold the {HEADER.size}-byte pack header", file=file, offset=0
        )
    magic, version, manifest_len = HEADER.unpack_from(data, 0)
    if magic != PACK_MAGIC:
        raise BadMagicError(f"magic {magic!r} is not {PACK_MAGIC!r}", file=file, offset=0)
    if version != PACK_VERSION:
        raise UnsupportedVersionError(f"pack version {version}", file=file, offset=8)
    region_start = HEADER.size + manifest_len
    if region_start > len(data):
        raise TruncatedError(
            f"manifest_len {manifest_len} runs past the end of the pack", file=file, offset=HEADER.size - 4
        )
    raw_manifest = data[HEADER.size : region_start]
    try:
        doc = json.loads(raw_manifest.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _bad("manifest is not UTF-8 JSON", file, offset=HEADER.size) from None
    if not isinstance(doc, dict) or set(doc) != _MANIFEST_KEYS:
        raise _bad(f"manifest must be an object with exactly the keys {sorted(_MANIFEST_KEYS)}", file)
    if doc["schema"] != PACK_SCHEMA:
        raise UnsupportedVersionError(
            f"manifest schema is not {PACK_SCHEMA!r}", file=file, offset=HEADER.size
        )
    flush_id, euid, raw_entries = doc["flush_id"], doc["process_euid"], doc["entries"]
    if not isinstance(flush_id, str) or not _ULID.fullmatch(flush_id):
        raise _bad("flush_id is not a 26-character ULID", file)
    if not isinstance(euid, str) or not _EUID.fullmatch(euid):
        raise _bad("process_euid is not 32 lowercase hex characters", file)
    if not isinstance(raw_entries, list) or not raw_entries:
        raise _bad("entries must be a non-empty list", file)
    for i, e in enumerate(raw_entries):
        if not isinstance(e, dict) or set(e) != _ENTRY_KEYS:
            raise _bad(f"entry {i} must be an object with exactly the keys {sorted(_ENTRY_KEYS)}", file)
        if not isinstance(e["cid"], str) or not _CID.fullmatch(e["cid"]):
            raise _bad(f"entry {i} cid is not bamlv_1_<64 hex>", file)
        if not all(_is_uint(e[k]) for k in ("codec", "offset", "length", "size")):
            raise _bad(f"entry {i} codec, offset, length and size must be non-negative integers", file)
        if e["codec"] != PACKED_CODEC:
            raise UnsupportedVersionError(
                f"entry {i} has codec {e['codec']}; packs hold codec {PACKED_CODEC}",
                file=file,
                reason="unsupported_codec",
            )
    if canonical_manifest(flush_id, euid, raw_entries) != raw_manifest:
        raise _bad(
            "manifest is not canonical JSON (sorted keys, no whitespace)", file, "non_canonical_manifest"
        )
    if max_entries is not None and len(raw_entries) > max_entries:
        raise LimitExceededError(f"{len(raw_entries)} entries exceed the limit {max_entries}", file=file)
    region_len = len(data) - region_start
    if max_entry_bytes is not None and region_len > max_entry_bytes:
        raise LimitExceededError(f"{region_len} entry bytes exceed the limit {max_entry_bytes}", file=file)

    entries: list[PackEntry] = []
    expected_offset = 0
    for i, e in enumerate(raw_entries):
        offset, length, size = e["offset"], e["length"], e["size"]
        if size != length:
            raise _bad(f"entry {i} size {size} differs from its length {length}", file, "bad_entry_layout")
        if offset != expected_offset:
            raise _bad(f"entry {i} starts at {offset}, expected {expected_offset}", file, "bad_entry_layout")
        if offset + length > region_len:
            raise TruncatedError(
                f"entry {i} ends at {offset + length}, the entries region has {region_len} bytes",
                file=file,
                offset=region_start + offset,
            )
        raw = data[region_start + offset : region_start + offset + length]
        if verify_entries:
            where = f"{file or '<pack>'}[entry {i}]"
            cas.decode_cas_object(
                raw, file=where, expected_cid=cas.cid_from_string(e["cid"]), expected_codec=e["codec"]
            )
        entries.append(PackEntry(e["cid"], e["codec"], offset, length, size, raw))
        expected_offset = offset + length
    if expected_offset != region_len:
        raise TrailingBytesError(
            f"{region_len - expected_offset} bytes after the last entry",
            file=file,
            offset=region_start + expected_offset,
        )
    manifest = PackManifest(
        flush_id, euid, tuple(ManifestEntry(e.cid, e.codec, e.offset, e.length, e.size) for e in entries)
    )
    return Pack(manifest, tuple(entries))
