"""Public batches (schema, ids, digests, privacy) and Lance tables."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest
from projection_builders import PROGRAM, SECRET_ID, Case, Lookup, execution_input
from projection_corpus import CasLookup, Corpus, streams

from activities.projection.assemble import abandoned_execution, assemble_execution
from activities.projection.batches import (
    PrivacyViolation,
    assert_public_only,
    batch_id,
    build_batches,
    ipc_stream_bytes,
    private_tables,
    read_ipc,
)
from activities.projection.model import BatchHeader, ExecutionProjection, ProjectionBatch
from formats import catalog
from formats.lance_schemas import private_schema
from formats.object_keys import Scope

SCOPE = Scope("tenant-a", "project-b", "env-c")


def project(case: Case | None = None) -> ExecutionProjection:
    result = assemble_execution(execution_input(case), Lookup())
    assert isinstance(result, ExecutionProjection)
    return result


def test_batch_schemas_are_exactly_the_public_schemas() -> None:
    batches = build_batches(project(Case(child_fails=True)), SCOPE, generation=3)
    assert {b.header.relation for b in batches} == set(catalog.PUBLIC_RELATIONS)
    for b in batches:
        table = read_ipc(b.ipc)
        assert table.schema.equals(catalog.public_schema(b.header.relation), check_metadata=True)
        assert not {c.name for c in catalog.private_columns(b.header.relation)} & set(table.schema.names)
        assert table.num_rows == b.header.row_count
        assert set(table.column("generation").to_pylist()) == {3}
        assert set(table.column("tenant_id").to_pylist()) == {"tenant-a"}
        ids = table.column("row_id").to_pylist()
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert b.header.content_digest == "sha256:" + hashlib.sha256(b.ipc).hexdigest()
        assert_public_only(b)


def test_same_input_gives_byte_identical_batches() -> None:
    # Two independent decodes and projections of the same evidence.
    first = build_batches(project(), SCOPE, generation=1)
    second = build_batches(project(), SCOPE, generation=1)
    assert [b.header for b in first] == [b.header for b in second]
    assert [b.ipc for b in first] == [b.ipc for b in second]
    a, b = private_tables(project()), private_tables(project())
    assert a.keys() == b.keys()
    for name in a:
        assert ipc_stream_bytes(a[name]) == ipc_stream_bytes(b[name])


def test_corpus_projection_is_deterministic(corpus: Corpus) -> None:
    def digests() -> list[str]:
        lookup = CasLookup(corpus.root)
        out = []
        for stream in streams(corpus.root):
            for inp in stream.ended_inputs()[:15]:
                p = assemble_execution(inp, lookup)
                assert isinstance(p, ExecutionProjection)
                out += [b.header.content_digest for b in build_batches(p, SCOPE, 1)]
        return out

    assert digests() == digests()


def test_batch_ids_ignore_the_generation_and_separate_relations() -> None:
    p = project()
    gen1 = {b.header.relation: b for b in build_batches(p, SCOPE, 1)}
    gen2 = {b.header.relation: b for b in build_batches(p, SCOPE, 2)}
    for rel, b in gen1.items():
        assert gen2[rel].batch_id == b.batch_id  # a rebuild reuses the id; the header carries the generation
        assert gen2[rel].header.generation == 2
        assert gen2[rel].header.content_digest != b.header.content_digest
    assert len({b.batch_id for b in gen1.values()}) == len(gen1)
    calls = gen1["calls_v1"]
    assert calls.header.root_id == p.execution_id
    assert calls.batch_id == batch_id(p.execution_id, "calls_v1", 0)


def test_partitions_split_large_relations() -> None:
    p = project()
    batches = [b for b in build_batches(p, SCOPE, 1, max_rows=2) if b.header.relation == "call_path_stats_v1"]
    assert [b.header.partition for b in batches] == [0, 1]
    assert sum(b.header.row_count for b in batches) == 3
    assert len({b.batch_id for b in batches}) == 2
    rows = [r for b in batches for r in read_ipc(b.ipc).column("row_id").to_pylist()]
    assert rows == sorted(rows)


def test_function_definitions_batch_is_shared_by_the_engines_executions() -> None:
    ok = {b.header.relation: b for b in build_batches(project(), SCOPE, 1)}
    failed = {b.header.relation: b for b in build_batches(project(Case(child_fails=True)), SCOPE, 1)}
    assert ok["function_definitions_v1"] == failed["function_definitions_v1"]
    assert ok["function_definitions_v1"].header.root_id == PROGRAM.hex()  # keyed by program, not root


def test_headers_travel_as_http_headers() -> None:
    b = build_batches(project(), SCOPE, 4)[0]
    h = b.header.to_wire(SCOPE.environment_id).http_headers()
    assert h["X-Baml-Generation"] == "4" and h["X-Baml-Content-Digest"] == b.header.content_digest
    assert (
        h["X-Baml-Environment-Id"] == "env-c" and h["Content-Type"] == "application/vnd.apache.arrow.stream"
    )
    assert h["X-Baml-Root-Id"] == b.header.root_id and h["X-Baml-Relation"] == b.header.relation


def _batch(relation: str, table: pa.Table) -> ProjectionBatch:
    ipc = ipc_stream_bytes(table)
    return ProjectionBatch(
        BatchHeader("x" * 32, 1, 1, relation, "r", 0, "sha256:" + "0" * 64, table.num_rows), ipc
    )


def test_privacy_guard_rejects_private_columns_and_relations() -> None:
    good = read_ipc(build_batches(project(), SCOPE, 1)[0].ipc)
    relation = build_batches(project(), SCOPE, 1)[0].header.relation
    leaked = good.append_column("args", pa.array(["{}"] * good.num_rows, pa.large_string()))
    with pytest.raises(PrivacyViolation, match="'args'"):
        assert_public_only(_batch(relation, leaked))
    with pytest.raises(PrivacyViolation, match="differs"):
        assert_public_only(_batch(relation, good.drop_columns(["row_id"])))
    with pytest.raises(PrivacyViolation, match="private"):
        assert_public_only(_batch("value_leaves_v1", pa.table({"row_id": ["a"]})))
    with pytest.raises(PrivacyViolation, match="unknown"):
        assert_public_only(_batch("nope_v1", pa.table({"row_id": ["a"]})))
    garbage = ProjectionBatch(BatchHeader("x" * 32, 1, 1, "calls_v1", "r", 0, "sha256:", 0), b"not arrow")
    with pytest.raises(PrivacyViolation, match="not an Arrow"):
        assert_public_only(garbage)


def test_rows_with_private_columns_never_become_batches() -> None:
    p = project()
    leaked = ExecutionProjection(
        p.execution_id,
        p.process_euid,
        p.status,
        p.index_state,
        p.value_state,
        {"calls_v1": [{**p.public["calls_v1"][0], "args": "{}"}]},
    )
    with pytest.raises(PrivacyViolation, match="args"):
        build_batches(leaked, SCOPE, 1)


def _value_strings(obj: object) -> set[str]:
    if isinstance(obj, str):
        return {obj}
    if isinstance(obj, dict):
        return {s for k, v in obj.items() for s in {k, *_value_strings(v)}}
    if isinstance(obj, list):
        return {s for v in obj for s in _value_strings(v)}
    return set()


def test_no_value_string_reaches_public_bytes(corpus: Corpus) -> None:
    lookup = CasLookup(corpus.root)
    checked = 0
    for stream in corpus.streams:
        for inp in stream.ended_inputs()[:20]:
            p = assemble_execution(inp, lookup)
            assert isinstance(p, ExecutionProjection)
            public = b"".join(b.ipc for b in build_batches(p, SCOPE, 1))
            secrets = set()
            for row in p.private["calls_v1"]:
                for role in ("args", "output", "error"):
                    if row[role] is not None:
                        secrets |= _value_strings(json.loads(row[role]))
            # Short strings (enum names like "gold") could occur by chance inside ids.
            for s in (s for s in secrets if len(s) >= 8):
                assert s.encode() not in public, s
                checked += 1
            for row in p.private["source_files_v1"]:
                assert row["path"].encode() not in public
    assert checked > 100


def test_hand_built_secrets_stay_private() -> None:
    p = project(Case(child_fails=True))
    public = b"".join(b.ipc for b in build_batches(p, SCOPE, 1))
    for secret in (SECRET_ID, "private failure detail", "baml_src/secret/main.baml", "refund approved"):
        assert secret.encode() not in public
    private = b"".join(ipc_stream_bytes(t) for t in private_tables(p).values())
    assert SECRET_ID.encode() in private and b"baml_src/secret/main.baml" in private


def test_private_tables_follow_the_catalog() -> None:
    tables = private_tables(project(Case(child_fails=True)))
    assert set(tables) == {
        "calls_v1",
        "errors_v1",
        "function_definitions_v1",
        "value_leaves_v1",
        "values_v1",
        "source_files_v1",
        "cid_refs_v1",
    }
    for name in ("value_leaves_v1", "values_v1", "source_files_v1", "cid_refs_v1"):
        assert tables[name].schema.names == [c.name for c in catalog.relation(name).columns]
    assert tables["calls_v1"].schema.names == ["row_id", "execution_id", "call_id", "args", "output", "error"]
    assert tables["calls_v1"].schema == private_schema("calls_v1")
    leaves = tables["value_leaves_v1"].column("row_id").to_pylist()
    assert leaves == sorted(leaves)
    with pytest.raises(KeyError):
        private_schema("health_v1")


def test_batches_pass_boundarys_own_checks(corpus: Corpus) -> None:
    """The receiving side's validation (api/boundary/facts/batch_check.py) accepts every batch."""
    from api.boundary.facts import batch_check as bc

    lookup = CasLookup(corpus.root)
    scope = bc.BatchScope(SCOPE.tenant_id, SCOPE.project_id, SCOPE.environment_id, 5)
    projections = [project(), project(Case(child_fails=True)), project(Case(root_started_lost=True))]
    projections += [
        p for s in corpus.streams for p in (assemble_execution(i, lookup) for i in s.ended_inputs()[:10])
    ]
    projections += [abandoned_execution(i, lookup) for s in corpus.streams for i in s.abandoned_inputs()]
    for p in projections:
        assert isinstance(p, ExecutionProjection)
        for b in build_batches(p, SCOPE, 5):
            h = b.header
            bc.check_digest(b.ipc, h.content_digest)
            rel = bc.relation_of(h.relation, h.catalog_version)
            table = bc.check_schema(bc.read_ipc(b.ipc), rel, h.catalog_version)
            bc.check_scope(table, scope, rel, h.root_id)
