"""Merges append rows whose keys are new and merge only the ones that exist (local Lance).

A merge_insert joins its rows against every key of the dataset, a cost that grows with the
dataset; ``LanceStore.merge`` probes the keys through the index on the column they derive from
and appends the new rows (api/dataplane/lance_store.py, ``_append_new_keys``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lance
import pytest
from lance.commit import CommitConflictError
from lance_rows import leaf_rows, value_rows
from racing_writers import merge_in_racing_rounds

from api.dataplane.lance_store import LanceStore, create_missing_indexes
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")
ROUNDS = 10


def _operations(store: LanceStore, dataset: str, n: int) -> list[str]:
    ds = store.open(SCOPE, dataset)
    assert ds is not None
    return [type(t.operation).__name__ for t in ds.get_transactions(n) if t is not None]


def _strings(store: LanceStore) -> dict[str, str]:
    table = store.read(SCOPE, "value_leaves_v1", columns=["row_id", "string"])
    rows = table.to_pylist()
    assert len(rows) == len({r["row_id"] for r in rows}), "a key is held twice"
    return {r["row_id"]: r["string"] for r in rows}


def test_new_keys_are_appended_and_existing_keys_merged(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 10))
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None and create_missing_indexes(ds, "value_leaves_v1", only=("execution_id",)) == 1
    # Rows 10..19 belong to the same executions as rows 0..9 (leaf_rows: x0..x4) but are new.
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(10, 10))
    assert _operations(store, "value_leaves_v1", 1) == ["Append"]
    # Rows 15..24: 20..24 are new and appended, 15..19 exist and are merged (updated: changed).
    result = store.merge(SCOPE, "value_leaves_v1", leaf_rows(15, 10, word="again"))
    assert _operations(store, "value_leaves_v1", 2) == ["Update", "Append"]
    assert (result.inserted, result.updated) == (5, 5)
    strings = _strings(store)
    assert len(strings) == 25
    assert strings["leaf14"] == "row 14 says text" and strings["leaf15"] == "row 15 says again"
    # The same rows again (a redelivery) change nothing.
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(15, 10, word="again"))
    assert _strings(store) == strings


def test_rows_the_dataset_holds_unchanged_are_not_merged_and_commit_nothing(tmp_path: Path) -> None:
    # A redelivered execution's rows, or a value shared by many executions: no join, no version
    # (each was an empty commit that could lose its race to another writer's).
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 10))
    store.merge(SCOPE, "values_v1", value_rows([f"cid{i}" for i in range(10)]))
    for dataset, column in (("value_leaves_v1", "execution_id"), ("values_v1", "cid")):
        ds = store.open(SCOPE, dataset)
        assert ds is not None and create_missing_indexes(ds, dataset, only=(column,)) == 1
    leaves = store.open(SCOPE, "value_leaves_v1")
    values = store.open(SCOPE, "values_v1")
    assert leaves is not None and values is not None

    again = store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 10))
    assert (again.inserted, again.updated, again.version) == (0, 0, leaves.version)
    again = store.merge(SCOPE, "values_v1", value_rows([f"cid{i}" for i in range(10)]))
    assert (again.inserted, again.updated, again.version) == (0, 0, values.version)

    # Held rows beside new ones: only the new ones are written, in one append.
    mixed = store.merge(SCOPE, "value_leaves_v1", leaf_rows(5, 10))
    assert (mixed.inserted, mixed.updated, mixed.version) == (5, 0, leaves.version + 1)
    assert _operations(store, "value_leaves_v1", 1) == ["Append"]
    # Held rows that change are still merged.
    changed = store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 15, word="again").slice(3, 12))
    assert (changed.inserted, changed.updated) == (0, 12)
    assert _operations(store, "value_leaves_v1", 1) == ["Update"]
    strings = _strings(store)
    assert strings["leaf2"] == "row 2 says text" and strings["leaf3"] == "row 3 says again"


def test_two_writers_appending_the_same_new_rows_keep_one_copy_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    LanceStore(root=tmp_path).merge(SCOPE, "value_leaves_v1", leaf_rows(0, 5))
    with caplog.at_level(logging.WARNING, logger="baml_studio.lance_store"):
        merge_in_racing_rounds(
            tmp_path, SCOPE, "value_leaves_v1", lambda r: leaf_rows(r * 100, 10), range(1, ROUNDS + 1)
        )
    assert len(_strings(LanceStore(root=tmp_path))) == 5 + ROUNDS * 10
    # The rounds raced: at least one append of the same keys was committed twice and repaired.
    assert any("appended twice" in r.getMessage() for r in caplog.records)


def test_copies_a_dead_writer_left_are_removed_before_the_next_merge(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 10))
    # A writer that died between its append and its check leaves the same keys twice.
    store.append_new(SCOPE, "value_leaves_v1", leaf_rows(0, 10))
    assert store.count(SCOPE, "value_leaves_v1") == 20
    # Its redelivery probes the keys, removes the later copies, then merges as usual.
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 10, word="fixed"))
    strings = _strings(store)
    assert sorted(strings) == sorted(f"leaf{i}" for i in range(10))
    assert set(strings.values()) == {f"row {i} says fixed" for i in range(10)}


def test_probes_and_lookups_read_only_fragments_that_may_hold_their_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most fragments the lookup index does not cover yet are this store's own appends, whose CIDs
    # it wrote: a probe or a lookup by CID reads those only when they hold one of its CIDs, and
    # always reads every fragment another store wrote.
    scans: list[int | None] = []  # fragments each scan read (None: all)
    scanner = lance.LanceDataset.scanner

    def counting(self: lance.LanceDataset, *args: Any, **kwargs: Any) -> Any:
        fragments = kwargs.get("fragments")
        scans.append(None if fragments is None else len(fragments))
        return scanner(self, *args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "scanner", counting)
    # Every write starts from the newest version, so the first probe already sees the other
    # store's commit below (from an older base it is found by the probe after the rebase).
    store = LanceStore(root=tmp_path, write_base_ttl_s=0.0)
    batches = [[f"{b:02d}{i:062x}" for i in range(4)] for b in range(8)]
    for cids in batches[:5]:
        store.merge(SCOPE, "values_v1", value_rows(cids))
    scans.clear()
    store.merge(SCOPE, "values_v1", value_rows(batches[5]))  # new CIDs: no fragment can hold them
    assert scans == []
    assert sorted(store.lookup_values(SCOPE, batches[2])) == batches[2]
    assert scans == [1]  # the one fragment holding them
    # Another store's append: this store knows nothing of its fragment and reads it.
    LanceStore(root=tmp_path).merge(SCOPE, "values_v1", value_rows(batches[6]))
    scans.clear()
    result = store.merge(SCOPE, "values_v1", value_rows(batches[6] + batches[7]))
    assert result.inserted == 4  # batch 6 found in the other store's fragment, not appended again
    assert scans[0] == 1
    assert sorted(store.lookup_values(SCOPE, batches[6])) == batches[6]
    store.merge(SCOPE, "values_v1", value_rows(batches[3]))  # a redelivery of its own rows
    cids = store.read(SCOPE, "values_v1", columns=["cid"])["cid"].to_pylist()
    assert sorted(cids) == sorted(c for b in batches for c in b)  # each CID once


def _data_files(root: Path) -> set[str]:
    return {p.name for p in root.rglob("value_leaves_v1.lance/data/*.lance")}


def test_an_append_that_loses_every_race_commits_its_fragments_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = LanceStore(root=tmp_path)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 5))
    real_commit = lance.LanceDataset.commit
    calls: list[str] = []

    def losing_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(type(args[1]).__name__)
        if len(calls) == 1:
            # Another writer wins the race (a real commit), and this one has spent Lance's retries.
            LanceStore(root=tmp_path).merge(SCOPE, "value_leaves_v1", leaf_rows(100, 5))
            raise CommitConflictError(
                "Commit conflict for version 3: Failed to commit the transaction after 20 retries."
            )
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "commit", losing_first)
    with caplog.at_level(logging.INFO, logger="baml_studio.lance_store"):
        store.merge(SCOPE, "value_leaves_v1", leaf_rows(10, 5))
    monkeypatch.undo()
    assert sorted(_strings(LanceStore(root=tmp_path))) == sorted(
        f"leaf{i}" for i in [*range(5), *range(10, 15), *range(100, 105)]
    )
    assert any("committing its fragments again" in r.getMessage() for r in caplog.records)
    # The same fragments were committed: every data file written is one the dataset holds.
    ds = LanceStore(root=tmp_path).open(SCOPE, "value_leaves_v1")
    assert ds is not None
    held = {Path(f.path).name for frag in ds.get_fragments() for f in frag.metadata.files}
    assert _data_files(tmp_path) == held


def test_an_append_gives_up_after_its_retries_and_on_other_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LanceStore(root=tmp_path, outer_retries=2)
    store.merge(SCOPE, "value_leaves_v1", leaf_rows(0, 5))
    calls: list[int] = []

    def failing(error: OSError) -> Any:
        def commit(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            raise error

        return commit

    conflict = CommitConflictError("Commit conflict for version 3: Failed after 20 retries.")
    monkeypatch.setattr(lance.LanceDataset, "commit", failing(conflict))
    monkeypatch.setattr("api.dataplane.lance_store.wait_random_exponential", lambda **kw: lambda state: 0)
    with pytest.raises(CommitConflictError):
        store.merge(SCOPE, "value_leaves_v1", leaf_rows(10, 5))
    assert len(calls) == 3  # the first commit and two more
    calls.clear()
    monkeypatch.setattr(lance.LanceDataset, "commit", failing(OSError("No space left on device")))
    with pytest.raises(OSError, match="No space left"):
        store.merge(SCOPE, "value_leaves_v1", leaf_rows(10, 5))
    assert len(calls) == 1  # not a lost race: not retried
