"""The worker's Lance committer: one commit per dataset about once a second, and datasets kept small.

Small meta objects (one or two executions each, two per second per process) made every meta
object commit a new version of every dataset. Lance pays per commit (opening the newest version
lists ``_versions/``, an upsert scans the key column of every fragment), and each commit adds a
fragment and a version, so the cost grew with the stream (measured on moto: 5 rows per commit,
214 ms at 50 commits, 1.6 s at 400; with compaction and version cleanup every 50 commits, flat at
150-190 ms). The committer fixes both halves:

* **cadence**: callers enqueue their rows for a (scope, dataset) and wait; the first caller
  becomes the leader, waits until ``interval_s`` after that dataset's previous commit (collecting
  whatever arrives meanwhile), and commits everything queued in one ``merge_insert``. Every
  caller returns only after a commit holding its rows, so "Lance before the ledger" still holds
  per execution, and a failure is raised to every caller whose rows the commit held (their
  activities are retried, and ``merge_insert`` on deterministic keys makes the retry idempotent).
  Leadership passes to the oldest waiter, so no caller commits others' rows forever;
* **maintenance at the same cadence**: after a commit, the leader compacts the dataset once it has
  more than ``max_fragments`` fragments, folds new fragments into the existing scalar indexes
  (``optimize_indices``, so values are found by CID through the index, not by scanning), and
  removes versions older than ``retain_s`` (readers bound to a version keep it that long). It runs
  on the leader's thread while it still leads, so this process never commits into a dataset it is
  compacting.

Several worker processes still commit to one dataset independently; Lance retries their
conflicts against the newest version without rewriting fragments.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

import pyarrow as pa

from activities.lance_store import LanceStore, MergeResult, dataset_schema
from formats.object_keys import Scope

log = logging.getLogger("baml_studio.lance_committer")


@dataclass
class _Pending:
    table: pa.Table
    wake: threading.Event
    lead: bool = False
    done: bool = False
    result: MergeResult | None = None
    error: BaseException | None = None


@dataclass
class CommitStats:
    """What the committer did (for benchmarks and the worker's log)."""

    commits: int = 0
    rows: int = 0
    callers: int = 0
    compactions: int = 0
    cleanups: int = 0
    maintenance_s: float = 0.0
    by_dataset: dict[str, int] = field(default_factory=dict)


class LanceCommitter:
    def __init__(
        self,
        store: LanceStore,
        *,
        interval_s: float = 1.0,
        max_fragments: int = 16,
        retain_s: float = 600.0,
    ) -> None:
        self.store = store
        self.interval_s = interval_s
        self.max_fragments = max_fragments
        self.retain_s = retain_s
        self.stats = CommitStats()
        self._lock = threading.Lock()
        self._queues: dict[tuple[Scope, str], list[_Pending]] = {}
        self._leading: set[tuple[Scope, str]] = set()
        self._last_commit: dict[tuple[Scope, str], float] = {}

    def merge(self, scope: Scope, dataset: str, table: pa.Table) -> MergeResult:
        """Merge ``table`` into the dataset; returns once a commit holding these rows is done."""
        key = (scope, dataset)
        me = _Pending(table, threading.Event())
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._leading:
                self._leading.add(key)
                me.lead = True
        if not me.lead:
            me.wake.wait()
        if not me.done:
            self._lead(key, me)
        if me.error is not None:
            raise me.error
        assert me.result is not None
        return me.result

    def _lead(self, key: tuple[Scope, str], me: _Pending) -> None:
        scope, dataset = key
        # The cadence: collect what arrives until a commit interval has passed since the last one.
        wait = self._last_commit.get(key, 0.0) + self.interval_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        with self._lock:
            group = self._queues.pop(key, [])
        try:
            schema = dataset_schema(dataset)
            parts = [p.table.select(schema.names).cast(schema) for p in group]
            result = self.store.merge(scope, dataset, pa.concat_tables(parts))
            for p in group:
                p.result = result
        except BaseException as exc:  # every caller whose rows were in it must see it
            for p in group:
                p.error = exc
        self._last_commit[key] = time.monotonic()
        with self._lock:
            self.stats.commits += 1
            self.stats.callers += len(group)
            self.stats.rows += sum(p.table.num_rows for p in group)
            self.stats.by_dataset[dataset] = self.stats.by_dataset.get(dataset, 0) + 1
        for p in group:
            p.done = True
        for p in group:
            if p is not me:
                p.wake.set()
        if me.error is None:
            self._maintain(scope, dataset)
        with self._lock:
            waiting = self._queues.get(key)
            successor = waiting[0] if waiting else None
            if successor is None:
                self._leading.discard(key)
            else:
                successor.lead = True
        if successor is not None:
            successor.wake.set()

    def _maintain(self, scope: Scope, dataset: str) -> None:
        """Compact, fold new fragments into the indexes and drop old versions, when it is due."""
        try:
            ds = self.store.open(scope, dataset)
            if ds is None or len(ds.get_fragments()) <= self.max_fragments:
                return
            t0 = time.perf_counter()
            ds.optimize.compact_files()
            ds = self.store.open(scope, dataset)
            assert ds is not None
            if ds.describe_indices():
                ds.optimize.optimize_indices()
            ds.cleanup_old_versions(
                older_than=timedelta(seconds=self.retain_s), error_if_tagged_old_versions=False
            )
            with self._lock:
                self.stats.compactions += 1
                self.stats.cleanups += 1
                self.stats.maintenance_s += time.perf_counter() - t0
        except OSError as exc:
            # A concurrent commit from another process won the race: the next commit's check
            # compacts again. Maintenance never fails a caller whose rows are committed.
            log.info(
                "lance %s maintenance skipped (%s), due again after the next commit",
                dataset,
                type(exc).__name__,
            )
