"""Binary projection batch sets: many batches in one ``POST /projection-batch-sets`` body, one
Arrow IPC stream per relation (docs/boundary-facts.md, "Binary batch sets").

Layout (big-endian framing; the streams are Arrow IPC, little-endian inside)::

    +------------+---------------+------------------+---------------------+------------------------+
    | "BAMLBST1" | u16 version=1 | u32 manifest_len | manifest (JSON,     | group streams, one     |
    |  8 bytes   |               |                  | manifest_len bytes) | after another          |
    +------------+---------------+------------------+---------------------+------------------------+

    manifest = formats.boundary_wire.ProjectionBatchSetManifest
    group stream = schema message (schema_length bytes)
                   ‖ batch 1's record-batch messages (length bytes) ‖ ... ‖ batch n's
                   ‖ end-of-stream marker (0xFFFFFFFF 0x00000000)

A group holds batches of one relation, environment, generation and catalog version whose IPC
streams start with the same schema message, so its stream is itself a valid Arrow IPC stream and
Boundary reads the schema once per group. Each batch keeps its own identity: its PUT body (the
bytes ``content_digest`` covers) is ``schema message ‖ its messages ‖ end-of-stream``, exactly the
stream the worker built, so the digest and idempotency rules are those of the PUT.

Pure bytes: no Arrow decoding here (Boundary checks the messages, ``api.boundary.facts.group_check``).
:func:`decode_batch_set` returns the manifest and each group's byte ranges or raises a
:class:`formats.errors.FormatError` naming the offset and field, never a value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from formats import boundary_wire as w
from formats.errors import (
    BadMagicError,
    LimitExceededError,
    MalformedError,
    TruncatedError,
    UnsupportedVersionError,
)

MAGIC = b"BAMLBST1"
VERSION = 1
HEADER = struct.Struct(">8sHI")
CONTINUATION = b"\xff\xff\xff\xff"
END_OF_STREAM = CONTINUATION + b"\x00\x00\x00\x00"
_META_LEN = struct.Struct("<i")

Batch = tuple[str, w.ProjectionBatchHeaders, bytes]  # (batch_id, identity, PUT body)


class BatchSetEncodeError(ValueError):
    """A batch body is not an Arrow IPC stream this format can carry (no continuation marker or
    no end-of-stream marker: the legacy IPC format, or not Arrow at all)."""


def split_stream(ipc: bytes) -> tuple[bytes, bytes] | None:
    """``(schema message, the record-batch messages)`` of an Arrow IPC stream, or None when the
    bytes do not have the shape ``schema ‖ messages ‖ end-of-stream``. Splits by the schema
    message's length prefix alone (a schema message has no body); nothing is decoded."""
    if len(ipc) < 16 or ipc[:4] != CONTINUATION or ipc[-8:] != END_OF_STREAM:
        return None
    (meta_len,) = _META_LEN.unpack_from(ipc, 4)
    end = 8 + meta_len
    if meta_len <= 0 or end > len(ipc) - 8:
        return None
    return ipc[:end], ipc[end:-8]


@dataclass(frozen=True, slots=True)
class EncodedSet:
    body: bytes
    order: list[int]  # order[k] = the input index of the k-th batch in manifest order (answers)


def encode_batch_set(batches: Sequence[Batch]) -> EncodedSet:
    """One body for the batches: grouped by (environment, generation, catalog version, relation,
    schema message) in order of first appearance, each group's batches in input order."""
    groups: dict[tuple[str, int, int, str, bytes], list[tuple[int, Batch, bytes]]] = {}
    for i, item in enumerate(batches):
        batch_id, h, body = item
        parts = split_stream(body)
        if parts is None:
            raise BatchSetEncodeError(
                f"batch {batch_id} is not an Arrow IPC stream with an end-of-stream marker"
            )
        schema, messages = parts
        key = (h.environment_id, h.generation, h.catalog_version, h.relation, schema)
        groups.setdefault(key, []).append((i, item, messages))
    # Plain dicts validated once as the manifest (pydantic validates nested dicts in Rust: a
    # model per batch costs more than the rest of the encoding).
    manifest_groups: list[dict[str, object]] = []
    chunks: list[bytes] = []
    order: list[int] = []
    for (env, gen, version, relation, schema), members in groups.items():
        entries = []
        chunks.append(schema)
        for i, (batch_id, h, _), messages in members:
            entries.append(
                {
                    "batch_id": batch_id,
                    "root_id": h.root_id,
                    "content_digest": h.content_digest,
                    "partition": h.partition,
                    "row_count": h.row_count,
                    "length": len(messages),
                }
            )
            chunks.append(messages)
            order.append(i)
        chunks.append(END_OF_STREAM)
        manifest_groups.append(
            {
                "environment_id": env,
                "generation": gen,
                "catalog_version": version,
                "relation": relation,
                "schema_length": len(schema),
                "batches": entries,
            }
        )
    manifest = w.ProjectionBatchSetManifest.model_validate({"groups": manifest_groups})
    raw = manifest.model_dump_json(by_alias=True, exclude_none=True).encode()
    return EncodedSet(b"".join([HEADER.pack(MAGIC, VERSION, len(raw)), raw, *chunks]), order)


