"""Content-hashed program ids: upstream's formula, and identical builds shared across processes."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from synth_disk import read_stream

from formats import cas
from formats.ids import content_program_id, program_content_hash
from formats.synth import SynthConfig, synthesize
from formats.synth.facts import build_function_table
from formats.synth.project import project


def test_program_hash_matches_upstream_golden() -> None:
    # Upstream's cross-platform golden for ("b.baml", "beta"), ("a.baml", "alpha") at version 0.17.0.
    files = [("b.baml", b"beta"), ("a.baml", b"alpha")]
    digest = program_content_hash("0.17.0", files)
    assert digest.hex() == "e98260b82b3b024bcc7d3b56fee3632a840cc8b05abf9ebcbd28882b16ef3049"
    assert content_program_id("0.17.0", files) == digest[:16]


def test_program_hash_is_order_independent_byte_sensitive_and_length_framed() -> None:
    base = program_content_hash("1", [("a.baml", b"alpha"), ("b.baml", b"beta")])
    assert base == program_content_hash("1", [("b.baml", b"beta"), ("a.baml", b"alpha")])
    assert base != program_content_hash("1", [("a.baml", b"alpha "), ("b.baml", b"beta")])
    assert base != program_content_hash("2", [("a.baml", b"alpha"), ("b.baml", b"beta")])
    # Length framing: a version boundary cannot slide into the first path.
    assert program_content_hash("0.17.1", [("0a.baml", b"x")]) != program_content_hash(
        "0.17.10", [("a.baml", b"x")]
    )
    # The framing spelled out: domain, then (u64 length, bytes) per field.
    want = hashlib.sha256(b"baml-program-v1")
    for field in (b"1", b"a.baml", b"alpha", b"b.baml", b"beta"):
        want.update(struct.pack(">Q", len(field)) + field)
    assert base == want.digest()


def _engines(root: Path, stream: str) -> list[tuple[int, bytes, bytes | None]]:
    return [(e.engine_id, e.program_id, e.function_table_cid) for _, e in read_stream(root, stream).engines]


def test_two_processes_of_one_build_share_program_id_and_function_table(tmp_path: Path) -> None:
    config = SynthConfig(seed=3, executions=20, processes=2, engines_per_process=2, value_pool_size=8)
    root = tmp_path / "p"
    truth = synthesize(root, config)
    a, b = (_engines(root, s) for s in truth.streams)
    program_id = content_program_id(config.baml_version, project(0).files.items())
    assert {pid for _, pid, _ in a + b} == {program_id}
    assert len({cid for _, _, cid in a + b}) == 1
    (cid,) = {cid for _, _, cid in a}
    assert cid is not None and cas.cid_to_string(cid)
    tables = [p for p in (root / "cas").rglob("*.bamlvalue") if p.name.startswith(cid.hex())]
    assert len(tables) == 1, "one table object serves both processes"
    # Same build, same call paths: the CCT context keys of both streams coincide.
    keys = []
    for stream in truth.streams:
        disk = read_stream(root, stream)
        payloads = [g.cct_payload() for seg in disk.data.values() for g in seg.groups]
        keys.append({d.key for c in payloads if c is not None for d in c.contexts})
    assert keys[0] and keys[0] & keys[1]


def test_distinct_builds_get_distinct_program_ids(tmp_path: Path) -> None:
    config = SynthConfig(seed=3, executions=10, processes=2, builds=2, value_pool_size=8)
    root = tmp_path / "p"
    truth = synthesize(root, config)
    (a,), (b,) = (_engines(root, s) for s in truth.streams)
    assert a[1] != b[1] and a[2] != b[2]
    assert b[1] == content_program_id(config.baml_version, project(1).files.items())
    # The version is part of the identity too.
    assert content_program_id("9.9.9", project(0).files.items()) != a[1]


def test_function_spans_point_into_the_project_files() -> None:
    build = project(1)
    table = build_function_table(build)
    paths = {f.file_id: f.path for f in table.files}
    for entry in table.functions:
        span = entry.source_span
        assert span is not None
        text = build.files[paths[span.file_id]][span.start : span.end].decode()
        assert text.startswith(f"function {entry.display_name}(") and text.endswith("}")
