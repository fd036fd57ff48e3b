"""The privacy test's tools find what they look for: the recorder keeps every request (minus
Authorization) and the scanner opens zstd, JSON, base64 and Arrow IPC down to the string values."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import zstandard
from boundary_recording import json_string_leaves, open_records
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from api.boundary.recording import RequestRecorder, read_records


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def test_recorder_keeps_bodies_and_drops_authorization(tmp_path: Path) -> None:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"n": len(await request.body())}

    path = tmp_path / "rec.jsonl"
    app.add_middleware(RequestRecorder, path=path, app_name="t")
    client = TestClient(app)
    headers = {"Authorization": "Bearer tok", "X-A": "b"}
    resp = client.post("/echo?x=1", content=b"secret-body", headers=headers)
    assert resp.json() == {"n": 11}  # the app still reads the whole body
    (rec,) = list(read_records(path))
    assert rec["body"] == b"secret-body" and rec["path"] == "/echo" and rec["query"] == "x=1"
    names = {n for n, _ in rec["headers"]}
    assert "x-a" in names and "authorization" not in names


def test_scanner_finds_strings_inside_arrow_inside_base64_json_and_zstd() -> None:
    arrow = _ipc(pa.table({"s": ["hidden-in-arrow"], "n": [1]}))
    set_body = json.dumps({"batches": [{"body": base64.b64encode(arrow).decode()}]}).encode()
    records = [
        {"method": "POST", "path": "/p", "query": "", "headers": [], "body": set_body},
        {"method": "PUT", "path": "/q", "query": "", "headers": [], "body": zstandard.compress(b"zstd-sec")},
    ]
    opened = open_records(records)
    assert opened.arrow_tables == 1 and opened.decompressed == 1
    assert "hidden-in-arrow" in opened.text_haystack()
    assert b"zstd-sec" in opened.byte_haystack()
    assert "absent-string" not in opened.text_haystack()


def test_json_string_leaves() -> None:
    doc = {"invoice": {"id": "INV-1042", "n": 3, "tags": ["abcdef", "abc"]}}
    assert json_string_leaves(doc, 6) == {"INV-1042", "abcdef"}
