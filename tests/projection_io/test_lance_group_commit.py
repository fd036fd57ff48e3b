"""LanceCommitter: concurrent merges of one dataset share commits, every caller's rows land once,
a failed commit is raised to every caller whose rows it held (a lost commit race only to those
whose own merge loses again), commits keep their cadence, and a dataset's fragments stay bounded
(local Lance, real threads)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from lance_rows import leaf_rows

from activities import lance_committer
from activities.lance_committer import LanceCommitter
from api.dataplane.lance_store import DATASETS, LanceStore, MergeResult, dataset_schema
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")


def _refs(caller: int, n: int = 20) -> pa.Table:
    # Each caller: its own rows plus five rows every caller shares (same key, same content).
    cids = [f"{caller:02d}{i:062d}" for i in range(n)] + [f"ff{i:062d}" for i in range(5)]
    return pa.table(
        {"cid": cids, "root_id": ["r"] * len(cids), "process_euid": ["e"] * len(cids)},
        schema=dataset_schema("cid_refs_v1"),
    )


class SlowStore(LanceStore):
    """Counts commits and holds each one a moment, so concurrent callers queue behind it."""

    def __init__(self, root: Path, fail_when: str | None = None, failure: Exception | None = None) -> None:
        super().__init__(root=root)
        self.commits: list[int] = []
        self.fail_when = fail_when
        self.failure = failure or RuntimeError("injected commit failure")
        self.delay = 0.3

    def merge(self, scope: Scope, dataset: str, table: pa.Table) -> MergeResult:
        self.commits.append(table.num_rows)
        time.sleep(self.delay)
        if self.fail_when is not None and self.fail_when in table["cid"].to_pylist():
            raise self.failure
        return super().merge(scope, dataset, table)


def _run(coalescer: LanceCommitter, tables: list[pa.Table]) -> list[Any]:
    out: list[Any] = [None] * len(tables)
    start = threading.Barrier(len(tables))

    def one(i: int) -> None:
        start.wait()
        try:
            out[i] = coalescer.merge(SCOPE, "cid_refs_v1", tables[i])
        except (RuntimeError, OSError) as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(tables))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_concurrent_merges_share_commits_and_keep_one_row_per_key(tmp_path: Path) -> None:
    store = SlowStore(tmp_path)
    got = _run(LanceCommitter(store, interval_s=0.0), [_refs(i) for i in range(8)])
    assert all(isinstance(r, MergeResult) for r in got)
    # The callers share commits: the dataset's leader takes whatever is queued when it commits
    # (all 8 at once when they all arrive before its first commit starts).
    assert 1 <= len(store.commits) < 8
    table = store.read(SCOPE, "cid_refs_v1")
    keys = table["cid"].to_pylist()
    assert len(keys) == len(set(keys)) == 8 * 20 + 5
    # Sequential use afterwards still works (leadership was released).
    assert LanceCommitter(store, interval_s=0.0).merge(SCOPE, "cid_refs_v1", _refs(9)).inserted == 20


def test_a_failed_group_commit_is_raised_to_every_caller_in_it(tmp_path: Path) -> None:
    poison = _refs(3)["cid"][0].as_py()
    store = SlowStore(tmp_path, fail_when=poison)
    coalescer = LanceCommitter(store, interval_s=0.0)
    got = _run(coalescer, [_refs(i) for i in range(6)])
    failed = [i for i, r in enumerate(got) if isinstance(r, RuntimeError)]
    assert 3 in failed
    landed = set(store.read(SCOPE, "cid_refs_v1")["cid"].to_pylist())
    for i, r in enumerate(got):
        mine = set(_refs(i)["cid"].to_pylist())
        # A caller told "committed" has its rows; a caller told "failed" shared the poisoned group.
        assert (mine <= landed) == isinstance(r, MergeResult)
    # The retry (the activity's redelivery) goes through the same coalescer and lands.
    store.fail_when = None
    assert coalescer.merge(SCOPE, "cid_refs_v1", _refs(3)).inserted >= 20
    assert set(_refs(3)["cid"].to_pylist()) <= set(store.read(SCOPE, "cid_refs_v1")["cid"].to_pylist())


def test_a_group_merge_that_lost_every_commit_race_fails_only_the_callers_whose_own_merge_loses(
    tmp_path: Path,
) -> None:
    poison = _refs(3)["cid"][0].as_py()
    # What LanceStore.merge raises once Lance's retries and its own are spent.
    lost = OSError("Commit conflict for version 9: Failed to commit the transaction after 20 retries")
    store = SlowStore(tmp_path, fail_when=poison, failure=lost)
    coalescer = LanceCommitter(store, interval_s=0.0)
    got = _run(coalescer, [_refs(i) for i in range(6)])
    # Merged apart after the group lost: only caller 3's own merge loses again.
    assert [i for i, r in enumerate(got) if not isinstance(r, MergeResult)] == [3]
    assert got[3] is lost
    assert coalescer.stats.groups_split >= 1
    landed = store.read(SCOPE, "cid_refs_v1")["cid"].to_pylist()
    assert len(landed) == len(set(landed))
    for i in (0, 1, 2, 4, 5):
        assert set(_refs(i)["cid"].to_pylist()) <= set(landed)
    assert poison not in landed


def test_commits_keep_their_cadence_and_carry_everything_queued(tmp_path: Path) -> None:
    store = SlowStore(tmp_path)
    store.delay = 0.0
    committer = LanceCommitter(store, interval_s=0.5)
    committer.merge(SCOPE, "cid_refs_v1", _refs(0))  # the first commit: nothing to wait for
    t0 = time.monotonic()
    got = _run(committer, [_refs(i) for i in range(1, 9)])
    assert all(isinstance(r, MergeResult) for r in got)
    # All eight callers arrived within the interval: one commit, after the interval had passed.
    assert store.commits[1:] == [8 * 25] and time.monotonic() - t0 >= 0.45
    keys = store.read(SCOPE, "cid_refs_v1")["cid"].to_pylist()
    assert len(keys) == len(set(keys)) == 9 * 20 + 5


def test_fragments_stay_bounded_while_rows_arrive(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    committer = LanceCommitter(store, interval_s=0.0, max_fragments=4, retain_s=0.0, cleanup_interval_s=0.0)
    for i in range(12):
        committer.merge(SCOPE, "cid_refs_v1", _refs(i))
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    assert len(ds.get_fragments()) <= 5 and committer.stats.compactions >= 2
    assert len(ds.versions()) < 12  # old versions are cleaned up at the same cadence
    keys = ds.to_table(columns=["cid"])["cid"].to_pylist()
    assert len(keys) == len(set(keys)) == 12 * 20 + 5


def test_a_compaction_lost_to_another_workers_leaves_the_next_ones_to_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Two workers' committers on one dataset cross max_fragments on the same commits; the one whose
    # compaction loses to the other's stops compacting the dataset while that one goes on.
    ours_store, theirs_store = LanceStore(root=tmp_path), LanceStore(root=tmp_path)
    ours = LanceCommitter(ours_store, interval_s=0.0, max_fragments=4, retain_s=3600.0)
    theirs = LanceCommitter(theirs_store, interval_s=0.0, max_fragments=4, retain_s=3600.0)
    race = {"once": True}
    real_check = lance_committer.held_by_another

    def theirs_compacts_meanwhile(ds: Any, owner: str | None = None) -> bool:
        # Our upkeep has opened its version; the other worker's compaction commits before ours.
        if race["once"]:
            race["once"] = False
            other = theirs_store.open(SCOPE, "cid_refs_v1")
            assert other is not None
            other.optimize.compact_files()
        return real_check(ds, owner)

    monkeypatch.setattr(lance_committer, "held_by_another", theirs_compacts_meanwhile)
    for i in range(5):
        ours.merge(SCOPE, "cid_refs_v1", _refs(i))
    ours.close()  # waits for the upkeep after its last commit; it goes on committing after
    assert ours.stats.compactions_lost == 1 and ours.stats.compactions == 0
    # The other worker compacts at every max_fragments commits; ours stays out of its way.
    for i in range(5, 29):
        (ours if i % 2 else theirs).merge(SCOPE, "cid_refs_v1", _refs(i))
    theirs.close()
    ours.close()
    assert theirs.stats.compactions >= 2
    assert ours.stats.compactions == 0 and ours.stats.compactions_lost == 1
    # Once the other worker stops, ours compacts again after another max_fragments commits.
    for i in range(29, 45):
        ours.merge(SCOPE, "cid_refs_v1", _refs(i))
    ours.close()
    assert ours.stats.compactions >= 1
    ds = ours_store.open(SCOPE, "cid_refs_v1")
    assert ds is not None and len(ds.get_fragments()) <= 9
    keys = ds.to_table(columns=["cid"])["cid"].to_pylist()
    assert len(keys) == len(set(keys)) == 45 * 20 + 5


def test_old_versions_are_removed_at_most_once_per_cleanup_interval(tmp_path: Path) -> None:
    # A removal reads every version kept: at each compaction it cost the versions held.
    store = LanceStore(root=tmp_path)
    committer = LanceCommitter(store, interval_s=0.0, max_fragments=4, retain_s=0.0, cleanup_interval_s=3600)
    # One commit per merge (the rows every caller shares are held already: no merge, no commit).
    for i in range(20):
        committer.merge(SCOPE, "cid_refs_v1", _refs(i))
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    assert committer.stats.compactions >= 2 and committer.stats.cleanups == 1
    kept = len(ds.versions())
    assert kept > 12  # every commit after the first removal is still there
    committer.cleanup_interval_s = 0.0  # due again: removed at the next compaction
    for i in range(20, 32):
        committer.merge(SCOPE, "cid_refs_v1", _refs(i))
        if committer.stats.cleanups > 1:
            break
    assert committer.stats.cleanups == 2
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None and len(ds.versions()) < kept
    keys = ds.to_table(columns=["cid"])["cid"].to_pylist()
    assert len(keys) == len(set(keys))


def test_a_new_dataset_gets_its_lookup_indexes_with_its_first_compaction(tmp_path: Path) -> None:
    # Lookups by key go through an index from the first compaction on, not after the hourly
    # IndexAndCompact; later rows are folded into it at the same cadence.
    store = LanceStore(root=tmp_path)
    committer = LanceCommitter(store, interval_s=0.0, max_fragments=4, retain_s=0.0, cleanup_interval_s=0.0)
    for i in range(6):
        committer.merge(SCOPE, "cid_refs_v1", _refs(i))
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None and committer.stats.compactions >= 1
    assert {tuple(i["fields"]) for i in ds.list_indices()} == {("cid",), ("root_id",)}
    for i in range(6, 12):
        committer.merge(SCOPE, "cid_refs_v1", _refs(i))
    ds = store.open(SCOPE, "cid_refs_v1")
    assert ds is not None
    stats = ds.stats.index_stats("cid_idx")
    assert stats["num_unindexed_rows"] < ds.count_rows() // 2  # folded in, not left to scan


def _leaves_after_a_tick(
    tmp_path: Path, query_fold_rows: int, ngram_fold_rows: int = 1_000_000
) -> list[tuple[str, str, int]]:
    """(column, index type, unindexed rows) of value_leaves_v1's indexes after 40 rows through the
    committer, a tick, then 40 rows more."""
    store = LanceStore(root=tmp_path)

    def new_committer() -> LanceCommitter:
        return LanceCommitter(
            store,
            interval_s=0.0,
            max_fragments=2,
            retain_s=0.0,
            cleanup_interval_s=0.0,
            query_fold_rows=query_fold_rows,
            ngram_fold_rows=ngram_fold_rows,
        )

    committer = new_committer()
    for i in range(4):
        committer.merge(SCOPE, "value_leaves_v1", leaf_rows(i * 10, 10))
    committer.close()
    leaves = store.open(SCOPE, "value_leaves_v1")
    assert leaves is not None and committer.stats.compactions >= 1
    # Before a tick, only the write path's index: the merges' probe by execution.
    assert [tuple(i["fields"]) for i in leaves.list_indices()] == [("execution_id",)]
    store.index_and_compact(SCOPE, "value_leaves_v1")  # the tick builds the query indexes
    committer = new_committer()
    for i in range(4, 8):
        committer.merge(SCOPE, "value_leaves_v1", leaf_rows(i * 10, 10))
    committer.close()  # its upkeep after the last commit done
    leaves = store.open(SCOPE, "value_leaves_v1")
    assert leaves is not None
    return [
        (i["fields"][0], str(i["type"]).lower(), leaves.stats.index_stats(i["name"])["num_unindexed_rows"])
        for i in leaves.list_indices()
    ]


def test_the_committer_folds_new_rows_into_the_query_indexes_the_ngram_last(tmp_path: Path) -> None:
    # Query indexes are created by the tick (a first build over a large dataset takes minutes),
    # then folded at the commit cadence; the n-gram's, which costs seconds per fold, only once
    # ngram_fold_rows rows wait.
    indexes = _leaves_after_a_tick(tmp_path, query_fold_rows=1)
    assert {kind for _, kind, _ in indexes} == {"btree", "bitmap", "zonemap", "ngram"}
    assert DATASETS["value_leaves_v1"].lookup == ("execution_id",)
    assert "string" not in DATASETS["value_leaves_v1"].query_indexed  # the n-gram's column
    for column, kind, rows in indexes:
        # The n-gram index lacks every row since the tick; the others at most the newest commit's.
        assert rows == 40 if kind == "ngram" else rows <= 10, (column, kind, rows)
    for column, kind, rows in _leaves_after_a_tick(tmp_path / "again", query_fold_rows=1, ngram_fold_rows=1):
        assert rows <= 10, (column, kind, rows)


def test_query_indexes_wait_for_query_fold_rows_new_rows(tmp_path: Path) -> None:
    # A fold's fixed cost is paid once per query_fold_rows rows; the write path's index is folded
    # at every upkeep whatever the count.
    for column, kind, rows in _leaves_after_a_tick(tmp_path, query_fold_rows=1000):
        if column == "execution_id":
            assert rows <= 10, (column, kind, rows)
        else:  # every row since the tick (a zone map is not remapped by compaction: more)
            assert rows >= 40, (column, kind, rows)


def test_a_query_index_fold_does_not_hold_the_datasets_commits(tmp_path: Path, monkeypatch: Any) -> None:
    # An n-gram fold takes seconds: on the leader thread every caller of the dataset (and the
    # ledger commits behind them) would wait for it. The fold runs on its own thread; rows that
    # arrive meanwhile are folded by it before it ends.
    store = LanceStore(root=tmp_path)
    first = LanceCommitter(store, interval_s=0.0, max_fragments=2, retain_s=0.0, cleanup_interval_s=0.0)
    for i in range(4):
        first.merge(SCOPE, "value_leaves_v1", leaf_rows(i * 10, 10))
    first.close()
    store.index_and_compact(SCOPE, "value_leaves_v1")  # the tick builds the query indexes
    started, release = threading.Event(), threading.Event()
    real = lance_committer.fold_new_rows

    def held(ds: Any, dataset: str, min_rows: Any = None, *, due: Any = None) -> int:
        if due and any(fold.column == "string" for fold in due):  # a query-index fold
            started.set()
            assert release.wait(60)
        return real(ds, dataset, min_rows, due=due)

    monkeypatch.setattr(lance_committer, "fold_new_rows", held)
    committer = LanceCommitter(
        store,
        interval_s=0.0,
        max_fragments=2,
        retain_s=0.0,
        cleanup_interval_s=0.0,
        query_fold_rows=1,
        ngram_fold_rows=1,
    )
    for i in range(4, 7):
        committer.merge(SCOPE, "value_leaves_v1", leaf_rows(i * 10, 10))
    assert started.wait(30)
    # The fold is held: commits still go through, each returning once its rows are committed.
    for i in range(7, 10):
        committer.merge(SCOPE, "value_leaves_v1", leaf_rows(i * 10, 10))
    ds = store.open(SCOPE, "value_leaves_v1")
    assert ds is not None and ds.count_rows() == 100
    release.set()
    committer.close()  # waits for the fold thread, which folds what came meanwhile
    assert committer.stats.folds >= 2
    leaves = store.open(SCOPE, "value_leaves_v1")
    assert leaves is not None
    for index in leaves.list_indices():
        unindexed = leaves.stats.index_stats(index["name"])["num_unindexed_rows"]
        assert unindexed <= 10, (index["fields"], unindexed)  # at most the newest commit's rows
