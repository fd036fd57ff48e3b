"""The fact store: one clickhouse-connect client (chdb in-process by default, a server by URL).

Same SQL for both backends. Ingest takes no lock that decides anything: a batch's identity and
digest-conflict rule live in the registry table and hold across any number of stores and
processes on one ClickHouse (``batch_registry``). Concurrent ingests on one store share a flush
(group commit), so ClickHouse sees one insert per table per flush, and flushes start at most once
per ``flush_interval_s`` (the service's cadence). Erasures of one store are serialised by its lock
(docs/boundary-facts.md, "Replicas").
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import clickhouse_connect
import pyarrow as pa
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DatabaseError

from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchRejected, BatchScope
from api.boundary.facts.batch_registry import CLAIM, VISIBLE, BatchMarks, decide, dedup_token

log = logging.getLogger(__name__)

_DB_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# How often a store logs its flush tally (FlushTally): the insert rate is what ClickHouse watches.
FLUSH_REPORT_S = 60.0
_CH_CODE = re.compile(r"Code: (\d+)\.")
_CH_NAME = re.compile(r"\(([A-Z_]+)\)\s*$")
# TIMEOUT_EXCEEDED, TOO_MANY_ROWS_OR_BYTES, TOO_MANY_ROWS, TOO_MANY_BYTES, TOO_SLOW
_BUDGET_CODES = frozenset({159, 396, 158, 307, 160})
_CHDB_LOCK = threading.Lock()
_CHDB_CLIENTS: dict[str, Client] = {}
_REGISTRY_COLUMNS = [
    "tenant_id",
    "project_id",
    "environment_id",
    "generation",
    "batch_id",
    "kind",
    "relation",
    "catalog_version",
    "root_id",
    "content_digest",
    "rows",
    "inserted_at",
]


class BudgetExceeded(Exception):
    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


class QueryFailed(Exception):
    """ClickHouse refused a guarded query; ``name`` is ClickHouse's error name, never its message."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(frozen=True)
class BatchIdentity:
    batch_id: str
    relation: str
    catalog_version: int
    root_id: str
    content_digest: str


@dataclass(frozen=True, slots=True)
class RowSlice:
    """Rows ``[offset, offset + num_rows)`` of a table checked as a whole (one group of a binary
    batch set): no pyarrow slice per batch, and adjacent winners are inserted as one slice."""

    table: pa.Table
    offset: int
    num_rows: int


Rows: TypeAlias = "pa.Table | RowSlice"
Item: TypeAlias = tuple[BatchIdentity, BatchScope, Rows]


