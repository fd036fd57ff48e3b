"""The 13 query classes through the coordinator, cold and warm, next to raw ClickHouse.

Builds a corpus with the synthetic profiler and the real projection code (public facts into
Boundary's fact store on chdb, private rows into Lance with indexes built), then runs every class
of api/coordinator/query_classes.py through the coordinator's planner and executor. The public
part goes through Boundary's own guard and fact store in-process (the HTTP hop is left out, so the
ratio measures the coordinator, not TLS). The raw engines do the same work in the same run: for
a public class the same guarded SQL directly on ClickHouse; for a private class the plan's
resident subquery on ClickHouse plus the Lance scans a warm coordinator run issued, replayed on
bare Lance. ``ratio`` = coordinator / raw (target < 1.5x). Q10 also runs with a Japanese needle,
Q11 and Q12 with windows holding 10 k and 100 k candidate calls.

Cold is the first run of a class in this process; warm is p50 / p95 over ``--repeats`` more runs.
``--maintenance`` times maintenance instead (docs/query.md): ``--more-executions`` executions'
private rows arriving in rounds, each folded as the worker's committer does, then an
IndexAndCompact tick, while the private classes run; ``--tick-process`` runs that worker's side in
a process of its own on one CPU and the queries on the other, ``--tick-process niced`` in a
process of its own at nice 19 on both CPUs, as the queries are.

    .venv/bin/python bench/query.py                      # 1 M calls (~250 k executions)
    .venv/bin/python bench/query.py --calls 15000000     # the full-size run of DESIGN.md section 8
    .venv/bin/python bench/query.py --calls 50000        # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import pyarrow as pa
import pyarrow.compute as pc

# This checkout's packages first, not the editable install's (a bench run from another worktree
# would otherwise time the installed code).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "coordinator"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "projection"))

from activities.lance_committer import fold_thresholds
from activities.projection.batches import build_batches, read_ipc
from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchScope
from api.boundary.facts.guard import Scope as GuardScope
from api.boundary.facts.guard import guard_sql
from api.boundary.facts.store import BatchIdentity, FactStore
from api.boundary.facts.store import Budget as ChBudget
from api.coordinator.executor import Budget, QueryRun
from api.coordinator.planner import plan_query
from api.coordinator.private_reader import PrivateReader
from api.coordinator.query_classes import NS_PER_DAY, PUBLIC_CLASSES, ClassParams, class_sql
from api.coordinator.runtime import PreparedQuery
from api.coordinator.value_cache import DiskValueCache
from api.coordinator.value_reader import DirObjects
from api.dataplane.lance_store import DATASETS, LEDGER, LanceStore, fold_new_rows, ledger_row_id
from formats import catalog
from formats import query_output as qo
from formats.object_keys import Scope
from formats.synth import SynthConfig, synthesize

T = TypeVar("T")
SCOPE = Scope("tenbench", "projbench", "envbench")
DB = "bench_query"


class DirectFacts:
    """Boundary's guard + fact store in-process: the resident path without the HTTP hop."""

    def __init__(self, store: FactStore) -> None:
        self.store = store
        self.scope = GuardScope(SCOPE.tenant_id, SCOPE.project_id, SCOPE.environment_id, 1)

    def resident_query(self, sql: str, *, max_rows: int) -> pa.Table:
        guarded = guard_sql(sql, self.scope, database=DB)
        return self.store.run_guarded(guarded, ChBudget(wall_ms=600_000, rows=max_rows, bytes=1 << 34))


REPLICA_PREFIX = 8  # hex characters of execution ids and row ids replaced by the replica number


def _replica(table: pa.Table, r: int, shift_ns: int, id_columns: tuple[str, ...]) -> pa.Table:
    """One copy of ``table`` as replica ``r``: ids re-prefixed, ``*_at_ns`` times shifted."""
    prefix = pa.scalar(f"{r:0{REPLICA_PREFIX}x}")
    for name in table.column_names:
        col = table[name]
        if name in id_columns:
            rest = pc.utf8_slice_codeunits(col, REPLICA_PREFIX)
            col = pc.binary_join_element_wise(prefix, rest, "")
        elif name.endswith("_at_ns") and shift_ns:
            col = pc.add(col, pa.scalar(shift_ns, col.type))
        else:
            continue
        field = table.schema.field(name)
        table = table.set_column(table.schema.get_field_index(name), field, col.cast(field.type))
    return table


