"""Run a :class:`~api.coordinator.planner.QueryPlan` under one bound snapshot and a budget.

Output is the NDJSON stream of :mod:`formats.query_output`: rows, then exactly one outcome line,
also when the query fails half-way (the error goes in the outcome, never as a cut connection).

Private queries run in four steps:

1. the resident subquery (public filters only) returns the candidate calls from Boundary;
2. the ledger at the bound Lance version says which candidates' executions are indexed; the others
   carry ``private_state = 'pending'`` and pass every private filter (never a silent non-match);
3. exact-match filters prune the candidates with one index lookup each on the leaves' ``key``;
4. private columns are filled chunk by chunk in the candidates' order (whole values by CID; leaves
   with one pruned scan per path when the plan has a ``leaf_prune`` over the leaves' public call
   copies, joined with the candidates in Arrow, else by execution id lists); when the query's
   order is public and it has a LIMIT, the executor stops as soon as enough rows pass the private
   filters (PLATFORM.md "Query floors" 4). ``<role> LIKE '%x%'`` is answered from string leaves.

DataFusion then runs the final SQL over the joined rows. Everything reads the bound versions.
A leaf path is carried as its raw parts until then and typed once over every row read
(api/coordinator/leaf_values.py), so integers stay exact; literals compared with an exact
column are made exact decimals (:func:`api.coordinator.planner.typed_sql`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from datafusion import SessionContext, SQLOptions

from api.coordinator.leaf_values import PARTS_TYPE, is_exact_numeric, typed_column
from api.coordinator.planner import PRIVATE_STATE, LeafPrune, QueryPlan, typed_sql, with_row_limit
from api.coordinator.private_reader import OutdatedLeafLayout, PrivateReader, pair_keys
from formats import query_output as qo
from formats import value_json
from formats.leaf_key import exact_match_key

_FIRST_CHUNK = 2000
_MAX_CHUNK = 32_000
# Up to this many executions, a part's leaves are read by execution id (one IN list through the
# execution_id BTREE) rather than by the pruned scan, which reads every leaf of the path in the
# function's window: Q9 keeps 153 of 63 k calls after its key lookup (0.54 s scanned at 15 M calls).
_ID_LIST_MAX = 500
_SQL_OPTIONS = SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)


@dataclass(frozen=True)
class Budget:
    """Per-request limits (docs/query.md gives the defaults and the maxima)."""

    wall_ms: int = 30_000
    rows: int = 100_000
    bytes: int = 64 << 20
    private_bytes: int = 1 << 30


class PublicSource(Protocol):
    """Runs a resident subquery (public SQL) under the bound snapshot; Boundary in production."""

    def resident_query(self, sql: str, *, max_rows: int) -> pa.Table: ...


class QueryFailed(Exception):
    """A typed failure that ends the query; it becomes the outcome's ``error``."""

    def __init__(self, code: str, message: str, *, remedy: str | None = None, partial: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.remedy = remedy
        self.partial = partial


JOBS_REMEDY = "Run it as a background job: POST /v1/query-jobs with the same SQL (baml-studio query --job)."


@dataclass
class _Usage:
    started: float = field(default_factory=time.monotonic)
    rows: int = 0
    bytes: int = 0
    pending_executions: int = 0
    pending_rows: int = 0
    unavailable: list[qo.Unavailable] = field(default_factory=list)

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


def _check_time(budget: Budget, usage: _Usage, stage: str) -> None:
    if usage.elapsed_ms() > budget.wall_ms:
        raise QueryFailed(
            "budget_exceeded",
            f"wall-time budget of {budget.wall_ms} ms exhausted while {stage}",
            remedy="Raise budget.wall_ms, narrow the query, or run it as a background job "
            "(POST /v1/query-jobs).",
            partial=True,
        )


def _check_private(budget: Budget, reader: PrivateReader | None) -> None:
    if reader is not None and reader.bytes_read > budget.private_bytes:
        raise QueryFailed(
            "budget_exceeded",
            f"private-bytes budget of {budget.private_bytes} exhausted",
            remedy="Raise budget.private_bytes, narrow the query, or run it as a background job.",
            partial=True,
        )


class QueryRun:
    """One query's execution; iterate :meth:`lines` for the NDJSON body."""

    def __init__(
        self,
        plan: QueryPlan,
        *,
        public: PublicSource,
        reader_factory: Any,
        snapshot: qo.SnapshotRef,
        budget: Budget,
        interactive: bool = True,
        candidate_cap: int = 100_000,
    ) -> None:
        self.plan = plan
        self.public = public
        self._reader_factory = reader_factory
        self.reader: PrivateReader | None = None
        self.snapshot = snapshot
        self.budget = budget
        self.interactive = interactive
        self.candidate_cap = candidate_cap
        self.usage = _Usage()
        self.outcome: qo.QueryOutcome | None = None
        # One pruned scan per leaf path / needle per query, reused by every chunk.
        self._scans: dict[tuple[str, str, str], tuple[pa.Table, pa.Array]] = {}

    # --- the stream ----------------------------------------------------------------------------

    def lines(self) -> Iterator[bytes]:
        error: QueryFailed | None = None
        truncated = False
        try:
            if self.interactive and not self.plan.interactive:
                raise QueryFailed(
                    "query_too_expensive",
                    "the query reads private fields of every call: " + "; ".join(self.plan.reasons),
                    remedy=JOBS_REMEDY + " Or filter by function_name and a started_at_ns window.",
                )
            try:
                table = self._run()
            except OutdatedLeafLayout:
                raise QueryFailed(
                    "private_layout_outdated",
                    "the private leaf dataset was written before exact numbers (no integer columns);"
                    " its numbers would be rounded",
                    remedy="Rebuild the derived datasets (baml-studio rebuild, docs/operations.md).",
                ) from None
            json_cols = set(self.plan.json_columns)
            for batch in table.to_batches(max_chunksize=2048):
                for row in batch.to_pylist():
                    if self.usage.rows >= self.budget.rows:
                        raise QueryFailed(
                            "budget_exceeded",
                            f"row budget of {self.budget.rows} reached; the result has more rows",
                            remedy="Raise budget.rows, add a LIMIT, or run it as a background job.",
                            partial=True,
                        )
                    for col in json_cols:
                        text = row.get(col)
                        if isinstance(text, str):
                            row[col] = json.loads(text)
                    line = qo.row_line(row)
                    if self.usage.bytes + len(line) > self.budget.bytes:
                        raise QueryFailed(
                            "budget_exceeded",
                            f"result-bytes budget of {self.budget.bytes} reached",
                            remedy="Raise budget.bytes, select fewer columns, or run it as a background job.",
                            partial=True,
                        )
                    self.usage.rows += 1
                    self.usage.bytes += len(line)
                    yield line
                _check_time(self.budget, self.usage, "streaming rows")
        except QueryFailed as exc:
            error = exc
            truncated = exc.partial
        yield qo.outcome_line(self._outcome(error, truncated))

    def _outcome(self, error: QueryFailed | None, truncated: bool) -> qo.QueryOutcome:
        status: qo.OutcomeStatus
        if error is not None:
            status = "partial" if truncated and self.usage.rows else "failed"
        elif self.usage.pending_rows:
            status = "partial"
        else:
            status = "complete"
        reader = self.reader
        snapshot = self.snapshot
        if reader is not None:
            snapshot = snapshot.model_copy(update={"lance_version": reader.lance_version})
        private_bytes = reader.bytes_read if reader is not None else 0
        b = self.budget
        outcome = qo.QueryOutcome(
            status=status,
            snapshot=snapshot,
            rows=self.usage.rows,
            bytes=self.usage.bytes,
            private_bytes_read=private_bytes,
            elapsed_ms=self.usage.elapsed_ms(),
            pending=qo.PendingCounts(
                executions=self.usage.pending_executions, private_rows=self.usage.pending_rows
            ),
            unavailable=list(self.usage.unavailable),
            budget=qo.BudgetReport(
                wall_ms=qo.BudgetLine(limit=b.wall_ms, used=self.usage.elapsed_ms()),
                rows=qo.BudgetLine(limit=b.rows, used=self.usage.rows),
                bytes=qo.BudgetLine(limit=b.bytes, used=self.usage.bytes),
                private_bytes=qo.BudgetLine(limit=b.private_bytes, used=private_bytes),
            ),
            error=(
                qo.OutcomeError(code=error.code, message=error.message, remedy=error.remedy)
                if error is not None
                else None
            ),
        )
        self.outcome = outcome
        return outcome

    # --- execution -----------------------------------------------------------------------------

    def _run(self) -> pa.Table:
        plan = self.plan
        if not plan.private:
            sql = with_row_limit(plan.resident_sql, self.budget.rows + 1)
            return self.public.resident_query(sql, max_rows=self.budget.rows + 1)
        cands = self.public.resident_query(plan.resident_sql, max_rows=self.candidate_cap + 1)
        _check_time(self.budget, self.usage, "reading public candidates")
        if plan.resident_capped and cands.num_rows > self.candidate_cap:
            raise QueryFailed(
                "query_too_expensive",
                f"more than {self.candidate_cap} calls match the public filters of a private query",
                remedy=JOBS_REMEDY + " Or narrow the function_name / started_at_ns filters.",
            )
        self.reader = reader = self._reader_factory()
        is_indexed = reader.indexed_mask(cands["execution_id"])
        # Pending only where a value exists to wait for: a call without a captured value in the
        # roles the query reads has nothing pending, its private fields are simply absent (NULL).
        roles = list(plan.roles)
        has_value = pc.equal(cands[f"{roles[0]}_state"], "available")
        for role in roles[1:]:
            has_value = pc.or_(has_value, pc.equal(cands[f"{role}_state"], "available"))
        is_pending = pc.and_(pc.invert(is_indexed), pc.fill_null(has_value, False))
        state = pc.if_else(is_pending, pa.scalar("pending"), pa.scalar("indexed"))
        cands = cands.append_column(PRIVATE_STATE, state)

        for f in plan.leaf_filters:
            if f.op != "eq":
                continue
            assert f.path_text is not None
            hits = reader.calls_with_key(f.role, exact_match_key(f.path_text, f.value))
            keep = pc.or_(
                pc.is_in(pair_keys(cands), value_set=pair_keys(hits)),
                pc.equal(cands[PRIVATE_STATE], "pending"),
            )
            cands = cands.filter(keep)
            _check_private(self.budget, reader)

        ctx = SessionContext()
        parts: list[pa.Table] = []
        survivors = 0
        chunk = _FIRST_CHUNK
        if plan.early_limit is None and plan.leaf_prune is not None:
            # Every candidate is read and each leaf path is one scan anyway: join once.
            chunk = max(cands.num_rows, 1)
        start = 0
        while start < cands.num_rows:
            part = self._materialize(cands.slice(start, chunk), reader)
            start += chunk
            chunk = min(chunk * 2, _MAX_CHUNK)
            parts.append(part)
            _check_private(self.budget, reader)
            _check_time(self.budget, self.usage, "reading private values")
            if plan.early_limit is not None:
                if plan.final_where_sql is None:
                    survivors += part.num_rows
                else:
                    survivors += self._count_where(ctx, part)
                if survivors >= plan.early_limit:
                    break
        if parts:
            joined = pa.concat_tables(parts, promote_options="permissive")
        else:
            joined = self._materialize(cands, reader)
        self.usage.unavailable = _lost_values(joined, list(plan.roles))
        pending = pc.equal(joined[PRIVATE_STATE], "pending")
        if plan.aggregate:
            # A group cannot hold a value it has not read: pending rows are reported, not grouped.
            self.usage.pending_rows = int(pc.sum(pending).as_py() or 0)
            self.usage.pending_executions = len(set(joined.filter(pending)["execution_id"].to_pylist()))
            joined = joined.filter(pc.invert(pending))
        result = self._final(ctx, joined)
        if not plan.aggregate and PRIVATE_STATE in result.column_names:
            out_pending = pc.equal(result[PRIVATE_STATE], "pending")
            self.usage.pending_rows = int(pc.sum(out_pending).as_py() or 0)
            if "execution_id" in result.column_names:
                self.usage.pending_executions = len(
                    set(result.filter(out_pending)["execution_id"].to_pylist())
                )
            else:
                self.usage.pending_executions = 1 if self.usage.pending_rows else 0
        return result

    def _materialize(self, part: pa.Table, reader: PrivateReader) -> pa.Table:
        # One pruned scan per leaf path for many calls; id lists for few, or when the leaves
        # cannot be pruned (no public filter to prune by, or leaves without the call facts).
        prune = self.plan.leaf_prune if reader.leaves_carry_call_facts else None
        if prune is not None and pc.count_distinct(part["execution_id"]).as_py() <= _ID_LIST_MAX:
            prune = None
        execution_ids: list[str] = [] if prune is not None else part["execution_id"].to_pylist()
        keys = pair_keys(part)
        whole_roles = sorted({r.role for r in self.plan.refs if r.whole})
        # Whole values by CID; a call that is pending (not in the bound version) reads none.
        readable = pc.equal(part[PRIVATE_STATE], "indexed")
        role_cids = {
            role: pc.if_else(readable, part[f"{role}_cid"], pa.scalar(None, pa.string()))
            for role in whole_roles
        }
        texts = reader.value_texts(c for cids in role_cids.values() for c in cids.to_pylist() if c)
        for ref in self.plan.refs:
            if ref.whole:
                column = pa.array(
                    [texts.get(c) if c else None for c in role_cids[ref.role].to_pylist()], pa.large_string()
                )
            else:
                leaves, leaf_keys = self._leaves(reader, ref.role, ref.path_text, prune, execution_ids)
                idx = pc.index_in(keys, value_set=leaf_keys)
                column = _leaf_parts(leaves, idx)
                # Pending rows carry NULL private fields, whatever an uncommitted write left behind.
                column = pc.if_else(readable, column, pa.scalar(None, column.type))
            part = part.append_column(ref.column, column)
        for sub in self.plan.substrings:
            hits = self._substring_hits(reader, sub.role, sub.needle, prune, execution_ids)
            found = pc.is_in(keys, value_set=hits)
            # A pending call has no leaves to search: NULL, and the final filter lets it pass.
            part = part.append_column(sub.column, pc.if_else(readable, found, pa.scalar(None, pa.bool_())))
        return part

    def _leaves(
        self,
        reader: PrivateReader,
        role: str,
        path_text: str,
        prune: LeafPrune | None,
        execution_ids: list[str],
    ) -> tuple[pa.Table, pa.Array]:
        """Leaf rows at a path and their (execution_id, call_id) join keys."""
        if prune is None:
            leaves = reader.leaves(role, path_text, execution_ids)
            return leaves, pair_keys(leaves)
        key = ("leaf", role, path_text)
        if key not in self._scans:
            leaves = reader.pruned_leaves(role, path_text, prune)
            self._scans[key] = (leaves, pair_keys(leaves))
        return self._scans[key]

    def _substring_hits(
        self, reader: PrivateReader, role: str, needle: str, prune: LeafPrune | None, execution_ids: list[str]
    ) -> pa.Array:
        """(execution_id, call_id) join keys of the calls with a string leaf containing ``needle``."""
        if prune is None:
            return pair_keys(reader.calls_with_substring(role, needle, execution_ids=execution_ids))
        key = ("contains", role, needle)
        if key not in self._scans:
            hits = reader.calls_with_substring(role, needle, prune=prune)
            self._scans[key] = (hits, pair_keys(hits))
        return self._scans[key][1]

    def _typed(self, table: pa.Table) -> tuple[pa.Table, set[str]]:
        """Leaf parts replaced by their typed columns, and the names of the exact numeric ones."""
        exact: set[str] = set()
        for ref in self.plan.refs:
            if ref.whole:
                continue
            i = table.schema.get_field_index(ref.column)
            column = typed_column(table.column(i).combine_chunks())
            if is_exact_numeric(column.type):
                exact.add(ref.column)
            table = table.set_column(i, ref.column, column)
        return table, exact

    def _count_where(self, ctx: SessionContext, part: pa.Table) -> int:
        name = "__chunk"
        part, exact = self._typed(part)
        ctx.register_record_batches(name, [part.to_batches()])
        try:
            assert self.plan.final_where_sql is not None
            where = typed_sql(self.plan.final_where_sql, exact)
            sql = f'SELECT count(*) AS n FROM {name} AS "{self.plan.relation}" WHERE {where}'
            out = ctx.sql_with_options(sql, _SQL_OPTIONS).to_arrow_table()
        finally:
            ctx.deregister_table(name)
        return int(out["n"][0].as_py())

    def _final(self, ctx: SessionContext, joined: pa.Table) -> pa.Table:
        relation = self.plan.relation
        assert relation is not None and self.plan.final_sql is not None
        joined, exact = self._typed(joined)
        batches = joined.to_batches() or [pa.RecordBatch.from_pylist([], schema=joined.schema)]
        ctx.register_record_batches(relation, [batches])
        try:
            df = ctx.sql_with_options(typed_sql(self.plan.final_sql, exact), _SQL_OPTIONS)
            return df.to_arrow_table()
        except Exception as exc:  # DataFusion raises plain Exceptions for planning errors
            raise QueryFailed(
                "query_invalid",
                "the coordinator could not evaluate the private part of the query: " + _first_line(str(exc)),
                remedy="Use functions DataFusion supports on private fields (comparisons, LIKE, count, avg,"
                " sum, min, max, ORDER BY, GROUP BY).",
            ) from None
        finally:
            ctx.deregister_table(relation)


def _lost_values(table: pa.Table, roles: list[str]) -> list[qo.Unavailable]:
    """Values the rows read that were never captured (lost:<reason>), counted by role and reason."""
    out: list[qo.Unavailable] = []
    for role in roles:
        counts = pc.value_counts(table[f"{role}_state"]).to_pylist() if table.num_rows else []
        for item in sorted(counts, key=lambda c: str(c["values"])):
            state = item["values"]
            if isinstance(state, str) and state.startswith("lost:"):
                out.append(qo.Unavailable(kind=f"{role}_value", count=int(item["counts"]), reason=state[5:]))
    return out


def _first_line(text: str) -> str:
    # DataFusion errors quote the SQL, which can hold private literals: keep only the error kind.
    head = text.splitlines()[0] if text else "error"
    return head.split(":")[0][:120]


def _leaf_parts(leaves: pa.Table, idx: pa.Array) -> pa.Array:
    """Each row's leaf at one path as its raw parts (a struct), typed later over every row read."""
    if isinstance(idx, pa.ChunkedArray):
        idx = idx.combine_chunks()
    fields = [pc.take(leaves[f.name], idx).combine_chunks().cast(f.type) for f in PARTS_TYPE]
    return pa.StructArray.from_arrays(fields, fields=list(PARTS_TYPE), mask=pc.is_null(idx))


def json_cell(text: str | None) -> Any:
    return None if text is None else json.loads(text)


__all__ = ["Budget", "PublicSource", "QueryFailed", "QueryRun", "value_json"]
