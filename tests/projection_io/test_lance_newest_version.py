"""LanceStore.open finds the newest version from the newest one it saw, without listing
``_versions/`` (whose length is every version kept), and is never behind another writer's commits
(local Lance: a second store stands for another worker process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

from api.dataplane import lance_store as ls
from api.dataplane.lance_store import LanceStore, dataset_schema
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")


def _refs(i: int) -> pa.Table:
    return pa.table(
        {"cid": [f"{i:064x}"], "root_id": ["r"], "process_euid": ["e"]}, schema=dataset_schema("cid_refs_v1")
    )


def test_open_is_always_the_newest_version_and_lists_only_when_far_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, writer = LanceStore(root=tmp_path), LanceStore(root=tmp_path)
    listings: list[str] = []
    opened = LanceStore._open_version

    def spy(self: LanceStore, uri: str, version: int | None) -> Any:
        if self is reader and version is None:
            listings.append(uri)
        return opened(self, uri, version)

    monkeypatch.setattr(LanceStore, "_open_version", spy)
    assert reader.open(SCOPE, "cid_refs_v1") is None  # no dataset yet: nothing to start from
    writer.merge(SCOPE, "cid_refs_v1", _refs(0))
    first = reader.open(SCOPE, "cid_refs_v1")
    assert first is not None and len(listings) == 2  # the first sight of a dataset lists once

    for behind in (0, 1, 3, ls.LATEST_PROBES):
        for i in range(behind):
            writer.merge(SCOPE, "cid_refs_v1", _refs(100 * behind + i))
        newest = lance.dataset(reader.uri(SCOPE, "cid_refs_v1")).version
        ds = reader.open(SCOPE, "cid_refs_v1")
        assert ds is not None and ds.version == newest and ds.count_rows() == ds.version - 1
    assert len(listings) == 2  # up to LATEST_PROBES commits behind: found by opening the next ones

    for i in range(ls.LATEST_PROBES + 1):
        writer.merge(SCOPE, "cid_refs_v1", _refs(1000 + i))
    ds = reader.open(SCOPE, "cid_refs_v1")
    assert ds is not None and ds.version == lance.dataset(reader.uri(SCOPE, "cid_refs_v1")).version
    assert len(listings) == 3  # further behind: one listing is the cheaper way

    # Its own commits move it too: the next open starts at the version it committed.
    committed = reader.merge(SCOPE, "cid_refs_v1", _refs(5000)).version
    assert reader.open(SCOPE, "cid_refs_v1").version == committed  # type: ignore[union-attr]
    assert len(listings) == 3


def _sources(text: str) -> pa.Table:
    return pa.table(
        {"program_id": ["p1", "p1"], "file_id": [0, 1], "path": ["a.baml", "b.baml"], "text": [text, "b"]},
        schema=dataset_schema("source_files_v1"),
    )


def test_a_programs_unchanged_rows_commit_no_new_version(tmp_path: Path) -> None:
    """Every execution carries its program's rows: sent again unchanged, they make no version
    (each kept version lengthens the listing that every commit makes)."""
    store = LanceStore(root=tmp_path)
    first = store.merge(SCOPE, "source_files_v1", _sources("a"))
    again = store.merge(SCOPE, "source_files_v1", _sources("a"))
    assert (again.version, again.inserted, again.updated) == (first.version, 0, 0)
    changed = store.merge(SCOPE, "source_files_v1", _sources("a, edited"))
    assert (changed.version, changed.updated) == (first.version + 1, 1)
    ds = store.open(SCOPE, "source_files_v1")
    assert ds is not None and sorted(ds.to_table()["text"].to_pylist()) == ["a, edited", "b"]


def test_rows_known_held_by_the_newest_version_are_not_merged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program's rows, once found (or committed) in a version that is still the newest, are not
    joined against the dataset again; any other version, however it came (another process's
    delete, an edit), is checked as before."""
    store, other = LanceStore(root=tmp_path), LanceStore(root=tmp_path)
    joins: list[int] = []
    merge_insert = lance.LanceDataset.merge_insert

    def counting(self: lance.LanceDataset, on: Any) -> Any:
        joins.append(self.version)
        return merge_insert(self, on)

    monkeypatch.setattr(lance.LanceDataset, "merge_insert", counting)

    def texts() -> list[str]:
        ds = store.open(SCOPE, "source_files_v1")
        assert ds is not None
        return sorted(ds.to_table()["text"].to_pylist())

    first = store.merge(SCOPE, "source_files_v1", _sources("a"))
    assert len(joins) == 1
    again = store.merge(SCOPE, "source_files_v1", _sources("a"))
    one_file = store.merge(SCOPE, "source_files_v1", _sources("a").slice(0, 1))
    assert len(joins) == 1  # held by the version this store committed: no join
    assert again.version == one_file.version == first.version

    # Another process deletes a row (an erasure of an orphaned program): a new version, checked.
    ds = other.open(SCOPE, "source_files_v1")
    assert ds is not None
    ds.delete("file_id = 1")
    restored = store.merge(SCOPE, "source_files_v1", _sources("a"))
    assert len(joins) == 2 and restored.inserted == 1 and texts() == ["a", "b"]

    # An edit commits; the rows before the edit are not held by that version, so they are merged.
    store.merge(SCOPE, "source_files_v1", _sources("a, edited"))
    assert len(joins) == 3 and texts() == ["a, edited", "b"]
    reverted = store.merge(SCOPE, "source_files_v1", _sources("a"))
    assert len(joins) == 4 and reverted.updated == 1 and texts() == ["a", "b"]

    # A version found unchanged by the dry run is remembered too: the second store joins once.
    other.merge(SCOPE, "source_files_v1", _sources("a"))
    other.merge(SCOPE, "source_files_v1", _sources("a"))
    assert len(joins) == 5


def test_rows_held_are_remembered_for_the_latest_datasets_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory of rows held is bounded (``REPEATS_HELD`` datasets, least recently merged
    forgotten first); a forgotten dataset is dry-run again, and found unchanged."""
    monkeypatch.setattr(ls, "REPEATS_HELD", 1)
    store = LanceStore(root=tmp_path)
    other_scope = Scope("ten_a", "prj_a", "env_b")
    store.merge(SCOPE, "source_files_v1", _sources("a"))
    store.merge(other_scope, "source_files_v1", _sources("a"))
    assert list(store._repeats_held) == [store.uri(other_scope, "source_files_v1")]
    again = store.merge(SCOPE, "source_files_v1", _sources("a"))
    assert (again.inserted, again.updated) == (0, 0)
    assert list(store._repeats_held) == [store.uri(SCOPE, "source_files_v1")]


def test_the_session_holds_at_most_the_cache_sizes_given(tmp_path: Path) -> None:
    """Every version's manifest and every data file's footer go into the store's session; replaced
    ones leave only by the bound (ProjectionSettings.lance_*_cache_mib), which must hold."""
    bounded = LanceStore(root=tmp_path / "a", index_cache_bytes=0, metadata_cache_bytes=64 << 10)
    unbounded = LanceStore(root=tmp_path / "b")
    for store in (bounded, unbounded):
        for i in range(60):
            store.merge(SCOPE, "cid_refs_v1", _refs(i))
            assert store.open(SCOPE, "cid_refs_v1") is not None
    held = unbounded.session.size_bytes()
    assert held > 256 << 10  # sixty versions' metadata: the bound below is binding
    assert bounded.session.size_bytes() <= 64 << 10
