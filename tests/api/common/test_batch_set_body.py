"""The binary batch-set body (formats.batch_set_body), pure: every batch's PUT body survives the
framing byte for byte, batches group by relation and schema, and damaged framing is refused."""

from __future__ import annotations

import hashlib
import struct

import pyarrow as pa
import pytest

from formats import boundary_wire as w
from formats import catalog
from formats.batch_set_body import (
    END_OF_STREAM,
    HEADER,
    BatchSetEncodeError,
    decode_batch_set,
    encode_batch_set,
    iter_batches,
    split_stream,
)
from formats.errors import FormatError


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _batch(
    relation: str, root: str, n: int, *, chunks: int = 1
) -> tuple[str, w.ProjectionBatchHeaders, bytes]:
    schema = pa.schema([("row_id", pa.string()), ("execution_id", pa.string()), ("v", pa.int64())])
    table = pa.table(
        {"row_id": [f"{root}-{i}" for i in range(n)], "execution_id": [root] * n, "v": list(range(n))},
        schema=schema,
    )
    if chunks > 1 and n:
        table = pa.concat_tables([table.slice(i, 1) for i in range(n)])
    body = _ipc(table)
    headers = w.ProjectionBatchHeaders(
        generation=1,
        catalog_version=1,
        relation=relation,
        root_id=root,
        content_digest="sha256:" + hashlib.sha256(body).hexdigest(),
        environment_id="env_1",
        partition=0,
        row_count=n,
    )
    return catalog.deterministic_row_id("b", relation, root), headers, body


def test_every_put_body_survives_and_groups_follow_relation() -> None:
    batches = [
        _batch("calls_v1", "r1", 3),
        _batch("threads_v1", "r1", 1),
        _batch("calls_v1", "r2", 0),  # no rows
        _batch("calls_v1", "r3", 4, chunks=4),  # several record-batch messages in one batch
        _batch("threads_v1", "r2", 2),
    ]
    enc = encode_batch_set(batches)
    manifest, groups = decode_batch_set(enc.body)
    assert [g.relation for g in manifest.groups] == ["calls_v1", "threads_v1"]
    assert enc.order == [0, 2, 3, 1, 4]
    decoded = list(iter_batches(enc.body))
    for (bid, headers, body), i in zip(decoded, enc.order, strict=True):
        want_id, want_headers, want_body = batches[i]
        assert (bid, body) == (want_id, want_body)
        assert headers.model_dump() == want_headers.model_dump()
    # Each group's stream is itself an Arrow IPC stream of all its batches' rows.
    rows = pa.ipc.open_stream(pa.py_buffer(groups[0].stream)).read_all()
    assert rows.column("execution_id").to_pylist() == ["r1"] * 3 + ["r3"] * 4
    # The shared schema message and the end-of-stream marker travel once per group, not per batch.
    (manifest_len,) = struct.unpack_from(">I", enc.body, 10)
    saved = sum((len(g.batches) - 1) * (g.schema_length + 8) for g in manifest.groups)
    assert len(enc.body) == HEADER.size + manifest_len + sum(len(b) for _, _, b in batches) - saved


def test_split_stream_refuses_what_the_set_cannot_carry() -> None:
    _, _, body = _batch("calls_v1", "r1", 2)
    schema, messages = split_stream(body) or (b"", b"")
    assert schema + messages + END_OF_STREAM == body
    assert split_stream(body[:-8]) is None  # no end-of-stream marker
    assert split_stream(b"ARROW1" + body) is None
    with pytest.raises(BatchSetEncodeError):
        encode_batch_set([("b1", _batch("calls_v1", "r1", 2)[1], body[:-8])])


def test_damaged_framing_is_a_format_error_naming_what() -> None:
    body = encode_batch_set([_batch("calls_v1", "r1", 3), _batch("threads_v1", "r1", 1)]).body
    (manifest_len,) = struct.unpack_from(">I", body, 10)
    cases = {
        "bad_magic": b"BAMLXXX1" + body[8:],
        "unsupported_version": body[:8] + b"\x00\x02" + body[10:],
        "truncated": body[:-5],
        "trailing_bytes_or_malformed": body + b"\x00",
        "malformed_manifest": body[: HEADER.size] + b"[" + body[HEADER.size + 1 :],
        "short": body[:5],
    }
    for name, bad in cases.items():
        with pytest.raises(FormatError) as exc:
            decode_batch_set(bad)
        assert exc.value.offset is not None, name
    # The manifest's fields are checked by the typed model: a negative length is refused.
    manifest = body[HEADER.size : HEADER.size + manifest_len].replace(b'"length":', b'"length":-', 1)
    bad = HEADER.pack(b"BAMLBST1", 1, len(manifest)) + manifest + body[HEADER.size + manifest_len :]
    with pytest.raises(FormatError, match="length"):
        decode_batch_set(bad)
