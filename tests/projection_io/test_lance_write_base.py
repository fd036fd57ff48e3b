"""A write starts from the handle its store's own last commit left, not from a search for the newest
version (local Lance; api/dataplane/lance_store.py, ``LanceStore._write_base``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lance_rows import leaf_rows

from api.dataplane import lance_store as ls
from api.dataplane.lance_store import LanceStore
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")
DATASET = "value_leaves_v1"


def _count_opens(monkeypatch: pytest.MonkeyPatch, store: LanceStore) -> list[int | None]:
    """The versions ``store`` opens (None: the newest, found by listing), from now on."""
    opened: list[int | None] = []
    real = LanceStore._open_version

    def spy(self: LanceStore, uri: str, version: int | None) -> Any:
        if self is store:
            opened.append(version)
        return real(self, uri, version)

    monkeypatch.setattr(LanceStore, "_open_version", spy)
    return opened


def _row_ids(store: LanceStore) -> list[str]:
    return sorted(store.read(SCOPE, DATASET, columns=["row_id"])["row_id"].to_pylist())


def test_a_write_starts_from_the_stores_own_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LanceStore(root=tmp_path)
    first = store.merge(SCOPE, DATASET, leaf_rows(0, 10))
    opened = _count_opens(monkeypatch, store)
    second = store.merge(SCOPE, DATASET, leaf_rows(10, 10))
    # No version opened at all: the probe and the append ran on the first commit's handle.
    assert opened == []
    assert second.version == first.version + 1 and second.inserted == 10
    assert _row_ids(store) == sorted(f"leaf{i}" for i in range(20))


def test_without_a_recent_own_commit_a_write_looks_for_the_newest_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LanceStore(root=tmp_path, write_base_ttl_s=0.2)
    store.merge(SCOPE, DATASET, leaf_rows(0, 10))
    opened = _count_opens(monkeypatch, store)
    time.sleep(0.3)
    store.merge(SCOPE, DATASET, leaf_rows(10, 10))
    assert opened, "a base older than the TTL was written from"
    # Switched off: every write looks.
    never = LanceStore(root=tmp_path, write_base_ttl_s=0.0)
    opened = _count_opens(monkeypatch, never)
    for start in (20, 25):
        before = len(opened)
        never.merge(SCOPE, DATASET, leaf_rows(start, 5))
        assert len(opened) > before
    assert _row_ids(store) == sorted(f"leaf{i}" for i in range(30))


def test_a_base_another_writer_committed_past_loses_and_doubles_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes: ``ours`` holds its last commit's handle while ``theirs`` commits past it.

    Its next writes start from the old version: an append of new keys rebases over the other
    commits; an append of keys ``theirs`` appended meanwhile (a redelivered execution) is found when
    it probes again after the rebase, and its copies are removed; rows that exist are merged."""
    ours, theirs = LanceStore(root=tmp_path), LanceStore(root=tmp_path)
    ours.merge(SCOPE, DATASET, leaf_rows(0, 10))
    theirs.merge(SCOPE, DATASET, leaf_rows(10, 10))  # executions x0..x4 get rows 10..19
    opened = _count_opens(monkeypatch, ours)
    behind = ours.merge(SCOPE, DATASET, leaf_rows(20, 10))  # new keys, from the old base
    assert opened == [], "the write looked for the newest version: the stale base is not tested"
    assert behind.inserted == 10 and behind.version == 4  # rebased over theirs (version 3)
    theirs.merge(SCOPE, DATASET, leaf_rows(30, 5))
    # The same rows theirs just appended, written again from a base that does not hold them yet.
    ours.merge(SCOPE, DATASET, leaf_rows(30, 5))
    assert _row_ids(ours) == sorted(f"leaf{i}" for i in range(35))
    # And an update of rows theirs wrote, from a base that is behind again.
    theirs.merge(SCOPE, DATASET, leaf_rows(35, 5))
    updated = ours.merge(SCOPE, DATASET, leaf_rows(10, 5, word="again"))
    assert updated.updated == 5
    rows = ours.read(SCOPE, DATASET, columns=["row_id", "string"]).to_pylist()
    assert len(rows) == 40 == len({r["row_id"] for r in rows})
    strings = {r["row_id"]: r["string"] for r in rows}
    assert strings["leaf10"] == "row 10 says again" and strings["leaf15"] == "row 15 says text"


def test_handles_of_datasets_no_longer_written_are_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ls, "WRITE_BASES_HELD", 2)
    store = LanceStore(root=tmp_path, write_base_ttl_s=0.3)
    scopes = [Scope("ten_a", "prj_a", f"env_{i}") for i in range(3)]
    for scope in scopes[:2]:
        store.merge(scope, DATASET, leaf_rows(0, 5))
    time.sleep(0.4)
    store.merge(scopes[2], DATASET, leaf_rows(0, 5))
    # The two expired handles were dropped when a third came: only the fresh one is held.
    assert list(store._write_bases) == [store.uri(scopes[2], DATASET)]