def registry_table(kind: str, items: Sequence[Item]) -> pa.Table:
    """The registry rows of ``kind`` for these batches. Arrow, not rows: clickhouse-connect
    serialises a row insert in Python (and, on chdb, through a temp file); ClickHouse reads an
    Arrow table as it is."""
    n = len(items)
    idents = [ident for ident, _, _ in items]
    scopes = [scope for _, scope, _ in items]
    return pa.table(
        {
            "tenant_id": [s.tenant_id for s in scopes],
            "project_id": [s.project_id for s in scopes],
            "environment_id": [s.environment_id for s in scopes],
            "generation": pa.array([s.generation for s in scopes], pa.uint64()),
            "batch_id": [i.batch_id for i in idents],
            "kind": [kind] * n,
            "relation": [i.relation for i in idents],
            "catalog_version": pa.array([i.catalog_version for i in idents], pa.uint32()),
            "root_id": [i.root_id for i in idents],
            "content_digest": [i.content_digest for i in idents],
            "rows": pa.array([t.num_rows for _, _, t in items], pa.uint64()),
            "inserted_at": pa.array([dt.datetime.now(dt.UTC)] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def rows_table(parts: list[Rows]) -> pa.Table:
    """The parts' rows as one table of one record batch (chdb's Arrow insert costs per chunk:
    41 -> 19 ms CPU for 125 batches of calls_v1, docs/boundary-facts.md)."""
    tables: list[pa.Table] = []
    run: RowSlice | None = None
    for part in parts:
        if isinstance(part, RowSlice):
            if run is not None and run.table is part.table and run.offset + run.num_rows == part.offset:
                run = RowSlice(run.table, run.offset, run.num_rows + part.num_rows)
                continue
            if run is not None:
                tables.append(run.table.slice(run.offset, run.num_rows))
            run = part
        else:
            if run is not None:
                tables.append(run.table.slice(run.offset, run.num_rows))
                run = None
            tables.append(part)
    if run is not None:
        tables.append(run.table.slice(run.offset, run.num_rows))
    return pa.concat_tables(tables).combine_chunks()


# Batch and root ids match this (formats.boundary_wire BatchId / RootId, checked at the edge);
# checked again here, they are written into SQL as literals: clickhouse-connect's parameter
# binding escapes strings character by character in Python, a tenth of a set's CPU.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def _id_list(values: list[str]) -> str:
    for v in values:
        if not _SAFE_ID.fullmatch(v):
            raise ValueError("an id outside [A-Za-z0-9._:-]{1,128} reached the fact store")
    return "[" + ",".join(f"'{v}'" for v in values) + "]"


@dataclass(frozen=True)
class BatchState:
    batch_id: str
    generation: int
    relation: str
    rows: int
    content_digest: str
    replayed: bool = False


@dataclass(frozen=True)
class Budget:
    wall_ms: int
    rows: int
    bytes: int

    def limits(self) -> dict[str, Any]:
        """The settings that change from query to query."""
        return {
            "max_execution_time": max(self.wall_ms, 1) / 1000.0,
            "max_result_rows": self.rows,
            "max_result_bytes": self.bytes,
        }

    def settings(self) -> dict[str, Any]:
        return {**self.limits(), **GUARDED_MODES}


# Settings every guarded query runs with whatever its budget. Every version of a row is in one day
# partition (ddl.py): FINAL merges within a day, and reads a settled day's single part as it is.
GUARDED_MODES: dict[str, Any] = {
    "timeout_overflow_mode": "throw",
    "result_overflow_mode": "throw",
    "do_not_merge_across_partitions_select_final": 1,
}


@dataclass
class ErasureOutcome:
    deleted: dict[str, int] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)

    @property
    def remaining_total(self) -> int:
        return sum(self.remaining.values())


@dataclass
class FlushTally:
    """A store's flushes since its last report: what its cadence gave ClickHouse."""

    since: float  # time.monotonic()
    flushes: int = 0
    requests: int = 0
    inserts: int = 0  # fact-table inserts (one per relation per flush), not the registry's
    rows: int = 0

    def line(self, now: float) -> str:
        seconds = max(now - self.since, 1e-9)
        return (
            f"fact flushes: {self.flushes} in {seconds:.0f} s ({self.flushes / seconds:.2f}/s) for"
            f" {self.requests} requests; {self.inserts} fact-table inserts of"
            f" {self.rows / max(self.inserts, 1):.0f} rows on average"
        )


# A FlushTally.line in a log (bench/soak.py sums them): flushes, seconds, requests, inserts, rows
# per insert.
FLUSH_LINE = re.compile(
    r"fact flushes: (\d+) in (\d+) s \([\d.]+/s\) for (\d+) requests; (\d+) fact-table inserts of (\d+) rows"
)


@dataclass
class _Pending:
    """One caller's batches waiting for a flush, and what the flush answered."""

    items: list[Item]
    result: list[BatchState | BatchRejected] | None = None
    error: BaseException | None = None

    @property
    def rows(self) -> int:
        return sum(t.num_rows for _, _, t in self.items)


def _root_erased(ident: BatchIdentity) -> BatchRejected:
    return BatchRejected("root_erased", f"root {ident.root_id} was erased in this environment", status=409)


def _conflict(ident: BatchIdentity, scope: BatchScope) -> BatchRejected:
    return BatchRejected(
        "batch_digest_conflict",
        f"batch {ident.batch_id} is already registered in generation {scope.generation}"
        " with another content digest or relation",
        status=409,
    )


def _token(relation: str, items: list[Item]) -> str:
    return dedup_token(
        relation,
        [
            (s.tenant_id, s.project_id, s.environment_id, s.generation, i.batch_id, i.content_digest)
            for i, s, _ in items
        ],
    )


def _chdb_client(path: Path) -> Client:
    """One client per chdb path per process (the engine allows only one path anyway)."""
    key = str(path.resolve())
    with _CHDB_LOCK:
        client = _CHDB_CLIENTS.get(key)
        if client is None:
            path.mkdir(parents=True, exist_ok=True)
            client = clickhouse_connect.get_client(interface="chdb", path=key)
            # The session keeps these, so a guarded query carries only its limits: chdb's client
            # sets and restores each setting a query carries (two engine calls each; an identity
            # lookup at 15 M calls took 6-8 ms longer with all six).
            for name, value in GUARDED_MODES.items():
                client.command(f"SET {name} = {value!r}")
            _CHDB_CLIENTS[key] = client
        return client


class FactStore:
    def __init__(
        self,
        client: Client,
        *,
        database: str = "baml_facts",
        flush_interval_s: float = 0.0,
        flush_rows: int = 1_000,
    ) -> None:
        """Flushes start at most once per ``flush_interval_s`` (ClickHouse wants about one insert
        per second per table): a caller that comes sooner after the last flush started waits for
        the interval's end, gathering everyone who comes meanwhile into one flush, unless
        ``flush_rows`` rows are waiting (ClickHouse's other rule: at least that many rows per
        insert). A caller after a quiet interval flushes at once. 0 flushes as soon as the last
        flush ends, gathering only those who came meanwhile."""
        if not _DB_NAME.match(database):
            raise ValueError("ClickHouse database names are letters, digits and '_' (max 64)")
        self.client = client
        # An embedded chdb session holds GUARDED_MODES (_chdb_client): queries carry only limits.
        self._session_holds_modes = client in _CHDB_CLIENTS.values()
        self.database = database
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self._last_flush_at = -math.inf  # time.monotonic() when the last flush took its group
        self.tally = FlushTally(time.monotonic())  # this store's flushes since its last report
        self._lock = threading.Lock()
        queue_lock = threading.Lock()
        self._flush_cv = threading.Condition(queue_lock)
        # The leader waiting for the interval's end, on the same lock: a caller that queues wakes
        # it to count the rows again, not every caller waiting for its answer.
        self._interval_cv = threading.Condition(queue_lock)
        self._queue: list[_Pending] = []
        self._flushing = False

    @classmethod
    def open(
        cls,
        *,
        url: str = "",
        path: Path | None = None,
        database: str = "baml_facts",
        flush_interval_s: float = 0.0,
        flush_rows: int = 1_000,
    ) -> FactStore:
        if url:
            client = clickhouse_connect.get_client(dsn=url)
        elif path is not None:
            client = _chdb_client(path)
        else:
            raise ValueError("FactStore needs a ClickHouse URL or a chdb path")
        store = cls(client, database=database, flush_interval_s=flush_interval_s, flush_rows=flush_rows)
        store.ensure_schema()
        return store

    def ensure_schema(self) -> None:
        with self._lock:
            for stmt in ddl.all_ddl(self.database):
                self.client.command(stmt)
            self._migrate_earlier_registries()

    def _migrate_earlier_registries(self) -> None:
        """Rows of an earlier registry table move into the current one, which is then the only
        one read. A legacy row (one per visible batch) becomes a claim and a mark. Rows equal in
        key collapse, so a repeated or concurrent migration is harmless."""
        for table, kind_column in ddl.EARLIER_REGISTRY_TABLES:
            exists = self.client.query(
                "SELECT count() FROM system.tables WHERE database = {d:String} AND name = {t:String}",
                parameters={"d": self.database, "t": table},
            ).result_rows[0][0]
            if not exists:
                continue
            kinds = [kind_column] if kind_column else [f"'{CLAIM}'", f"'{VISIBLE}'"]
            for kind in kinds:
                select = ", ".join(f"{kind} AS kind" if c == "kind" else c for c in _REGISTRY_COLUMNS)
                self.client.command(
                    f"INSERT INTO {self._t(ddl.REGISTRY_TABLE)} ({', '.join(_REGISTRY_COLUMNS)})"
                    f" SELECT {select} FROM {self._t(table)} FINAL"
                )
            self.client.command(f"DROP TABLE IF EXISTS {self._t(table)}")

    # --- helpers ---------------------------------------------------------------------------

    def _t(self, table: str) -> str:
        return f"{ddl.q(self.database)}.{ddl.q(table)}"

    @staticmethod
    def _scope_params(scope: BatchScope) -> dict[str, Any]:
        return {
            "tenant": scope.tenant_id,
            "project": scope.project_id,
            "env": scope.environment_id,
            "gen": scope.generation,
        }

    _SCOPE_SQL = (
        "tenant_id = {tenant:String} AND project_id = {project:String} AND environment_id = {env:String}"
    )

    # --- ingest ----------------------------------------------------------------------------

    def registered_batch(self, scope: BatchScope, root_id: str, batch_id: str) -> BatchState | None:
        """The batch's visible state (its rows are queryable), or None."""
        marks = self._registry(scope, [root_id]).get(batch_id, BatchMarks())
        if not marks.visible:
            return None
        (relation, digest), nrows = min(marks.visible.items())
        return BatchState(batch_id, scope.generation, relation, nrows, digest, replayed=True)

    def root_erased(self, scope: BatchScope, root_id: str) -> bool:
        rows = self.client.query(
            f"SELECT count() FROM {self._t(ddl.TOMBSTONE_TABLE)} FINAL"
            f" WHERE {self._SCOPE_SQL} AND root_id = {{root:String}}",
            parameters={**self._scope_params(scope), "root": root_id},
        ).result_rows
        return bool(rows and rows[0][0])

    def ingest(self, ident: BatchIdentity, scope: BatchScope, table: pa.Table) -> BatchState:
        """Insert a checked batch once: a replay with the same digest returns the recorded state."""
        result = self.ingest_many([(ident, scope, table)])[0]
        if isinstance(result, BatchRejected):
            raise result
        return result

    def _erased_roots(self, scope: BatchScope, root_ids: list[str]) -> set[str]:
        # Erasures are rare: most scopes have no tombstone, and a count needs no root list.
        tomb = f"{self._t(ddl.TOMBSTONE_TABLE)} WHERE {self._SCOPE_SQL}"
        if not self.client.query(
            f"SELECT count() FROM {tomb}", parameters=self._scope_params(scope)
        ).result_rows[0][0]:
            return set()
        rows = self.client.query(
            f"SELECT DISTINCT root_id FROM {self._t(ddl.TOMBSTONE_TABLE)} FINAL"
            f" WHERE {self._SCOPE_SQL} AND root_id IN {_id_list(root_ids)}",
            parameters=self._scope_params(scope),
        ).result_rows
        return {str(r[0]) for r in rows}

    def _registry(self, scope: BatchScope, root_ids: list[str]) -> dict[str, BatchMarks]:
        """The claims and marks of every batch of these roots, by batch id.

        Read by root, the registry's sort order (ddl.REGISTRY_GRANULE_ROWS): a batch id is
        derived from its root id (spec: from the root id, relation and partition), so a root's
        rows hold every writer's claims of its batches. A root's other batches come along and
        are ignored by the caller; the list to parse is a flush's roots, not its batch ids."""
        return self._marks(scope, "root_id", root_ids)

    def _marks(
        self, scope: BatchScope, key: Literal["root_id", "batch_id"], ids: list[str]
    ) -> dict[str, BatchMarks]:
        """The registry's claims and marks in the scope's generation whose ``key`` is one of ``ids``."""
        rows = self.client.query(
            f"SELECT batch_id, kind, relation, content_digest, max(rows)"
            f" FROM {self._t(ddl.REGISTRY_TABLE)}"
            f" WHERE {self._SCOPE_SQL} AND generation = {{gen:UInt64}} AND {key} IN {_id_list(ids)}"
            " GROUP BY batch_id, kind, relation, content_digest",
            parameters=self._scope_params(scope),
        ).result_rows
        out: dict[str, BatchMarks] = {}
        for bid, kind, rel, digest, nrows in rows:
            marks = out.setdefault(str(bid), BatchMarks())
            ident = (str(rel), str(digest))
            if kind == VISIBLE:
                marks.visible[ident] = int(nrows)
            else:
                marks.claims.add(ident)
        return out

    def _insert_registry(self, kind: str, items: list[Item]) -> None:
        if items:
            self.client.insert_arrow(ddl.REGISTRY_TABLE, registry_table(kind, items), database=self.database)

    def ingest_many(self, items: list[Item]) -> list[BatchState | BatchRejected]:
        """Make checked batches visible, each with the PUT's semantics, answered per batch in order.

        Per batch: an erased root is refused (``root_erased``); a batch id whose rows are already
        visible in its scope and generation returns the recorded state when digest and relation
        agree, else ``batch_digest_conflict`` (a repeat inside ``items`` counts as registered).
        Concurrent calls on this store share one flush (group commit): one claim insert, one
        read-back per scope, one insert per relation and one mark insert for all of them. No
        lock decides a batch: the rule holds across stores and processes (:func:`_decide`).
        """
        if not items:
            return []
        pending = _Pending(items)
        with self._flush_cv:
            self._queue.append(pending)
            self._interval_cv.notify()
            while pending.result is None and pending.error is None and self._flushing:
                self._flush_cv.wait()
            if pending.result is None and pending.error is None:
                self._flushing = True
                deadline = self._last_flush_at + self.flush_interval_s
                while (left := deadline - time.monotonic()) > 0 and sum(
                    p.rows for p in self._queue
                ) < self.flush_rows:
                    self._interval_cv.wait(left)
                group, self._queue = self._queue, []
                self._last_flush_at = time.monotonic()
                self.tally.flushes += 1
                self.tally.requests += len(group)
            else:
                group = []
        if group:
            try:
                flat = [it for p in group for it in p.items]
                try:
                    # Erasure and a flush of this store exclude each other: a flush that read
                    # the tombstones before an erasure wrote them cannot insert after it deleted.
                    with self._lock:
                        results = self._flush(flat)
                except BaseException as exc:  # every caller of the flush sees its failure
                    for p in group:
                        p.error = exc
                else:
                    at = 0
                    for p in group:
                        p.result = results[at : at + len(p.items)]
                        at += len(p.items)
            finally:
                with self._flush_cv:
                    self._flushing = False
                    self._flush_cv.notify_all()
                    now = time.monotonic()
                    if now - self.tally.since >= FLUSH_REPORT_S:
                        log.info("%s", self.tally.line(now))
                        self.tally = FlushTally(now)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _flush(self, items: list[Item]) -> list[BatchState | BatchRejected]:
        out: list[BatchState | BatchRejected | None] = [None] * len(items)
        # A repeat of a batch id inside the flush follows its first occurrence.
        first: dict[tuple[BatchScope, str], int] = {}
        repeats: list[int] = []
        for i, (ident, scope, _) in enumerate(items):
            if first.setdefault((scope, ident.batch_id), i) != i:
                repeats.append(i)
        heads = [items[i] for i in sorted(first.values())]
        # 1. Claim every batch before any row is written: the claim is what others read back.
        self._insert_registry(CLAIM, heads)
        # 2. Read back the claims, marks and tombstones (after the claims are committed).
        by_scope: dict[BatchScope, list[int]] = {}
        for i, (_, scope, _) in enumerate(items):
            by_scope.setdefault(scope, []).append(i)
        erased: dict[BatchScope, set[str]] = {}
        winners: list[int] = []
        for scope, idx in by_scope.items():
            roots = sorted({items[i][0].root_id for i in idx})
            erased[scope] = self._erased_roots(scope, roots)
            marks = self._registry(scope, roots)
            for i in idx:
                ident = items[i][0]
                if ident.root_id in erased[scope]:
                    out[i] = _root_erased(ident)
                elif first[(scope, ident.batch_id)] == i:
                    verdict = decide(
                        marks.get(ident.batch_id, BatchMarks()), (ident.relation, ident.content_digest)
                    )
                    if verdict is None:
                        out[i] = _conflict(ident, scope)
                    elif verdict >= 0:
                        out[i] = BatchState(
                            ident.batch_id,
                            scope.generation,
                            ident.relation,
                            verdict,
                            ident.content_digest,
                            True,
                        )
                    else:
                        winners.append(i)
        # 3. The winners' rows, one insert per relation, then their marks: a batch is marked
        # (hence replayed without inserting) only after its rows are queryable.
        tables: dict[str, list[int]] = {}
        for i in winners:
            if items[i][2].num_rows:
                tables.setdefault(items[i][0].relation, []).append(i)
        for relation, idx in tables.items():
            self.tally.inserts += 1
            self.tally.rows += sum(items[i][2].num_rows for i in idx)
            self.client.insert_arrow(
                relation,
                rows_table([items[i][2] for i in idx]),
                database=self.database,
                settings={
                    "insert_deduplication_token": _token(relation, [items[i] for i in idx]),
                    "max_partitions_per_insert_block": ddl.MAX_PARTITIONS_PER_INSERT,
                },
            )
        winners = self._drop_erased_meanwhile(items, winners, out)
        self._insert_registry(VISIBLE, [items[i] for i in winners])
        for i in winners:
            ident, scope, table = items[i]
            out[i] = BatchState(
                ident.batch_id, scope.generation, ident.relation, table.num_rows, ident.content_digest
            )
        for i in repeats:
            ident, scope, _ = items[i]
            if out[i] is not None:  # root erased
                continue
            head = first[(scope, ident.batch_id)]
            done, h_ident = out[head], items[head][0]
            if isinstance(done, BatchState) and (ident.relation, ident.content_digest) == (
                h_ident.relation,
                h_ident.content_digest,
            ):
                out[i] = BatchState(
                    done.batch_id, done.generation, done.relation, done.rows, done.content_digest, True
                )
            else:
                out[i] = _conflict(ident, scope)
        return [r for r in out if r is not None]

    def _drop_erased_meanwhile(
        self,
        items: list[Item],
        winners: list[int],
        out: list[BatchState | BatchRejected | None],
    ) -> list[int]:
        """Across processes no lock orders an erasure against this flush: an erasure writes its
        tombstones before it deletes, and a flush re-reads them after its rows are in. Either the
        erasure's delete sees the rows or this check sees the tombstone, and deletes them."""
        by_scope: dict[BatchScope, list[int]] = {}
        for i in winners:
            by_scope.setdefault(items[i][1], []).append(i)
        kept: list[int] = []
        for scope, idx in by_scope.items():
            erased = self._erased_roots(scope, sorted({items[i][0].root_id for i in idx}))
            gone = [i for i in idx if items[i][0].root_id in erased]
            if gone:
                params = {**self._scope_params(scope), "roots": sorted({items[i][0].root_id for i in gone})}
                for relation in sorted({items[i][0].relation for i in gone} & set(ddl.EXECUTION_RELATIONS)):
                    self.client.command(
                        f"DELETE FROM {self._t(relation)} WHERE {self._root_filter(scope.generation)}",
                        parameters=params,
                    )
                for i in gone:
                    out[i] = _root_erased(items[i][0])
            kept += [i for i in idx if items[i][0].root_id not in erased]
        return sorted(kept)

    # --- resident queries ------------------------------------------------------------------

    def run_guarded(self, guarded_sql: str, budget: Budget) -> pa.Table:
        """Run SQL that :func:`guard.guard_sql` produced, under Boundary's budget settings."""
        try:
            settings = budget.limits() if self._session_holds_modes else budget.settings()
            return self.client.query_arrow(guarded_sql, settings=settings)
        except (DatabaseError, ClickHouseError) as exc:
            text = str(exc)
            m = _CH_CODE.search(text)
            code = int(m.group(1)) if m else -1
            if code in _BUDGET_CODES:
                limit = "wall_ms" if code in (159, 160) else "rows" if "rows" in text.lower() else "bytes"
                raise BudgetExceeded(limit) from None
            name = _CH_NAME.search(text.strip())
            raise QueryFailed(name.group(1) if name else "QUERY_FAILED") from None

    # --- erasure and counts ----------------------------------------------------------------

    def _root_filter(self, generation: int | None) -> str:
        gen = " AND generation >= {gen:UInt64}" if generation is not None else ""
        return f"{self._SCOPE_SQL}{gen} AND execution_id IN {{roots:Array(String)}}"

    def fact_counts(
        self, scope: BatchScope, root_ids: list[str], *, all_generations: bool = False
    ) -> dict[str, int]:
        """Rows (after collapsing duplicates) of those roots per execution relation."""
        gen = None if all_generations else scope.generation
        params = {**self._scope_params(scope), "roots": root_ids}
        out: dict[str, int] = {}
        for rel in ddl.EXECUTION_RELATIONS:
            rows = self.client.query(
                f"SELECT count() FROM {self._t(rel)} FINAL WHERE {self._root_filter(gen)}", parameters=params
            ).result_rows
            out[rel] = int(rows[0][0])
        return out

    def erase(self, scope: BatchScope, root_ids: list[str]) -> ErasureOutcome:
        """Delete every fact of those roots in ``scope.generation`` and later generations (a rebuild).

        Idempotent. Function definitions are per program, not per root: a program's rows go when
        no remaining call in the environment references it. A tombstone per root refuses later
        batches for it, so an in-flight projector cannot resurrect erased facts.
        """
        params = {**self._scope_params(scope), "roots": root_ids}
        out = ErasureOutcome()
        with self._lock:
            self.client.insert(
                ddl.TOMBSTONE_TABLE,
                [
                    [scope.tenant_id, scope.project_id, scope.environment_id, r, dt.datetime.now(dt.UTC)]
                    for r in root_ids
                ],
                column_names=["tenant_id", "project_id", "environment_id", "root_id", "erased_at"],
                database=self.database,
            )
            programs = [
                str(r[0])
                for r in self.client.query(
                    f"SELECT DISTINCT program_id FROM {self._t('calls_v1')} FINAL"
                    f" WHERE {self._root_filter(scope.generation)}",
                    parameters=params,
                ).result_rows
            ]
            out.deleted = self.fact_counts(scope, root_ids)
            for rel in ddl.EXECUTION_RELATIONS:
                if out.deleted[rel]:
                    self.client.command(
                        f"DELETE FROM {self._t(rel)} WHERE {self._root_filter(scope.generation)}",
                        parameters=params,
                    )
            out.deleted["function_definitions_v1"] = self._erase_orphan_programs(scope, programs)
            self.client.command(
                f"DELETE FROM {self._t(ddl.REGISTRY_TABLE)} WHERE {self._SCOPE_SQL}"
                " AND generation >= {gen:UInt64} AND root_id IN {roots:Array(String)}",
                parameters={**params, "roots": root_ids + programs},
            )
            out.remaining = self.fact_counts(scope, root_ids)
        return out

    def _erase_orphan_programs(self, scope: BatchScope, programs: list[str]) -> int:
        if not programs:
            return 0
        params = {**self._scope_params(scope), "programs": programs}
        orphan_sql = (
            f"{self._SCOPE_SQL} AND generation >= {{gen:UInt64}} AND program_id IN {{programs:Array(String)}}"
            f" AND program_id NOT IN (SELECT program_id FROM {self._t('calls_v1')}"
            f" WHERE {self._SCOPE_SQL} AND generation >= {{gen:UInt64}})"
        )
        n = int(
            self.client.query(
                f"SELECT count() FROM {self._t('function_definitions_v1')} FINAL WHERE {orphan_sql}",
                parameters=params,
            ).result_rows[0][0]
        )
        if n:
            self.client.command(
                f"DELETE FROM {self._t('function_definitions_v1')} WHERE {orphan_sql}", parameters=params
            )
        return n

    # --- erasure idempotency log -----------------------------------------------------------

    def erasure_record(self, tenant_id: str, key: str) -> tuple[str, dict[str, Any]] | None:
        rows = self.client.query(
            f"SELECT request_digest, result_json FROM {self._t(ddl.ERASURE_LOG_TABLE)} FINAL"
            " WHERE tenant_id = {tenant:String} AND idem_key = {key:String}",
            parameters={"tenant": tenant_id, "key": key},
        ).result_rows
        if not rows:
            return None
        return str(rows[0][0]), json.loads(rows[0][1])

    def record_erasure(self, tenant_id: str, key: str, digest: str, result: dict[str, Any]) -> None:
        with self._lock:
            self.client.insert(
                ddl.ERASURE_LOG_TABLE,
                [[tenant_id, key, digest, json.dumps(result, sort_keys=True), dt.datetime.now(dt.UTC)]],
                column_names=["tenant_id", "idem_key", "request_digest", "result_json", "created_at"],
                database=self.database,
            )
