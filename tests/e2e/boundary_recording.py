"""Reading Boundary's request recording (api/boundary/recording.py) for the privacy and batch tests.

Every request is opened as far as it goes: raw bytes; zstd/gzip bodies decompressed; JSON parsed
(every key and string leaf, base64-looking leaves decoded too); Arrow IPC streams, bare or inside a
batch set, read with pyarrow (every string value and the schema metadata). The result is two
haystacks, one of bytes and one of text, that a secret must be absent from.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import zstandard

from formats import batch_set_body
from formats import boundary_wire as w

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"
_ARROW_CONTINUATION = b"\xff\xff\xff\xff"
_SEP = b"\x00\x01\x00"


@dataclass
class RecordedBatch:
    batch_id: str
    headers: w.ProjectionBatchHeaders
    body: bytes


@dataclass
class Opened:
    """Everything a recording carried, as bytes and as text, plus what it was made of."""

    raw: list[bytes] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    arrow_tables: int = 0
    decompressed: int = 0
    json_bodies: int = 0

    def byte_haystack(self) -> bytes:
        return _SEP.join(self.raw)

    def text_haystack(self) -> str:
        return "\x00\x01\x00".join(self.text)


def recorded_batches(records: Iterable[dict[str, Any]]) -> Iterator[RecordedBatch]:
    """The projection batches the recording holds, from single PUTs and from batch sets, in order."""
    by_header = {h.lower(): attr for attr, h in w.ProjectionBatchHeaders.header_names().items()}
    for rec in records:
        if rec["method"] == "PUT" and rec["path"].startswith("/projection-batches/"):
            fields = {by_header[n.lower()]: v for n, v in rec["headers"] if n.lower() in by_header}
            headers = w.ProjectionBatchHeaders.model_validate(fields)
            yield RecordedBatch(rec["path"].rsplit("/", 1)[1], headers, rec["body"])
        elif rec["method"] == "POST" and rec["path"] == "/projection-batch-sets":
            if rec["body"].startswith(batch_set_body.MAGIC):  # the binary set the worker sends
                for batch_id, headers, body in batch_set_body.iter_batches(rec["body"]):
                    yield RecordedBatch(batch_id, headers, body)
                continue
            for item in json.loads(rec["body"])["batches"]:
                body = base64.b64decode(item.pop("body"))
                batch_id = item.pop("batch_id")
                yield RecordedBatch(batch_id, w.ProjectionBatchHeaders.model_validate(item), body)


def arrow_table(body: bytes) -> pa.Table | None:
    if not body.startswith(_ARROW_CONTINUATION):
        return None
    try:
        return pa.ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, OSError):
        return None


def open_records(records: Iterable[dict[str, Any]]) -> Opened:
    out = Opened()
    for rec in records:
        out.text += [rec["method"], rec["path"], rec["query"]]
        out.text += [part for pair in rec["headers"] for part in pair]
        _open_bytes(rec["body"], out, depth=0)
    return out


def _open_bytes(data: bytes, out: Opened, depth: int) -> None:
    if not data or depth > 4:
        return
    out.raw.append(data)
    text = data.decode("utf-8", errors="replace")
    out.text.append(text)
    if data.startswith(_ZSTD_MAGIC):
        out.decompressed += 1
        _open_bytes(zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 30), out, depth + 1)
        return
    if data.startswith(_GZIP_MAGIC):
        out.decompressed += 1
        _open_bytes(gzip.decompress(data), out, depth + 1)
        return
    if data.startswith(batch_set_body.MAGIC):  # a binary batch set: open every batch's stream
        for _, _, body in batch_set_body.iter_batches(data):
            _open_bytes(body, out, depth + 1)
        return
    table = arrow_table(data)
    if table is not None:
        out.arrow_tables += 1
        _open_arrow(table, out)
        return
    try:
        doc = json.loads(data)
    except ValueError:
        return
    out.json_bodies += 1
    for s in _json_strings(doc):
        out.text.append(s)
        decoded = _maybe_base64(s)
        if decoded is not None:
            _open_bytes(decoded, out, depth + 1)


def _open_arrow(table: pa.Table, out: Opened) -> None:
    for key, value in (table.schema.metadata or {}).items():
        out.raw += [key, value]
    for column in table.columns:
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            out.text += [v for v in column.to_pylist() if v is not None]
        elif pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            out.raw += [v for v in column.to_pylist() if v is not None]


def _json_strings(doc: Any) -> Iterator[str]:
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _json_strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _json_strings(v)


def _maybe_base64(s: str) -> bytes | None:
    if len(s) < 16 or len(s) % 4:
        return None
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None


def json_string_leaves(doc: Any, min_len: int) -> set[str]:
    """String leaves of a value's JSON rendering at least ``min_len`` characters long (keys excluded:
    field names are schema, not values)."""
    if isinstance(doc, str):
        return {doc} if len(doc) >= min_len else set()
    if isinstance(doc, dict):
        return set().union(*(json_string_leaves(v, min_len) for v in doc.values())) if doc else set()
    if isinstance(doc, list):
        return set().union(*(json_string_leaves(v, min_len) for v in doc)) if doc else set()
    return set()
