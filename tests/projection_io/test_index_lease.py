"""The index lease: while one process folds a dataset's query indexes, the other processes'
committers leave its compaction for later, so the fold is not preempted (local Lance; each
"process" is a LanceStore of its own on one root, as two workers share one bucket)."""

from __future__ import annotations

import logging
import re
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import lance
import pytest
from lance_rows import leaf_rows

from activities import lance_committer
from activities.lance_committer import LanceCommitter
from api.dataplane import index_lease
from api.dataplane.index_lease import IndexLease, held_by_another, read_lease
from api.dataplane.lance_store import LanceStore, due_folds, fold_new_rows
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")
LEAVES = "value_leaves_v1"


def _committer(store: LanceStore, **kwargs: Any) -> LanceCommitter:
    # Versions kept: a fold reading an older version needs its data files.
    return LanceCommitter(
        store, interval_s=0.0, max_fragments=2, retain_s=3600.0, cleanup_interval_s=0.0, **kwargs
    )


def _indexed(root: Path) -> LanceStore:
    """value_leaves_v1 with the tick's indexes over 40 rows, then 40 rows that no index covers."""
    store = LanceStore(root=root)
    committer = _committer(store)
    for i in range(4):
        committer.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    committer.close()
    store.index_and_compact(SCOPE, LEAVES)
    for i in range(4, 8):
        store.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    return store


def _open(store: LanceStore) -> lance.LanceDataset:
    return store.newest(SCOPE, LEAVES)


def _unindexed(ds: lance.LanceDataset) -> dict[str, int]:
    """Rows no entry of each column's index covers."""
    return {i["fields"][0]: ds.stats.index_stats(i["name"])["num_unindexed_rows"] for i in ds.list_indices()}


def _ngram_fold(ds: lance.LanceDataset) -> None:
    due = [fold for fold in due_folds(ds) if fold.column == "string"]
    assert due  # the 40 rows after the tick wait for it
    fold_new_rows(ds, LEAVES, due=due)


def _compacting_commits(store: LanceStore, start: int) -> LanceCommitter:
    """Another worker's committer: enough commits that its upkeep is due (max_fragments 2)."""
    committer = _committer(store)
    for i in range(start, start + 3):
        committer.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    committer.close()
    return committer


def test_a_fold_under_the_lease_commits_although_another_committer_came_meanwhile(tmp_path: Path) -> None:
    # Without the lease the other worker's compaction preempts the fold (pylance 14 refuses any
    # CreateIndex after a Rewrite), which is what the lease is for: both halves run here.
    store = _indexed(tmp_path / "bare")
    folding = _open(store)  # the fold reads this version, then takes a while
    other = _compacting_commits(LanceStore(root=tmp_path / "bare"), 8)
    assert other.stats.compactions >= 1
    with pytest.raises(OSError, match="preempted"):
        _ngram_fold(folding)

    store = _indexed(tmp_path / "leased")
    assert index_lease.take(_open(store), "fold-1", 60)
    folding = _open(store)
    other = _compacting_commits(LanceStore(root=tmp_path / "leased"), 8)
    assert other.stats.compactions == 0 and other.stats.compactions_deferred >= 1
    _ngram_fold(folding)  # commits over the other committer's appends
    index_lease.release(partial(_open, store), "fold-1")
    ds = _open(store)
    assert read_lease(ds) is None and ds.count_rows() == 110
    unindexed = _unindexed(ds)
    assert unindexed["string"] == 30  # the fold's 40 are in the n-gram; the 30 after it are not
    # The write path's lookup index still got the new rows while the compaction waited: it is
    # folded every max_fragments (2) commits of 10 rows.
    assert unindexed["execution_id"] <= 20


def test_a_committer_compacts_again_once_the_lease_is_released_or_lapses(tmp_path: Path) -> None:
    store = _indexed(tmp_path)
    assert index_lease.take(_open(store), "fold-1", 60)
    first = _compacting_commits(LanceStore(root=tmp_path), 8)
    assert first.stats.compactions == 0 and len(_open(store).get_fragments()) > 2
    index_lease.release(partial(_open, store), "fold-1")
    assert _compacting_commits(LanceStore(root=tmp_path), 11).stats.compactions >= 1

    assert index_lease.take(_open(store), "died", 0.2)  # a folder that never released it
    time.sleep(0.3)
    assert not held_by_another(_open(store))
    assert _compacting_commits(LanceStore(root=tmp_path), 14).stats.compactions >= 1
    assert _open(store).count_rows() == 170


