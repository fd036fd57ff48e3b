"""The relation catalog, version 1."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from formats import catalog


def test_required_client_columns_exist_by_name() -> None:
    calls = catalog.relation("calls_v1")
    public = set(catalog.public_schema("calls_v1").names)
    assert {
        "execution_id",
        "call_id",
        "parent_call_id",
        "function_name",
        "started_at_ns",
        "ended_at_ns",
        "duration_ns",
        "status",
        "args_state",
        "output_state",
        "error_state",
    } <= public
    assert {c.name for c in catalog.private_columns("calls_v1")} >= {"args", "output", "error"}
    assert calls.column("args").visibility == "private"
    threads = set(catalog.public_schema("threads_v1").names)
    assert {
        "execution_id",
        "thread_id",
        "is_root",
        "status",
        "value_state",
        "index_state",
        "started_at_ns",
        "ended_at_ns",
    } <= threads


@pytest.mark.parametrize("name", catalog.PUBLIC_RELATIONS)
def test_every_public_relation_carries_scope_generation_row_id(name: str) -> None:
    schema = catalog.public_schema(name)
    assert schema.names[:5] == ["tenant_id", "project_id", "environment_id", "generation", "row_id"]
    assert schema.field("generation").type == pa.uint64()
    assert not any(c.name in schema.names for c in catalog.private_columns(name))
    assert schema.metadata[b"baml.relation"] == name.encode()


def test_relations_of_version_1() -> None:
    assert set(catalog.PUBLIC_RELATIONS) == {
        "calls_v1",
        "threads_v1",
        "call_path_stats_v1",
        "errors_v1",
        "function_definitions_v1",
        "health_v1",
    }
    assert {"values_v1", "value_leaves_v1", "source_files_v1", "cid_refs_v1"} <= set(
        catalog.PRIVATE_RELATIONS
    )
    values = catalog.relation("values_v1")
    assert [c.name for c in values.columns][:2] == ["cid", "codec"]
    assert values.column("body").visibility == "private" and values.column("locator").visibility == "private"
    leaves = {c.name for c in catalog.relation("value_leaves_v1").columns}
    assert {"row_id", "role", "path", "string", "number", "bool"} <= leaves
    assert {c.name for c in catalog.relation("cid_refs_v1").columns} == {"cid", "root_id", "process_euid"}
    with pytest.raises(KeyError):
        catalog.public_schema("values_v1")
    with pytest.raises(catalog.UnknownCatalogVersion):
        catalog.relations(2)


def test_health_has_the_26_counters_in_order() -> None:
    schema = catalog.public_schema("health_v1")
    counters = [n for n in schema.names if n in catalog.HEALTH_COUNTERS]
    assert counters == list(catalog.HEALTH_COUNTERS) and len(counters) == 26
    assert all(schema.field(n).type == pa.uint64() for n in counters)
    assert counters[0] == "corrupt_records" and counters[-1] == "terminal_error_link_evidence_publish_failed"


def test_no_value_or_source_column_is_public() -> None:
    value_words = ("args", "output", "error", "body", "source", "path", "text", "string", "number", "bool")
    for rel in catalog.relations():
        for col in rel.columns:
            if col.visibility == "public":
                assert col.name not in value_words, (rel.name, col.name)
                assert not col.name.startswith("source"), (rel.name, col.name)


def test_vocabularies() -> None:
    assert catalog.THREAD_STATUSES == ("succeeded", "failed", "cancelled", "panicked", "abandoned", "running")
    assert catalog.VALUE_STATES == ("none", "partial", "complete")
    assert catalog.INDEX_STATES == ("complete", "index_corrupt", "root_started_lost", "no_root_ended")
    for ok in ("available", "not_captured", "not_applicable", "lost:value_too_large", "lost:queue_full"):
        assert catalog.is_availability_state(ok)
    for bad in ("lost:", "lost:Bad Reason", "missing", "", "LOST:x"):
        assert not catalog.is_availability_state(bad)
    assert catalog.lost("queue_full") == "lost:queue_full"
    with pytest.raises(ValueError):
        catalog.lost("")


def test_document_round_trips_and_digest_is_stable() -> None:
    doc = catalog.catalog_document(1)
    assert doc["digest"] == catalog.catalog_digest(1)
    json.dumps(doc)
    for rel in doc["relations"]:
        if rel["storage"] == "clickhouse":
            assert catalog.schema_from_document(rel).equals(
                catalog.public_schema(rel["name"]), check_metadata=True
            )
        else:
            assert rel["arrow_schema_ipc_base64"] is None
    # Pinned: a change to catalog version 1 must be a new catalog version instead.
    assert doc["digest"] == "3dd0aa5b29443338ce732aebcc7c77ce3f13a32955cd07c9da43ad709c211696"


def test_deterministic_row_ids() -> None:
    a = catalog.deterministic_row_id("calls_v1", "ab" * 16, 3)
    assert a == catalog.deterministic_row_id("calls_v1", "ab" * 16, 3)
    assert a != catalog.deterministic_row_id("calls_v1", "ab" * 16, 4)
    assert a != catalog.deterministic_row_id("threads_v1", "ab" * 16, 3)
    # Length-prefixed parts: ("a","bc") and ("ab","c") differ.
    assert catalog.deterministic_row_id("r", "a", "bc") != catalog.deterministic_row_id("r", "ab", "c")
    assert len(a) == 32


def _row_id_by_hand(*parts: str | int) -> str:
    """docs/projection.md's formula: SHA-256 over the parts, each as a 4-byte big-endian length
    and its UTF-8 text; the first 32 hex digits."""
    h = hashlib.sha256()
    for part in parts:
        data = str(part).encode()
        h.update(len(data).to_bytes(4, "big") + data)
    return h.hexdigest()[:32]


def test_row_ids_of_a_shared_prefix_are_the_deterministic_row_ids() -> None:
    root = "ab" * 16
    assert catalog.deterministic_row_id("calls_v1", root, "c1") == _row_id_by_hand("calls_v1", root, "c1")
    calls = catalog.RowIds("calls_v1", root)
    assert [calls(c) for c in ("c1", "c2", 7)] == [
        _row_id_by_hand("calls_v1", root, c) for c in ("c1", "c2", 7)
    ]
    leaves = catalog.RowIds("value_leaves_v1", root)
    # past the precomputed index parts (4096) too
    assert leaves.indexed(4100, "c1", "output") == [
        _row_id_by_hand("value_leaves_v1", root, "c1", "output", i) for i in range(4100)
    ]
    assert leaves.indexed(0, "c1", "output") == []
    # the prefix is not changed by use
    assert calls("c1") == _row_id_by_hand("calls_v1", root, "c1")