@dataclass(frozen=True, slots=True)
class DecodedGroup:
    """One group's bytes: ``stream`` is its whole Arrow IPC stream; batch ``k``'s messages are
    ``stream[offsets[k] : offsets[k] + group.batches[k].length]``."""

    group: w.BatchSetGroup
    stream: memoryview
    offsets: tuple[int, ...]

    @property
    def schema(self) -> memoryview:
        return self.stream[: self.group.schema_length]

    def messages(self, k: int) -> memoryview:
        start = self.offsets[k]
        return self.stream[start : start + self.group.batches[k].length]

    def put_body(self, k: int) -> bytes:
        """Batch ``k``'s PUT body: the bytes its ``content_digest`` covers."""
        return b"".join((self.schema, self.messages(k), END_OF_STREAM))


def _manifest_error(exc: ValidationError) -> MalformedError:
    # Locations and messages name fields and rules; input values are left out.
    where = "; ".join(
        ".".join(map(str, e.get("loc", ()))) + ": " + str(e.get("msg", "invalid")) for e in exc.errors()[:5]
    )
    return MalformedError(f"manifest is not a ProjectionBatchSetManifest ({where})", offset=HEADER.size)


def decode_batch_set(body: bytes | memoryview) -> tuple[w.ProjectionBatchSetManifest, list[DecodedGroup]]:
    """The manifest and every group's byte ranges; the streams must fill the body exactly."""
    view = memoryview(body)
    if len(view) < HEADER.size:
        raise TruncatedError("shorter than the batch set header", offset=0)
    magic, version, manifest_len = HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise BadMagicError("not a binary projection batch set (magic BAMLBST1)", offset=0)
    if version != VERSION:
        raise UnsupportedVersionError(f"batch set version {version} (supported: {VERSION})", offset=8)
    start = HEADER.size + manifest_len
    if start > len(view):
        raise TruncatedError(f"manifest_len {manifest_len} runs past the body", offset=10)
    try:
        manifest = w.ProjectionBatchSetManifest.model_validate_json(bytes(view[HEADER.size : start]))
    except ValidationError as exc:
        raise _manifest_error(exc) from None
    if manifest.batch_count > w.PROJECTION_BATCH_SET_MAX:
        raise LimitExceededError(
            f"{manifest.batch_count} batches (at most {w.PROJECTION_BATCH_SET_MAX})", offset=HEADER.size
        )
    groups: list[DecodedGroup] = []
    at = start
    for gi, g in enumerate(manifest.groups):
        size = g.schema_length + sum(b.length for b in g.batches) + len(END_OF_STREAM)
        end = at + size
        if end > len(view):
            raise TruncatedError(f"group {gi} ({size} bytes) runs past the body", offset=at)
        stream = view[at:end]
        if stream[-8:] != END_OF_STREAM:
            raise MalformedError(f"group {gi} does not end with the end-of-stream marker", offset=end - 8)
        offsets = []
        pos = g.schema_length
        for b in g.batches:
            offsets.append(pos)
            pos += b.length
        groups.append(DecodedGroup(g, stream, tuple(offsets)))
        at = end
    if at != len(view):
        raise MalformedError(f"{len(view) - at} bytes after the last group", offset=at)
    return manifest, groups


def iter_batches(body: bytes) -> Iterator[Batch]:
    """Every batch of a body as ``(batch_id, identity, PUT body)``, in manifest order."""
    _, groups = decode_batch_set(body)
    for d in groups:
        for k, entry in enumerate(d.group.batches):
            yield entry.batch_id, d.group.headers(entry), d.put_body(k)