def test_a_held_lease_is_renewed_while_its_fold_runs_and_released_after(tmp_path: Path) -> None:
    # A fold longer than the lease keeps it: a worker killed mid-fold then holds the others'
    # compactions only until its last renewal lapses, not for one long lease (the soak of
    # 2026-12-06 lost its tick and value_leaves_v1's compactions to a 15-minute lease).
    store = _indexed(tmp_path)
    newest = partial(_open, store)
    with index_lease.index_lease(newest, 0.8) as held:
        assert held
        folding = _open(store)  # the fold reads this version, then takes longer than the lease
        time.sleep(2.0)
        renewed = _open(store)
        assert held_by_another(renewed)  # still live, 2.5 leases after it was taken
        assert renewed.version > folding.version  # by renewals, each an UpdateConfig commit
        _ngram_fold(folding)  # the renewals committed meanwhile do not conflict with the fold
        other = _compacting_commits(LanceStore(root=tmp_path), 8)
        assert other.stats.compactions == 0 and other.stats.compactions_deferred >= 1
    ds = _open(store)
    assert read_lease(ds) is None
    assert _unindexed(ds)["string"] == 30  # the fold's 40 are in the n-gram
    assert not [t for t in threading.enumerate() if t.name == "index-lease-renewer"]

    # The block failing still stops the renewals and releases the lease.
    with pytest.raises(RuntimeError), index_lease.index_lease(newest, 0.8) as held:
        assert held
        raise RuntimeError("the fold failed")
    assert read_lease(_open(store)) is None
    assert not [t for t in threading.enumerate() if t.name == "index-lease-renewer"]


def test_a_renewal_keeps_only_its_own_lease(tmp_path: Path) -> None:
    store = _indexed(tmp_path)
    newest = partial(_open, store)
    assert index_lease.take(_open(store), "fold-1", 0.2)
    time.sleep(0.3)
    assert not held_by_another(_open(store))  # lapsed: the holder stopped renewing
    assert index_lease.renew(newest, "fold-1", 60)  # its own holder may still renew it
    assert held_by_another(_open(store))
    index_lease.release(newest, "fold-1")
    assert index_lease.take(_open(store), "fold-2", 60)
    assert not index_lease.renew(newest, "fold-1", 60)  # another's now: left alone
    lease = read_lease(_open(store))
    assert lease is not None and lease.owner == "fold-2"


def test_one_lease_at_a_time(tmp_path: Path) -> None:
    store = _indexed(tmp_path)
    a, b = _open(store), _open(store)  # two folders that read the same version
    assert index_lease.take(a, "fold-a", 60)
    # b's UpdateConfig conflicts with a's: b sees no lease in its version, and still loses.
    assert not index_lease.take(b, "fold-b", 60)
    assert not index_lease.take(_open(store), "fold-b", 60)  # a's lease is live
    index_lease.release(partial(_open, store), "fold-b")  # not b's to release
    lease = read_lease(_open(store))
    assert lease is not None and lease.owner == "fold-a"
    index_lease.release(partial(_open, store), "fold-a")
    assert index_lease.take(_open(store), "fold-b", 60)


def test_a_release_that_loses_a_race_is_tried_again(tmp_path: Path) -> None:
    # A lease left behind would hold every other process's compaction until it lapses.
    store = _indexed(tmp_path)
    assert index_lease.take(_open(store), "fold-1", 60)
    stale = _open(store)
    # The same key changed since (the owner renewed it): Lance refuses the stale handle's removal.
    assert index_lease.take(_open(store), "fold-1", 120)
    handles = iter([stale])

    def newest() -> lance.LanceDataset:
        return next(handles, None) or _open(store)

    index_lease.release(newest, "fold-1")
    assert read_lease(_open(store)) is None


