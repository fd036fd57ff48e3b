"""The worker's Lance committer: one commit per dataset about once a second, and datasets kept small.

Small meta objects (one or two executions each, two per second per process) made every meta
object commit a new version of every dataset. Lance pays per commit (opening the newest version
lists ``_versions/``, an upsert scans the key column of every fragment), and each commit adds a
fragment and a version, so the cost grew with the stream (measured on moto: 5 rows per commit,
214 ms at 50 commits, 1.6 s at 400; with compaction and version cleanup every 50 commits, flat at
150-190 ms). The committer fixes both halves:

* **cadence** (:class:`activities.group_commit.GroupCommit` keyed by (scope, dataset)): callers
  enqueue their rows and wait; the dataset's leader thread waits until ``interval_s`` after that
  dataset's previous commit (collecting whatever arrives meanwhile), and commits everything
  queued in one merge (``LanceStore.merge``). Every caller returns only after a commit holding
  its rows, so "Lance before the ledger" still holds per execution, and a failure is raised to
  every caller whose rows the commit held (their activities are retried, and merges on
  deterministic keys make the retry idempotent). A merge that lost every commit race is the
  exception: the callers' rows are merged again one caller at a time, and only those whose own
  merge loses are failed (:meth:`LanceCommitter._commit_apart`);
* **maintenance at the same cadence**: after a commit, the leader compacts the dataset once it has
  more than ``max_fragments`` fragments, creates the write path's lookup indexes
  (``DatasetSpec.lookup``) it still lacks and folds new fragments into them (``optimize_indices``:
  values are found by CID, and merges probe keys, through an index), and, at most once per
  ``cleanup_interval_s``, removes versions older than ``retain_s`` (readers bound to a version keep
  it that long; while a fold holds the index lease, neither compaction nor cleanup runs, as the
  fold reads one version for as long as it takes). Not at every compaction: Lance's cleanup reads
  the manifest of every version it keeps, so its cost is the versions held (on moto, 56 ms of the
  worker's CPU and 260 ms of moto's at 100 versions, 718 and 1,710 ms at 600), and a dataset
  committed once a second holds ``retain_s`` seconds of versions. It runs on the dataset's leader
  thread before its next commit, so this process never commits into a dataset it is compacting;
* **query-index folds beside the commits**: new rows are folded into the query indexes once
  ``query_fold_rows`` wait (``DatasetSpec.query_indexed``; the n-gram's once ``ngram_fold_rows``
  wait) by one fold thread per dataset, not by the leader: a fold takes seconds (an n-gram's at
  least), and on the leader every caller of the dataset, and every ledger commit behind them,
  would wait for it. A fold's index commit and the leader's appends and merges do not conflict
  (Lance rebases one over the other); a compaction would, so the leader's upkeep of the dataset
  waits while its fold runs, and the fold thread folds the lookup indexes too. It folds until no
  commit came since its last look, so rows that arrive during a fold are folded by the same
  thread. Other processes' committers would compact the dataset meanwhile, so a query-index
  fold runs under the dataset's index lease (api/dataplane/index_lease.py), and a leader whose
  upkeep finds another process's lease leaves the compaction for later.

Several worker processes still commit to one dataset independently; Lance retries their
conflicts against the newest version without rewriting fragments. Their compactions cannot be
rebased so: a committer whose compaction lost to another's leaves the next ones to that process
(it looks again only after another ``max_fragments`` commits).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial

import pyarrow as pa

from activities.group_commit import GroupCommit
from api.dataplane.index_lease import DEFAULT_LEASE_S, held_by_another, index_lease
from api.dataplane.lance_store import (
    DATASETS,
    LanceStore,
    MergeResult,
    create_missing_indexes,
    dataset_schema,
    due_folds,
    fold_new_rows,
    is_retryable_conflict,
)
from formats.object_keys import Scope

log = logging.getLogger("baml_studio.lance_committer")

_Answer = MergeResult | BaseException  # a caller's commit, or why it failed (GroupCommit's Flush)

# New rows a query index may lack before the committer folds them in: a fold's fixed cost is paid
# once per this many rows, and a query scans at most about this many unindexed. The BTREE, bitmap
# and zone-map folds are cheap (2.7 us of CPU a row at 15 M calls); 100 k unindexed leaf rows add
# about 30 ms to a query. An n-gram fold costs seconds whatever its size (on moto, 3-5 s for a delta
# of 200 rows), so it waits for 1 M rows: a substring query then scans at most those (about 0.25 s
# at 15 M calls, where 5 M unindexed rows took Q10 from 0.4 to 1.6 s).
QUERY_FOLD_ROWS = 100_000
NGRAM_FOLD_ROWS = 1_000_000


def fold_thresholds(
    dataset: str, query_fold_rows: int = QUERY_FOLD_ROWS, ngram_fold_rows: int = NGRAM_FOLD_ROWS
) -> dict[str, int]:
    """Per indexed column of ``dataset``: the new rows the committer's upkeep waits for before it
    folds them into that column's index. The write path's indexes (``DatasetSpec.lookup``) at
    every upkeep. The query indexes are created by the tick (a first build over a large dataset
    takes minutes) and folded here once enough rows wait, so a query never scans an hour of rows
    that no index covers: at 15 M calls, 5 M new leaf rows took Q11 and Q12 from 0.5 s to 2 s,
    and Q10 from 0.4 s to 1.6 s (docs/query.md)."""
    spec = DATASETS[dataset]
    return {
        **dict.fromkeys(spec.ngram, ngram_fold_rows),
        **dict.fromkeys(spec.query_indexed, query_fold_rows),
        **dict.fromkeys(spec.lookup, 1),
    }


@dataclass
class CommitStats:
    """What the committer did (for benchmarks and the worker's log)."""

    commits: int = 0
    rows: int = 0
    callers: int = 0
    compactions: int = 0  # each with its lookup-index folding
    compactions_deferred: int = 0  # upkeep rounds that left the compaction to another process's index lease
    compactions_lost: int = 0  # compactions that lost to another commit (another worker's compaction)
    cleanups: int = 0  # removals of old versions (at most one per dataset per cleanup interval)
    groups_split: int = 0  # group merges that lost every commit race, then merged caller by caller
    maintenance_s: float = 0.0
    folds: int = 0  # rounds of the fold threads that folded an index (query or lookup)
    fold_s: float = 0.0
    by_dataset: dict[str, int] = field(default_factory=dict)


class LanceCommitter:
    def __init__(
        self,
        store: LanceStore,
        *,
        interval_s: float = 1.0,
        max_fragments: int = 16,
        retain_s: float = 600.0,
        cleanup_interval_s: float = 300.0,
        query_fold_rows: int = QUERY_FOLD_ROWS,
        ngram_fold_rows: int = NGRAM_FOLD_ROWS,
        lease_s: float = DEFAULT_LEASE_S,
        beat: Callable[[], None] | None = None,
    ) -> None:
        """``beat`` is called every few seconds while :meth:`merge` waits (an activity's heartbeat)."""
        self.store = store
        self.cleanup_interval_s = cleanup_interval_s
        self.query_fold_rows = query_fold_rows
        self.ngram_fold_rows = ngram_fold_rows
        self.lease_s = lease_s
        self.max_fragments = max_fragments
        self.retain_s = retain_s
        self.stats = CommitStats()
        self._lock = threading.Lock()
        # Fragments of each dataset's newest commit by this process: whether maintenance is due
        # (above max_fragments, or above the count of an upkeep deferred by an index lease or
        # whose compaction lost to another worker's).
        self._fragments: dict[tuple[Scope, str], int] = {}
        self._upkeep_above: dict[tuple[Scope, str], int] = {}
        # When each dataset's old versions were last removed by this process (monotonic clock).
        self._cleaned: dict[tuple[Scope, str], float] = {}
        # Each dataset's fold thread while it runs, and whether a commit since its last look may
        # have made a fold due (both, and the stats, under _lock).
        self._folders: dict[tuple[Scope, str], threading.Thread] = {}
        self._fold_due: set[tuple[Scope, str]] = set()
        self._group: GroupCommit[tuple[Scope, str], pa.Table, MergeResult] = GroupCommit(
            self._commit, interval_s=interval_s, after=self._maintain, name="lance-commit", beat=beat
        )

    def merge(self, scope: Scope, dataset: str, table: pa.Table) -> MergeResult:
        """Merge ``table`` into the dataset; returns once a commit holding these rows is done."""
        return self._group.submit((scope, dataset), table)

    def enqueue(self, scope: Scope, dataset: str, table: pa.Table) -> Future[MergeResult]:
        """Queue ``table`` for the dataset's next commit without waiting: a caller writing several
        datasets queues them all, then waits, and their commits run side by side."""
        return self._group.enqueue((scope, dataset), table)

    def result(self, future: Future[MergeResult]) -> MergeResult:
        """The commit of a queued table (:meth:`enqueue`), waited for as :meth:`merge` waits."""
        return self._group.result(future)

    def close(self) -> None:
        """Wait for the commits (and their upkeep and index folds) in progress."""
        self._group.close()
        with self._lock:
            folders = list(self._folders.values())
        for folder in folders:
            folder.join()

    def _commit(self, key: tuple[Scope, str], tables: list[pa.Table]) -> list[_Answer]:
        scope, dataset = key
        schema = dataset_schema(dataset)
        parts = [t.select(schema.names).cast(schema) for t in tables]
        try:
            result = self.store.merge(scope, dataset, pa.concat_tables(parts))
        except OSError as exc:
            if len(parts) == 1 or not is_retryable_conflict(exc):
                raise
            return self._commit_apart(key, parts)
        self._committed(key, result, parts)
        return [replace(result, shared_by=len(tables))] * len(tables)

    def _commit_apart(self, key: tuple[Scope, str], parts: list[pa.Table]) -> list[_Answer]:
        """Each caller's rows merged alone, after the group's merge lost every commit race.

        Such a merge is of rows the dataset already holds and that change (a re-projection with
        other values, an abandoned execution that ended after all): in a dataset with a key probe
        the group's new keys were appended before it. One caller's rows would fail every caller of
        the group (in a soak of 2026-12-07, 167 activities at once), and each would project its
        meta object again. Merged apart, the callers whose rows are all held already answer after a
        probe and no commit, and only those whose own merge loses again are failed (their
        activities retried)."""
        scope, dataset = key
        with self._lock:
            self.stats.groups_split += 1
        log.info(
            "lance %s group merge lost every commit race: merging its %d callers apart", dataset, len(parts)
        )
        answers: list[_Answer] = []
        for part in parts:
            try:
                result = self.store.merge(scope, dataset, part)
            except Exception as exc:  # this caller's answer; the others go on
                answers.append(exc)
                continue
            self._committed(key, result, [part])
            answers.append(result)
        return answers

    def _committed(self, key: tuple[Scope, str], result: MergeResult, parts: list[pa.Table]) -> None:
        self._fragments[key] = result.fragments
        dataset = key[1]
        with self._lock:
            self.stats.commits += 1
            self.stats.callers += len(parts)
            self.stats.rows += sum(t.num_rows for t in parts)
            self.stats.by_dataset[dataset] = self.stats.by_dataset.get(dataset, 0) + 1

    def _maintain(self, key: tuple[Scope, str]) -> None:
        """Compact, fold new fragments into the lookup indexes and drop old versions, when it is
        due; then have the dataset's fold thread look at its query indexes."""
        if self._fragments.get(key, 0) <= self._upkeep_above.get(key, self.max_fragments):
            return  # known from the commit itself: no dataset open after every commit
        if self._folding(key):
            # A compaction would make the fold's commit conflict: the upkeep waits for the first
            # commit after the fold, and the fold looks again before it ends.
            self._fold_soon(key)
            return
        scope, dataset = key
        try:
            t0 = time.perf_counter()
            ds = self.store.open(scope, dataset)
            if ds is None:
                return
            deferred = held_by_another(ds)
            if deferred:
                # Another process folds a query index under its lease, and a compaction would
                # preempt that fold (api/dataplane/index_lease.py). The lookup indexes still get
                # the new rows (their folds do not conflict with it); the next upkeep comes after
                # another max_fragments commits, not after every one.
                self._upkeep_later(key)
                log.info("lance %s compaction left for later: another process holds the index lease", dataset)
            else:
                try:
                    ds.optimize.compact_files()
                except OSError:
                    # Usually another worker's compaction of the same fragments committed first
                    # ("Rewrite ... preempted by concurrent transaction Rewrite"): every committer
                    # crosses max_fragments on the same commits of a shared dataset, and in the
                    # hour's soak of 2026-12-05 267 of 995 compactions lost so, each rewriting its
                    # fragments for nothing. That worker keeps compacting the dataset; this one
                    # looks again only after another max_fragments commits, which it reaches only
                    # if the other stops.
                    self._upkeep_later(key)
                    with self._lock:
                        self.stats.compactions_lost += 1
                    raise
                self._upkeep_above.pop(key, None)
                ds = self.store.newest(scope, dataset)
            # A new dataset gets its lookup indexes here, with its first compaction, not an hour
            # later from IndexAndCompact: until then every values_v1 lookup by CID would scan all
            # fragments (measured in bench/soak.py on a fresh stack).
            lookup = DATASETS[dataset].lookup
            if lookup and create_missing_indexes(ds, dataset, only=lookup):
                ds = self.store.newest(scope, dataset)
            fold_new_rows(ds, dataset, dict.fromkeys(lookup, 1))
            last = self._cleaned.get(key)
            # Not under a live index lease either: a fold reads one version and may run longer than
            # retain_s under load; removing that version failed the fold (a 10-minute soak at
            # 100 executions/s, 2026-12-06: the IndexAndCompact tick failed twice on a missing
            # manifest and never finished). The versions wait for the lease's release.
            cleanup = not deferred and (last is None or time.monotonic() - last >= self.cleanup_interval_s)
            if cleanup:
                ds.cleanup_old_versions(
                    older_than=timedelta(seconds=self.retain_s), error_if_tagged_old_versions=False
                )
                self._cleaned[key] = time.monotonic()
            with self._lock:
                self.stats.cleanups += cleanup
                self.stats.compactions += not deferred
                self.stats.compactions_deferred += deferred
                self.stats.maintenance_s += time.perf_counter() - t0
        except Exception as exc:
            # Usually a concurrent commit from another process won the race (OSError): the next
            # commit's check compacts again. Maintenance never fails a caller whose rows are
            # committed, whatever went wrong; the log names the error type only.
            log.info(
                "lance %s maintenance skipped (%s), due again after the next commit",
                dataset,
                type(exc).__name__,
            )
        self._fold_soon(key)

    def _upkeep_later(self, key: tuple[Scope, str]) -> None:
        """Leave the dataset's upkeep until another ``max_fragments`` commits from now."""
        self._upkeep_above[key] = self._fragments.get(key, 0) + self.max_fragments

    def _folding(self, key: tuple[Scope, str]) -> bool:
        with self._lock:
            return key in self._folders

    def _fold_soon(self, key: tuple[Scope, str]) -> None:
        """Have the dataset's fold thread look again, starting one if none runs."""
        dataset = key[1]
        # The lookup indexes too: the leader's upkeep leaves them while a fold runs.
        thresholds = fold_thresholds(dataset, self.query_fold_rows, self.ngram_fold_rows)
        if set(thresholds) <= set(DATASETS[dataset].lookup):
            return  # no query index: the leader's upkeep folds the lookup indexes
        with self._lock:
            self._fold_due.add(key)
            if key in self._folders:
                return  # it looks again before it ends (_fold)
            # Not a daemon, for the leaders' reason (activities/group_commit.py).
            folder = threading.Thread(target=self._fold, args=(key, thresholds), name=f"lance-fold-{dataset}")
            self._folders[key] = folder
            folder.start()

    def _fold_once(self, key: tuple[Scope, str], thresholds: dict[str, int]) -> int:
        """The folds due now; the query indexes' under the dataset's index lease, so that other
        processes' committers do not compact it meanwhile (the lookup indexes' are quick and
        take none). Returns the number of indexes folded."""
        scope, dataset = key

        ds = self.store.open(scope, dataset)
        if ds is None:
            return 0
        newest = partial(self.store.newest, scope, dataset)
        due = due_folds(ds, thresholds)
        lookup = DATASETS[dataset].lookup
        if all(fold.column in lookup for fold in due):
            return fold_new_rows(ds, dataset, due=due)
        with index_lease(newest, self.lease_s) as held:
            if not held:
                # Another process is folding this dataset's query indexes; they wait for the next
                # look after a commit, and the lookup indexes are folded now.
                due = [fold for fold in due if fold.column in lookup]
            return fold_new_rows(newest(), dataset, due=due)

    def _fold(self, key: tuple[Scope, str], thresholds: dict[str, int]) -> None:
        """Fold new rows into the indexes past their thresholds until no commit has come since
        the last look."""
        dataset = key[1]
        while True:
            with self._lock:
                if key not in self._fold_due:
                    del self._folders[key]
                    return
                self._fold_due.discard(key)
            try:
                t0 = time.perf_counter()
                if self._fold_once(key, thresholds):
                    with self._lock:
                        self.stats.folds += 1
                        self.stats.fold_s += time.perf_counter() - t0
            except Exception as exc:
                # Lost to another process's compaction, usually: the rows wait for the next look.
                log.info("lance %s index fold skipped (%s), due again later", dataset, type(exc).__name__)
