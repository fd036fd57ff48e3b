"""IndexAndCompact is incremental: a tick creates only the indexes a dataset lacks, and folds the
rows that arrived since into the existing ones instead of rebuilding them (an n-gram index gets a
delta); a step that loses a commit race is run again (local Lance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance_rows import leaf_rows, ledger_rows

from api.dataplane import lance_store
from api.dataplane.lance_store import (
    DATASETS,
    LEDGER,
    LanceStore,
    dataset_schema,
    fold_new_rows,
)
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")


def _refs(start: int, n: int) -> pa.Table:
    cids = [f"{i:064d}" for i in range(start, start + n)]
    return pa.table(
        {"cid": cids, "root_id": [f"r{i % 7}" for i in range(n)], "process_euid": ["e"] * n},
        schema=dataset_schema("cid_refs_v1"),
    )


def _indexes(store: LanceStore) -> dict[str, tuple[str, int]]:
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    out = {}
    for index in ds.list_indices():
        stats = ds.stats.index_stats(index["name"])
        out[index["name"]] = (index["uuid"], int(stats["num_unindexed_rows"]))
    return out


def test_a_second_tick_extends_the_indexes_it_created_instead_of_rebuilding_them(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "cid_refs_v1", _refs(0, 500))
    first = store.index_and_compact(SCOPE, "cid_refs_v1")
    assert first["indexes"] == len(DATASETS["cid_refs_v1"].btree)
    before = _indexes(store)
    assert all(unindexed == 0 for _, unindexed in before.values())

    store.merge(SCOPE, "cid_refs_v1", _refs(500, 300))
    assert all(unindexed == 300 for _, unindexed in _indexes(store).values())
    second = store.index_and_compact(SCOPE, "cid_refs_v1")
    assert second["indexes"] == 0  # nothing created, nothing replaced
    after = _indexes(store)
    assert set(after) == set(before)
    assert all(unindexed == 0 for _, unindexed in after.values())  # the new rows are in the indexes

    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    wanted = f"{650:064d}"
    assert ds.to_table(filter=f"cid = '{wanted}'")["cid"].to_pylist() == [wanted]
    assert ds.count_rows() == 800


def test_an_index_of_another_kind_is_replaced(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "cid_refs_v1", _refs(0, 200))
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    ds.create_scalar_index("root_id", index_type="BITMAP")  # the spec says BTREE
    got = store.index_and_compact(SCOPE, "cid_refs_v1")
    assert got["indexes"] == 2  # cid created, root_id replaced
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    kinds = {tuple(i["fields"]): str(i["type"]).lower() for i in ds.list_indices()}
    assert kinds == {("cid",): "btree", ("root_id",): "btree"}


def _ledger_rows(start: int, n: int, status: str = "projected") -> pa.Table:
    return ledger_rows([f"{i:064x}" for i in range(start, start + n)], status=status)


def test_upserts_keep_working_after_a_maintenance_tick(tmp_path: Path) -> None:
    # A BTREE on the key that older code built (and pylance 14 once refused upserts into) is not
    # in the spec: a tick drops it, and upserts keep working.
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, LEDGER, _ledger_rows(0, 50))
    ds = store.open(SCOPE, LEDGER)
    assert ds is not None
    ds.create_scalar_index("row_id", index_type="BTREE")  # what IndexAndCompact used to build
    store.index_and_compact(SCOPE, LEDGER)
    ds = store.open(SCOPE, LEDGER)
    assert ds is not None
    assert {tuple(i["fields"]) for i in ds.list_indices()} == {("root_id",), ("generation",)}
    got = store.merge(SCOPE, LEDGER, _ledger_rows(25, 50, status="abandoned"))
    assert (got.inserted, got.updated) == (25, 25)
    ds = store.open(SCOPE, LEDGER)
    assert ds is not None and ds.count_rows() == 75


def _source_files(program: str, n: int) -> pa.Table:
    schema = dataset_schema("source_files_v1")
    return pa.table(
        {
            "program_id": [program] * n,
            "file_id": list(range(n)),
            "path": [f"src/f{i}.baml" for i in range(n)],
            "text": pa.nulls(n, schema.field("text").type),
        },
        schema=schema,
    )


def test_an_index_on_part_of_an_upsert_key_that_the_spec_names_is_built_once(tmp_path: Path) -> None:
    # source_files_v1 is keyed (program_id, file_id) and wants a bitmap on program_id: a tick that
    # dropped every index touching a key rebuilt it at every tick.
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "source_files_v1", _source_files("p1", 3))
    assert store.index_and_compact(SCOPE, "source_files_v1")["indexes"] == 1
    ds = store.open(SCOPE, "source_files_v1")
    assert ds is not None
    got = store.merge(SCOPE, "source_files_v1", _source_files("p2", 3))  # upserts still land
    assert got.inserted == 3
    assert store.index_and_compact(SCOPE, "source_files_v1")["indexes"] == 0
    ds = store.open(SCOPE, "source_files_v1")
    assert ds is not None
    (index,) = ds.list_indices()
    assert index["fields"] == ["program_id"]
    assert ds.stats.index_stats(index["name"])["num_unindexed_rows"] == 0  # the new rows folded in
    assert ds.count_rows() == 6


def _ngram_entries(store: LanceStore) -> list[Any]:
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None
    return [i for i in ds.list_indices() if tuple(i["fields"]) == ("string",)]


def test_new_rows_get_an_ngram_delta_instead_of_a_rewrite_of_its_postings(tmp_path: Path) -> None:
    # Merging new rows into an n-gram index rewrites all of its postings (seconds to minutes of
    # CPU as it grows): a tick gives the new fragments a delta index of their own.
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 3_000, "kiwi"))
    store.index_and_compact(SCOPE, "value_leaves_v1")
    (first,) = _ngram_entries(store)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(3_000, 200, "mango"))
    store.index_and_compact(SCOPE, "value_leaves_v1")
    entries = _ngram_entries(store)
    assert len(entries) == 2 and first["uuid"] in {e["uuid"] for e in entries}  # kept, not rewritten
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None
    assert ds.stats.index_stats(str(first["name"]))["num_unindexed_rows"] == 0
    assert ds.count_rows(filter="contains(string, 'mango')") == 200
    assert ds.count_rows(filter="contains(string, 'kiwi')") == 3_000


def test_many_ticks_keep_few_index_entries_and_never_rewrite_the_first_one(tmp_path: Path) -> None:
    # Each tick's rows get a delta (or a merge with the small newest deltas, index_tiers): the
    # first, big entry of each index is kept, every query probes only a few entries.
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 20_000, "word0x"))
    store.index_and_compact(SCOPE, "value_leaves_v1")
    first = {e["name"]: e["uuid"] for e in _entries(store)}
    counts = []
    ticks = 12
    for k in range(1, ticks + 1):
        store.merge(SCOPE, "value_leaves_v1", leaf_rows(20_000 + k * 100, 100, f"word{k}x"))
        store.index_and_compact(SCOPE, "value_leaves_v1")
        counts.append(len(_ngram_entries(store)))
    assert max(counts) <= 4
    assert {e["uuid"] for e in _entries(store)} >= set(first.values())
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None
    assert all(ds.stats.index_stats(name)["num_unindexed_rows"] == 0 for name in first)
    expected = [20_000] + [100] * ticks
    assert [ds.count_rows(filter=f"contains(string, 'word{k}x')") for k in range(ticks + 1)] == expected
    assert ds.count_rows(filter="call_id = 'c20550'") == 1  # through the BTREE and its deltas


def _entries(store: LanceStore) -> list[Any]:
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None
    return list(ds.list_indices())


def test_a_window_of_leaf_start_times_is_pruned_through_the_zone_map(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    for start in range(0, 30_000, 10_000):
        store.merge(SCOPE, "value_leaves_v1", leaf_rows(start, 10_000))
    store.index_and_compact(SCOPE, "value_leaves_v1")
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None
    window = "started_at_ns >= 12345000 AND started_at_ns < 12400000"
    assert "ZoneMap" in ds.scanner(columns=["row_id"], filter=f"path = '$.text' AND {window}").explain_plan()
    got = ds.to_table(columns=["row_id"], filter=f"path = '$.text' AND {window}")["row_id"].to_pylist()
    assert sorted(got) == sorted(f"leaf{i}" for i in range(12345, 12400))  # inexact index, exact answer


def test_a_step_that_loses_a_commit_race_is_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another worker's compaction committing first makes Lance refuse the fold ("preempted"): the
    # tick runs the fold again on the newest version instead of failing the activity.
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "cid_refs_v1", _refs(0, 100))
    store.index_and_compact(SCOPE, "cid_refs_v1")
    store.merge(SCOPE, "cid_refs_v1", _refs(100, 50))
    calls: list[str] = []

    def loses_once(ds: lance.LanceDataset, dataset: str, *, only: tuple[str, ...]) -> None:
        calls.extend(only)
        if len(calls) == 2:  # the second index's fold loses
            raise OSError(
                "Retryable commit conflict for version 9: This CreateIndex transaction was "
                "preempted by concurrent transaction Rewrite at version 9. Please retry."
            )
        fold_new_rows(ds, dataset, only=only)

    monkeypatch.setattr(lance_store, "fold_new_rows", loses_once)
    store.index_and_compact(SCOPE, "cid_refs_v1")
    # Only the index whose fold lost is folded again: the one before it keeps its fold.
    names = sorted(_indexes(store))
    assert len(names) == 2 and calls == [names[0], names[1], names[1]]
    assert all(unindexed == 0 for _, unindexed in _indexes(store).values())