def test_the_tick_folds_under_the_lease_and_does_not_compact_under_anothers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="baml_studio")
    store = _indexed(tmp_path)
    seen: list[IndexLease | None] = []
    real = store.open

    def watching(scope: Scope, dataset: str, version: int | None = None) -> Any:
        ds = real(scope, dataset) if version is None else real(scope, dataset, version)
        seen.append(read_lease(ds) if ds is not None else None)
        return ds

    store.open = watching  # type: ignore[method-assign]
    got = store.index_and_compact(SCOPE, LEAVES)
    assert got["compacted_fragments"] >= 4  # the four merges after the first tick, at least
    assert any(lease is not None and lease.live() for lease in seen)  # held while it folded
    assert read_lease(_open(store)) is None  # and released
    assert set(_unindexed(_open(store)).values()) == {0}

    for i in range(8, 11):
        store.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    # A worker's fold thread holds the lease: the tick does not compact, waits for the release
    # (beating), then folds under its own lease. Folding beside it, the tick lost its folds to
    # the compactions that resumed once the worker released it.
    assert index_lease.take(_open(store), "a worker's fold thread", 60)
    beats: list[float] = []
    result: dict[str, int] = {}

    def tick() -> None:
        result.update(store.index_and_compact(SCOPE, LEAVES, beat=lambda: beats.append(time.monotonic())))

    seen.clear()
    ticking = threading.Thread(target=tick)
    ticking.start()
    time.sleep(2.5)
    assert ticking.is_alive() and beats  # waiting, and telling Temporal it is alive
    folded_before_release = _unindexed(_open(store))["string"]
    index_lease.release(partial(_open, store), "a worker's fold thread")
    ticking.join(60)
    assert not ticking.is_alive()
    assert folded_before_release == 30  # nothing was folded while it waited
    assert result["compacted_fragments"] == 0  # it would have preempted the worker's fold
    ds = _open(store)
    assert read_lease(ds) is None and set(_unindexed(ds).values()) == {0}
    assert any(lease is not None and lease.owner != "a worker's fold thread" for lease in seen)  # its own
    # The tick says where its time went: here, mostly the wait for the worker's lease.
    waits = [
        float(m.group(1))
        for r in caplog.records
        if (m := re.search(r"waited ([0-9.]+) s for the index lease", r.getMessage()))
    ]
    assert waits and waits[-1] >= 2.0

    # A lease whose holder died is waited for until it lapses, not forever.
    assert index_lease.take(_open(store), "died", 1.0)
    store.merge(SCOPE, LEAVES, leaf_rows(110, 10))
    t0 = time.monotonic()
    store.index_and_compact(SCOPE, LEAVES, lease_s=30)
    assert time.monotonic() - t0 < 15
    assert set(_unindexed(_open(store)).values()) == {0}


def test_the_committers_fold_thread_holds_the_lease_and_leaves_anothers_folds_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _indexed(tmp_path)
    leases: list[IndexLease | None] = []
    real = lance_committer.fold_new_rows

    def watching(ds: Any, dataset: str, min_rows: Any = None, *, due: Any = None) -> int:
        if due and any(fold.column == "string" for fold in due):
            leases.append(read_lease(ds))
        return real(ds, dataset, min_rows, due=due)

    monkeypatch.setattr(lance_committer, "fold_new_rows", watching)
    committer = _compacting_commits(store, 8)  # same store: the process that folds
    assert len(leases) == 0  # no fold: the committer folds the n-gram at ngram_fold_rows
    committer = _committer(store, query_fold_rows=1, ngram_fold_rows=1)
    for i in range(11, 14):
        committer.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    committer.close()
    assert leases and all(lease is not None and lease.live() for lease in leases)
    assert read_lease(_open(store)) is None  # released after the fold

    # While another process holds the lease, this one's fold thread leaves the query indexes.
    assert index_lease.take(_open(store), "another worker", 60)
    before = len(leases)
    committer = _committer(store, query_fold_rows=1, ngram_fold_rows=1)
    for i in range(14, 17):
        committer.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    committer.close()
    assert len(leases) == before and committer.stats.compactions == 0
    ds = _open(store)
    unindexed = _unindexed(ds)
    assert unindexed["string"] >= 30 and unindexed["execution_id"] <= 20


def test_a_committer_keeps_the_versions_while_another_holds_the_lease(tmp_path: Path) -> None:
    # A fold reads one version and may run longer than the committers keep versions (retain_s):
    # under another's lease, a committer removes none (here every version but the newest is old).
    store = _indexed(tmp_path)
    assert index_lease.take(_open(store), "fold-1", 60)
    folding = _open(store)
    held = len(folding.versions())

    def cleaning_committer() -> LanceCommitter:
        return LanceCommitter(
            LanceStore(root=tmp_path), interval_s=0.0, max_fragments=2, retain_s=0.0, cleanup_interval_s=0.0
        )

    other = cleaning_committer()
    for i in range(8, 11):
        other.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    other.close()
    assert other.stats.cleanups == 0 and other.stats.compactions_deferred >= 1
    assert len(_open(store).versions()) >= held + 3  # the fold's version among them
    _ngram_fold(folding)
    index_lease.release(partial(_open, store), "fold-1")

    after = cleaning_committer()
    for i in range(11, 14):
        after.merge(SCOPE, LEAVES, leaf_rows(i * 10, 10))
    after.close()
    assert after.stats.cleanups >= 1 and len(_open(store).versions()) < held
    assert _open(store).count_rows() == 140