LANCE_GROUP = 40  # copies per Lance append (~5 M value leaves: bounded memory at any corpus size)
CHDB_GROUP = 100  # copies per ClickHouse batch (~1 M calls)


def _groups(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _ledger_ids(table: pa.Table) -> pa.Table:
    """A ledger copy keyed the way the projector keys it: row id from (generation, root)."""
    row_ids = [ledger_row_id(1, root) for root in table["root_id"].to_pylist()]
    field = table.schema.field("row_id")
    return table.set_column(table.schema.get_field_index("row_id"), field, pa.array(row_ids, field.type))


def _layout(table: pa.Table) -> pa.Table:
    """Rows in the order private queries prune by: function, then start time.

    Groups are appended in time order (each copy starts after the previous one), so a time window
    reads a run of adjacent fragments, and inside each group one function's rows are contiguous.
    Stored in ``row_id`` (hash) order, a window's leaves were scattered over every fragment
    (docs/query.md, Q11).
    """
    keys = [c for c in ("function_name", "started_at_ns") if c in table.column_names]
    return table.sort_by([(c, "ascending") for c in keys]) if keys else table


@dataclass
class Base:
    """The executions projected for real, and what their copies are made from."""

    truth: Any
    projections: list[Any]
    public: dict[str, pa.Table]  # relation -> the base's rows, as Boundary receives them
    span: int  # ns from the base's first call to its last

    @property
    def execution_ids(self) -> list[str]:
        return [p.execution_id for p in self.projections]


CORPUS_FILE = "corpus.json"  # how the copies were laid out: later appends continue from it


def _save_layout(work: Path, stride_ns: int, copies: int) -> None:
    (work / CORPUS_FILE).write_text(json.dumps({"stride_ns": stride_ns, "copies": copies}))


def _load_layout(work: Path) -> tuple[int, int]:
    """(stride_ns, copies) of the corpus under ``work``."""
    layout = json.loads((work / CORPUS_FILE).read_text())
    return int(layout["stride_ns"]), int(layout["copies"])


PRIVATE_COPIED = ("value_leaves_v1", "calls_v1", "errors_v1", LEDGER)  # values_v1 is shared by CID
IDS = ("execution_id", "row_id", "root_id")


def project_base(profiles: Path, base_executions: int) -> Base:
    from coordinator_corpus import project_profile

    truth = synthesize(profiles, SynthConfig(seed=5, processes=2, executions=base_executions))
    projections = project_profile(profiles)
    public: dict[str, list[pa.Table]] = {}
    for p in projections:
        for b in build_batches(p, SCOPE, 1):
            public.setdefault(b.header.relation, []).append(read_ipc(b.ipc))
    base = {rel: pa.concat_tables(parts) for rel, parts in public.items()}
    starts = base["calls_v1"]["started_at_ns"]
    span = int(pc.max(starts).as_py()) - int(pc.min(starts).as_py()) + 1
    return Base(truth, projections, base, span)


def append_private(lance: LanceStore, private: dict[str, pa.Table], rounds: list[int], stride: int) -> None:
    """Copies ``rounds`` of the base's private rows, copy ``r`` starting ``r * stride`` after the
    base, appended in groups (ids new by construction)."""
    for name, table in private.items():
        for group in _groups(rounds, LANCE_GROUP):
            copies = [_replica(table, r, r * stride, IDS) for r in group]
            if name == LEDGER:
                copies = [_ledger_ids(c) for c in copies]
            lance.append_new(SCOPE, name, _layout(pa.concat_tables(copies)))


def ingest_public(store: FactStore, base: Base, rounds: list[int], stride: int) -> int:
    """Copies ``rounds`` of every public relation, each group of copies one checked batch; calls."""
    n_calls = 0
    batch_scope = BatchScope(SCOPE.tenant_id, SCOPE.project_id, SCOPE.environment_id, 1)
    for relation, table in base.public.items():
        if relation == "function_definitions_v1":
            if 0 not in rounds:
                continue
            chosen = [0]  # per program, not per execution: one copy
        else:
            chosen = rounds
        for group in _groups(chosen, CHDB_GROUP):
            part = pa.concat_tables([_replica(table, r, r * stride, IDS) if r else table for r in group])
            n_calls += part.num_rows if relation == "calls_v1" else 0
            ident = BatchIdentity(
                f"bench-{relation}-{group[0]}", relation, 1, "00" * 32, "sha256:" + "0" * 64
            )
            store.ingest(ident, batch_scope, part)
    return n_calls


def settle(store: FactStore) -> None:
    """Merge every day partition but the newest into one part: what ClickHouse does by itself an
    hour after a day's last insert (ddl.SETTLE_SECONDS), done now so the corpus is in the state a
    deployment's history is in. The newest day keeps its parts, as a day still being written."""
    for relation in ddl.PARTITION_TIME:
        parts = store.client.query(
            "SELECT toInt64(partition_id) AS day, count() FROM system.parts WHERE database = {d:String}"
            " AND table = {t:String} AND active GROUP BY day ORDER BY day",
            parameters={"d": DB, "t": relation},
        ).result_rows
        for day, n in parts[:-1]:
            if n > 1:
                store.client.command(f"OPTIMIZE TABLE {DB}.{relation} PARTITION ID '{day}' FINAL")


def relayout(store: FactStore) -> None:
    """Rebuild a kept corpus's fact tables in today's layout (ddl.py), rows unchanged, then settle."""
    for relation in catalog.PUBLIC_RELATIONS:
        spec = ddl.table_spec(relation)
        staged = f"{relation}_relayout"
        store.client.command(f"DROP TABLE IF EXISTS {DB}.{staged}")
        store.client.command(ddl.create_fact_table(DB, replace(spec, relation=staged)))
        store.client.command(
            f"INSERT INTO {DB}.{staged} SELECT * FROM {DB}.{relation}",
            settings={"max_partitions_per_insert_block": ddl.MAX_PARTITIONS_PER_INSERT},
        )
        store.client.command(f"EXCHANGE TABLES {DB}.{staged} AND {DB}.{relation}")
        store.client.command(f"DROP TABLE {DB}.{staged}")
    settle(store)


def build(
    calls: int, work: Path, base_executions: int, days: int
) -> tuple[FactStore, LanceStore, ClassParams, Any]:
    """The corpus: a base projected by the real projection core, replicated with vectorised Arrow.

    Running the synthetic profiler and the projector for a million calls takes CPU-hours on two
    cores, so the bench projects ``base_executions`` executions through the real code (profile,
    assemble, batches) and replicates the resulting relations: each copy gets new execution and
    row ids and start times shifted past the previous copy. Every relation keeps the shape, columns
    and value distribution the projector writes; values are shared by CID across copies, as
    recurring values are in a real deployment. The corpus bypasses the publisher, the SQS bridge
    and Temporal: those have their own benchmarks, and here only the query path is timed.
    Copies are streamed in groups, so memory stays bounded at any size.
    """
    from coordinator_corpus import commit_private

    t0 = time.perf_counter()
    base = project_base(work / "profiles", base_executions)
    truth, projections = base.truth, base.projections
    base_calls = base.public["calls_v1"].num_rows
    replicas = max(1, round(calls / base_calls))
    # Copies spread over ``days`` (the seed's 30), so "the last day" is a thirtieth of the corpus
    # and a time window prunes, as in a deployment; never closer than the base's own span.
    stride = max(base.span, days * NS_PER_DAY // replicas)
    _save_layout(work, stride, replicas)
    t1 = time.perf_counter()

    # Lance: the base through the projector's own commit (values, leaves, calls, ledger), then the copies.
    lance = LanceStore(root=work / "lance")
    commit_private(lance, SCOPE, 1, projections)
    private = {n: ds.to_table() for n in PRIVATE_COPIED if (ds := lance.open(SCOPE, n)) is not None}
    append_private(lance, private, list(range(1, replicas)), stride)
    t_append = time.perf_counter()
    tick(lance)  # the first tick builds every index
    t2 = time.perf_counter()

    store = FactStore.open(path=work / "chdb", database=DB)
    n_calls = ingest_public(store, base, list(range(replicas)), stride)
    settle(store)
    t3 = time.perf_counter()
    print(
        f"corpus: {n_calls} calls ({replicas} copies of {base_calls} calls, {len(projections)} executions); "
        f"synth+project {t1 - t0:.1f}s, lance appends {t_append - t1:.1f}s, "
        f"lance indexes {t2 - t_append:.1f}s, chdb {t3 - t2:.1f}s"
    )
    last = replicas - 1
    calls_list = []
    for e in truth.executions:
        zero = e.started_unix_ns - e.spans[0].started_ns + last * stride
        for s in e.spans:
            calls_list.append(zero + s.started_ns)
    all_starts = sorted(calls_list)
    root = next(
        p
        for p in projections
        if p.public["calls_v1"] and p.public["calls_v1"][0]["args_state"] == "available"
    )
    row = next(r for r in root.public["calls_v1"] if r["parent_call_id"] is None)
    invoice = next(
        v.json["invoice"]["id"]
        for e in truth.executions
        if e.execution_id == root.execution_id
        for s in e.spans
        for v in s.values
        if v.role == "input" and isinstance(v.json, dict) and "invoice" in v.json
    )
    now = all_starts[-1]
    params = ClassParams(
        now_ns=now,
        window_start_ns=now - NS_PER_DAY,
        window_end_ns=now + 1,
        root_function=str(row["function_name"]),
        llm_function="support.llm.ClassifyTicket",
        execution_id=f"{last:0{REPLICA_PREFIX}x}" + root.execution_id[REPLICA_PREFIX:],
        call_id=str(row["call_id"]),
        invoice_id=invoice,
    )
    return store, lance, params, n_calls


JAPANESE_NEEDLE = "返金"  # "refund", in the synthetic profiler's Japanese tickets
CANDIDATES = (10_000, 100_000)  # Q11 and Q12 again, with windows holding this many candidate calls


def _window_holding(store: FactStore, params: ClassParams, n: int) -> int | None:
    """The start of the window ending at ``params.window_end_ns`` that holds ``n`` calls of the
    LLM function (Q11's and Q12's candidates), or None when the corpus has fewer."""
    rows = store.client.query(
        f"SELECT started_at_ns FROM {DB}.calls_v1 WHERE function_name = {{f:String}} "
        f"AND started_at_ns < {{end:Int64}} ORDER BY started_at_ns DESC LIMIT 1 OFFSET {n - 1}",
        parameters={"f": params.llm_function, "end": params.window_end_ns},
    ).result_rows
    return int(rows[0][0]) if rows else None


def timed_classes(params: ClassParams, store: FactStore) -> dict[str, str]:
    """The 13 classes, then the variants issue 15 asks for: Q10 with a Japanese needle, Q11 and
    Q12 at 10 k and 100 k candidate calls."""
    sqls = class_sql(params)
    out: dict[str, str] = {}
    for name, sql in sqls.items():
        out[name] = sql
        if name == "Q10":
            out["Q10ja"] = class_sql(replace(params, needle=JAPANESE_NEEDLE))["Q10"]
        if name == "Q12":
            for n in CANDIDATES:
                start = _window_holding(store, params, n)
                if start is not None:
                    sized = class_sql(replace(params, window_start_ns=start))
                    out[f"Q11@{n // 1000}k"] = sized["Q11"]
                    out[f"Q12@{n // 1000}k"] = sized["Q12"]
    return out


@dataclass(frozen=True)
class Timed:
    seconds: float
    outcome: qo.QueryOutcome
    answer: str  # digest of the rows


class _Recorded:
    """A Lance dataset that records the scans the coordinator asks of it, so the bench can
    replay exactly those scans on bare Lance: the raw engine's share of a private class."""

    def __init__(self, ds: Any, log: list[tuple[Any, dict[str, Any]]]) -> None:
        self._ds, self._log = ds, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ds, name)

    def to_table(self, **kwargs: Any) -> pa.Table:
        self._log.append((self._ds, kwargs))
        return self._ds.to_table(**kwargs)


CANDIDATE_CAP = 5_000_000
BUDGET = Budget(wall_ms=600_000, rows=10_000_000, bytes=1 << 34, private_bytes=1 << 40)


def prepare(
    sql: str,
    facts: DirectFacts,
    lance: LanceStore,
    cache: DiskValueCache,
    *,
    budget: Budget = BUDGET,
    record: list[tuple[Any, dict[str, Any]]] | None = None,
) -> PreparedQuery:
    """A query through the coordinator over the bench corpus, ready to run: what
    ``CoordinatorRuntime.start_query`` prepares, with the guard and fact store in-process.
    ``record`` collects the Lance scans it issues."""
    plan = plan_query(sql, candidate_cap=CANDIDATE_CAP)
    assert lance.root is not None
    objects = DirObjects(lance.root)

    def reader() -> PrivateReader:
        bound = PrivateReader.bind(lance, SCOPE, 1, cache=cache, objects=objects)
        if record is not None:
            bound.datasets = {
                k: v if v is None else cast(Any, _Recorded(v, record)) for k, v in bound.datasets.items()
            }
        return bound

    snapshot = qo.SnapshotRef(snapshot_id="bench", catalog_version=1, generation=1)
    run = QueryRun(
        plan,
        public=facts,
        reader_factory=reader,
        snapshot=snapshot,
        budget=budget,
        interactive=False,
        candidate_cap=CANDIDATE_CAP,
    )
    return PreparedQuery(plan, snapshot, run)


def run_class(
    sql: str,
    facts: DirectFacts,
    lance: LanceStore,
    cache: DiskValueCache,
    record: list[tuple[Any, dict[str, Any]]] | None = None,
) -> Timed:
    """One run through the coordinator; ``record`` collects the Lance scans it issued."""
    started = time.perf_counter()
    run = prepare(sql, facts, lance, cache, record=record).run
    lines = list(run.lines())
    assert run.outcome is not None
    # Every line but the last, the outcome (whose figures vary from run to run).
    digest = hashlib.sha256(b"".join(lines[:-1])).hexdigest()
    return Timed(time.perf_counter() - started, run.outcome, digest)


def replay_lance(record: list[tuple[Any, dict[str, Any]]]) -> float:
    """The recorded Lance scans again, on bare Lance (same datasets, versions and filters)."""
    started = time.perf_counter()
    for ds, kwargs in record:
        ds.to_table(**kwargs)
    return time.perf_counter() - started


def run_raw(sql: str, facts: DirectFacts) -> float:
    started = time.perf_counter()
    facts.resident_query(sql, max_rows=10_000_000).to_pylist()
    return time.perf_counter() - started


def tick(lance: LanceStore) -> dict[str, float]:
    """One IndexAndCompact tick over every dataset: seconds per dataset."""
    out = {}
    for name in DATASETS:
        started = time.perf_counter()
        lance.index_and_compact(SCOPE, name)
        out[name] = time.perf_counter() - started
    return out


def fold(lance: LanceStore) -> dict[str, float]:
    """What the worker's committer does as rows arrive (activities/lance_committer.py): new rows
    folded into the indexes that cover them, past its thresholds. Seconds per dataset."""
    out = {}
    for name in DATASETS:
        started = time.perf_counter()
        ds = lance.open(SCOPE, name)
        if ds is not None:
            fold_new_rows(ds, name, fold_thresholds(name))
        out[name] = time.perf_counter() - started
    return out


def base_private(
    work: Path, lance: LanceStore, base_executions: int, profiles: Path
) -> tuple[Base, dict[str, pa.Table]]:
    """The base projected again (the same seed) and its private rows as the corpus holds them."""
    shutil.rmtree(profiles, ignore_errors=True)
    base = project_base(profiles, base_executions)
    ids = base.execution_ids
    private: dict[str, pa.Table] = {}
    for name in PRIVATE_COPIED:
        ds = lance.open(SCOPE, name)
        if ds is None:
            continue
        column = "root_id" if name == LEDGER else "execution_id"
        chunks = [
            ds.to_table(filter=f"{column} IN ({', '.join(repr(i) for i in part)})")
            for part in _groups(ids, 1000)
        ]
        private[name] = pa.concat_tables(chunks)
    if private[LEDGER].num_rows != len(ids):
        raise SystemExit(f"the corpus under {work} was not built from this base: rebuild it")
    return base, private


def stream(lance: LanceStore, private: dict[str, pa.Table], rounds: list[int], stride: int) -> dict[str, Any]:
    """The worker's side of a stretch of production: each round's private rows appended, then the
    committer's folds (past their thresholds), round after round; then a tick. Seconds of each."""
    appended, folds = 0.0, dict.fromkeys(DATASETS, 0.0)
    for r in rounds:
        started = time.perf_counter()
        append_private(lance, private, [r], stride)
        appended += time.perf_counter() - started
        for name, seconds in fold(lance).items():
            folds[name] += seconds
    return {"append_s": appended, "folds": folds, "tick": tick(lance)}


def _print_tick(label: str, seconds: dict[str, float]) -> None:
    parts = ", ".join(f"{n} {s:.1f}" for n, s in seconds.items() if s >= 0.05)
    print(f"{label}: {sum(seconds.values()):.1f}s ({parts})")


TICK_CLASSES = ("Q8", "Q10", "Q11", "Q12")  # the private classes: they read what a tick rewrites


def _pin_process(cpus: set[int]) -> None:
    """Every thread of this process (chdb's and Lance's pools included) onto ``cpus``."""
    for task in Path("/proc/self/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


STREAMING = "streaming"  # what the worker's side prints once set up, before its first round


def _stream_in_own_process(
    work: Path, how: str, rounds: list[int], streaming: threading.Event
) -> dict[str, Any]:
    """:func:`stream` in another process, as a deployment runs a worker: pinned to CPU 1
    (``pinned``: a worker on a machine of its own), or at the lowest priority (``niced``: a worker
    beside the coordinator, started with ``nice -n 19``). The process reads the corpus's stride
    itself; ``streaming`` is set once its set-up (the base projected again) is done."""

    def place() -> None:
        if how == "pinned":
            os.sched_setaffinity(0, {1})
        else:
            os.nice(19)

    command = [sys.executable, __file__, "--work", str(work), "--stream-only", f"{rounds[0]},{len(rounds)}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=place) as child:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:
            if line.strip() == STREAMING:
                streaming.set()
            lines.append(line)
    if child.returncode:
        raise SystemExit(f"the worker's side failed ({child.returncode})")
    return cast(dict[str, Any], json.loads(lines[-1]))


def maintenance(
    work: Path,
    base_executions: int,
    more: int,
    facts: DirectFacts,
    lance: LanceStore,
    params: ClassParams,
    *,
    tick_process: str | None = None,
) -> None:
    """Maintenance beside the queries, in the shape production has: a tick on the corpus as built;
    then ``more`` executions' private rows arrive in rounds of the base's size (2,500 executions,
    about 125 k leaf rows: the committer's fold threshold), each round appended and folded as the
    worker's committer does, and a tick after the last, while the private classes run. Prints the
    times, and each class's latency and answer before, during and after. The public rows of those
    executions are ingested after the quiet runs that follow, so the classes' answers, which start
    from the public candidates, stay those of the corpus before: an answer that changes is
    maintenance's doing.

    With ``tick_process`` the worker's side runs in a process of its own: ``pinned``, the queries
    on CPU 0 throughout and the worker on CPU 1, as a coordinator and a worker run on different
    machines; ``niced``, both on both CPUs, the worker at nice 19. Without, in a thread of this
    process."""
    store = facts.store
    if tick_process == "pinned":
        _pin_process({0})
    _print_tick("tick on the corpus as built", tick(lance))
    base, private = base_private(work, lance, base_executions, work / "tick-profiles")
    n_base = len(base.execution_ids)
    stride, replicas = _load_layout(work)
    rounds = list(range(replicas, replicas + max(1, round(more / n_base))))
    sqls = {n: q for n, q in class_sql(params).items() if n in TICK_CLASSES}
    cache = DiskValueCache(work / "value-cache", 4 << 30)

    def runs(k: int) -> dict[str, list[Timed]]:
        return {n: [run_class(q, facts, lance, cache) for _ in range(k)] for n, q in sqls.items()}

    before = runs(3)
    during: dict[str, list[Timed]] = {n: [] for n in sqls}
    result: dict[str, Any] = {}
    streaming = threading.Event()
    worker = threading.Thread(
        target=lambda: result.update(
            _stream_in_own_process(work, tick_process, rounds, streaming)
            if tick_process
            else stream(lance, private, rounds, stride)
        )
    )
    if not tick_process:
        streaming.set()
    worker.start()
    while worker.is_alive():
        for n, q in sqls.items():
            run = run_class(q, facts, lance, cache)
            if streaming.is_set():  # not while the worker's process is still setting up
                during[n].append(run)
    worker.join()
    after = runs(3)
    started = time.perf_counter()
    n_calls = ingest_public(store, base, rounds, stride)
    _save_layout(work, stride, rounds[-1] + 1)
    print(
        f"{len(rounds) * n_base} executions' private rows appended in {len(rounds)} rounds"
        f" ({result['append_s']:.1f}s), their {n_calls} calls ingested after"
        f" ({time.perf_counter() - started:.1f}s)"
    )
    _print_tick("the committer's folds after each round", result["folds"])
    _print_tick("then a tick", result["tick"])
    print(f"{'class':<9}{'before':>9}{'during':>9}{'max':>9}{'after':>9}{'runs':>6}  answers (ms, p50)")

    def p50(ts: list[Timed]) -> float:
        return statistics.median(t.seconds for t in ts) * 1000 if ts else float("nan")

    for n in sqls:
        # An answer counts as the same when a quiet run gave it too; more than one quiet answer
        # means the class orders tied rows arbitrarily, and is reported.
        quiet = {t.answer for t in before[n] + after[n]}
        same = all(t.answer in quiet for t in during[n])
        ties = f", {len(quiet)} orders of tied rows" if len(quiet) > 1 else ""
        dmax = max((t.seconds for t in during[n]), default=float("nan")) * 1000
        print(
            f"{n:<9}{p50(before[n]):>9.1f}{p50(during[n]):>9.1f}{dmax:>9.1f}{p50(after[n]):>9.1f}"
            f"{len(during[n]):>6}  {'same' if same else 'DIFFER'}{ties}"
        )


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress when redirected
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--base-executions", type=int, default=2500, help="executions projected for real")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the corpus here; a later run with the same --work reuses it (cold = a fresh process)",
    )
    parser.add_argument("--classes", default="", help="comma-separated classes to time (default: all)")
    parser.add_argument(
        "--build-only", action="store_true", help="build the corpus under --work, time nothing"
    )
    parser.add_argument(
        "--maintenance",
        action="store_true",
        help="time maintenance on the corpus under --work (a tick as built; then the committer's "
        "folds over --more-executions appended and a tick, with the private classes running)",
    )
    parser.add_argument(
        "--relayout",
        action="store_true",
        help="rebuild the fact tables of the corpus under --work in the current layout (ddl.py), then time",
    )
    parser.add_argument(
        "--tick-process",
        nargs="?",
        const="pinned",
        choices=("pinned", "niced"),
        help="with --maintenance: the folds and tick in a process of its own, pinned to CPU 1 with "
        "the queries on CPU 0 (the default), or niced at 19 on both CPUs",
    )
    parser.add_argument("--stream-only", help=argparse.SUPPRESS)  # "first,count" rounds
    parser.add_argument("--more-executions", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30, help="the time the corpus spans (the seed's 30 days)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        work = args.work or Path(tmp)
        saved = work / "params.json"
        if args.stream_only:  # the worker's side of --maintenance --tick-process (no ClickHouse)
            first_round, n_rounds = (int(x) for x in args.stream_only.split(","))
            lance = LanceStore(root=work / "lance")
            _, private = base_private(work, lance, args.base_executions, work / "stream-profiles")
            stride, _ = _load_layout(work)
            print(STREAMING, flush=True)
            print(
                json.dumps(stream(lance, private, list(range(first_round, first_round + n_rounds)), stride))
            )
            return
        if saved.exists():
            params = ClassParams(**json.loads(saved.read_text()))
            store = FactStore.open(path=work / "chdb", database=DB)
            lance = LanceStore(root=work / "lance")
            n_calls = int(store.client.query(f"SELECT count() FROM {DB}.calls_v1").result_rows[0][0])
            print(f"corpus: reused {work} ({n_calls} calls)")
            if args.relayout:
                started = time.perf_counter()
                relayout(store)
                print(f"fact tables rebuilt in the current layout: {time.perf_counter() - started:.1f}s")
        else:
            work.mkdir(parents=True, exist_ok=True)
            store, lance, params, n_calls = build(args.calls, work, args.base_executions, args.days)
            saved.write_text(json.dumps(params.__dict__))
        if args.build_only:
            return
        if args.maintenance:
            maintenance(
                work,
                args.base_executions,
                args.more_executions,
                DirectFacts(store),
                lance,
                params,
                tick_process=args.tick_process,
            )
            return
        shutil.rmtree(work / "value-cache", ignore_errors=True)  # cold means an empty value cache too
        cache = DiskValueCache(work / "value-cache", 4 << 30)
        facts = DirectFacts(store)
        sqls = timed_classes(params, store)
        print(
            f"{'class':<9}{'rows':>8}{'cold ms':>10}{'warm p50':>10}{'warm p95':>10}"
            f"{'raw p50':>10}{'ratio':>8}{'of it Lance':>13}"
        )
        slowest = ("", 0.0)
        chosen = {c.strip() for c in args.classes.split(",") if c.strip()}
        for name, sql in sqls.items():
            if chosen and name not in chosen and name.split("@")[0].removesuffix("ja") not in chosen:
                continue
            first = run_class(sql, facts, lance, cache)
            cold, outcome = first.seconds, first.outcome
            warm = sorted(run_class(sql, facts, lance, cache).seconds for _ in range(args.repeats))
            p50 = statistics.median(warm)
            p95 = warm[min(len(warm) - 1, int(0.95 * len(warm)))]
            raw_text, ratio_text, lance_text = "", "", ""
            if name in PUBLIC_CLASSES:
                run_raw(sql, facts)
                raw = statistics.median(sorted(run_raw(sql, facts) for _ in range(args.repeats)))
                raw_text, ratio_text = f"{raw * 1000:.1f}", f"{p50 / raw:.2f}x"
            else:
                # The raw engines on the same work: the plan's resident subquery alone on ClickHouse,
                # plus the Lance scans a warm run issued, replayed on bare Lance.
                resident = plan_query(sql, candidate_cap=5_000_000).resident_sql
                record: list[tuple[Any, dict[str, Any]]] = []
                run_class(sql, facts, lance, cache, record)
                run_raw(resident, facts)
                pairs = [(run_raw(resident, facts), replay_lance(record)) for _ in range(args.repeats)]
                raw = statistics.median(ch + ln for ch, ln in pairs)
                lance_text = f"{statistics.median(ln for _, ln in pairs) * 1000:.1f}"
                raw_text, ratio_text = f"{raw * 1000:.1f}", f"{p50 / raw:.2f}x"
            if p50 > slowest[1]:
                slowest = (name, p50)
            err = f"  error={outcome.error.code}" if outcome.error else ""
            print(
                f"{name:<9}{outcome.rows:>8}{cold * 1000:>10.1f}{p50 * 1000:>10.1f}{p95 * 1000:>10.1f}"
                f"{raw_text:>10}{ratio_text:>8}{lance_text:>13}{err}"
            )
        print(f"slowest warm class: {slowest[0]} ({slowest[1] * 1000:.1f} ms p50)")


if __name__ == "__main__":
    main()
