"""Three worker processes projecting one corpus into the same datasets, each through its own
committer: every execution exactly once, with the same rows as one worker (issue 12, "Workers that
do not fight").

Real parts only: three OS processes (several_workers_child.py, Lance is not fork-safe), each with
its own ProjectionActivities and several activity threads so commits from one process overlap
those of the others, against moto (S3), Lance on moto and the Boundary subprocess. The committer
runs at the worker's cadence (1 s) with ``max_fragments=4``, so datasets are compacted while the
other processes commit. The same corpus projected by one worker process into a second bucket is
the reference.

The conflict figures come from what the children count (LanceStore's outer retries, the
committer's stats) and from Lance's own commit events (``LANCE_LOG=info`` on the children's
stderr): manifest writes that lost the race to another process's commit, and data files written
then deleted because a retried attempt re-ran the merge. The test prints them (``-s``).

Rows every worker writes (a program's function definitions and source files) are upserted again
unchanged by each of them; such an upsert rewrites nothing (the last test), so it does not make
the other processes' commits conflict.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from bucket_corpus import upload
from conftest import ROOT, BoundaryProc, Moto, make_activities, make_lance
from corpus import Corpus, make_corpus

from api.dataplane.lance_store import DATASETS, LEDGER, LanceStore
from formats.contracts import projection as c
from formats.object_keys import Scope

CHILD = Path(__file__).with_name("several_workers_child.py")
WORKERS = 3
THREADS = 8
COMMIT_INTERVAL_S = 1.0
MAX_FRAGMENTS = 4
CHILD_TIMEOUT_S = 150


@dataclass
class Run:
    """What one projection run (one or several worker processes into one bucket) reported."""

    children: list[dict[str, Any]]
    lance_events: Counter[str]
    commits_by_dataset: Counter[str]

    @property
    def outcomes(self) -> list[dict[str, str]]:
        return [o for child in self.children for o in child["outcomes"]]

    def total(self, field: str) -> int:
        return sum(int(child[field]) for child in self.children)


def _bucket_with_packs(moto: Moto, boundary: BoundaryProc, corpus: Corpus) -> tuple[str, LanceStore]:
    """A fresh bucket holding the corpus, its value packs already in values_v1."""
    bucket = f"ev-{uuid.uuid4().hex[:12]}"
    s3 = moto.client("s3")
    s3.create_bucket(Bucket=bucket)
    upload(s3, bucket, corpus.up)
    lance = make_lance(moto, bucket)
    client = boundary.client()
    acts = make_activities(s3, bucket, lance, client, boundary.scope.tenant_id)
    try:
        for key in corpus.up.pack_keys:
            acts.ingest_pack(c.IngestPackInput(key))
    finally:
        acts.close()
        client.close()
    return bucket, lance


_COMMITTED = re.compile(r'event="committed" uri="[^"]*/(\w+)\.lance"[^\n]*operation="(\w+)"')


def _count_lance_events(stderr: str) -> tuple[Counter[str], Counter[str]]:
    """Lance's audit events: file creations/deletions by type, and merge commits by dataset."""
    files: Counter[str] = Counter()
    commits: Counter[str] = Counter()
    for line in stderr.splitlines():
        if "lance::events::file_audit" in line:
            mode = re.search(r'mode="(\w+)"', line)
            kind = re.search(r'type="(\w+)"', line)
            if mode and kind:
                files[f"{mode.group(1)} {kind.group(1)}"] += 1
        elif 'event="committed"' in line:
            m = _COMMITTED.search(line)
            if m and m.group(2) != "Overwrite":  # merges only, not the datasets' creation
                commits[m.group(1)] += 1
    return files, commits


def _project(moto: Moto, boundary: BoundaryProc, bucket: str, shares: list[list[str]], tmp: Path) -> Run:
    """Each share of meta keys projected by its own worker process, all at once."""
    procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
    for i, keys in enumerate(shares):
        config = tmp / f"{bucket}-worker{i}.json"
        config.write_text(
            json.dumps(
                {
                    "endpoint": moto.endpoint,
                    "bucket": bucket,
                    "workload_url": boundary.workload_url,
                    "ca_cert": str(boundary.tls.ca_cert),
                    "client_cert": str(boundary.tls.client_cert),
                    "client_key": str(boundary.tls.client_key),
                    "deployment_id": boundary.deployment_id,
                    "cell": boundary.cell,
                    "tenant_id": boundary.scope.tenant_id,
                    "generation": 1,
                    "keys": keys,
                    "threads": THREADS,
                    "commit_interval_s": COMMIT_INTERVAL_S,
                    "max_fragments": MAX_FRAGMENTS,
                }
            )
        )
        err = config.with_suffix(".stderr")
        env = {"LANCE_LOG": "info", "PYTHONPATH": str(ROOT)}
        with err.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD), str(config)],
                cwd=ROOT,
                env={**_base_env(), **env},
                stdout=log,
                stderr=log,
            )
        procs.append((proc, config, err))
    children: list[dict[str, Any]] = []
    files: Counter[str] = Counter()
    commits: Counter[str] = Counter()
    for proc, config, err in procs:
        try:
            code = proc.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            code = -9
        stderr = err.read_text(errors="replace")
        tail = "\n".join(line for line in stderr.splitlines() if "lance::events" not in line)[-3000:]
        assert code == 0, f"worker {config.name} exited {code}:\n{tail}"
        children.append(json.loads(config.with_suffix(".out").read_text()))
        f, cm = _count_lance_events(stderr)
        files += f
        commits += cm
    return Run(children, files, commits)


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("BAML_STUDIO_", "LANCE_"))}


def _rows(lance: LanceStore, boundary: BoundaryProc, dataset: str) -> list[dict[str, Any]]:
    """Every row of the dataset, ordered by its key (the ledger without its commit time)."""
    keys = list(DATASETS[dataset].keys)
    table = lance.read(boundary.scope, dataset)
    if dataset == LEDGER:
        table = table.drop_columns(["committed_at_ns"])
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


def _overwrites_after_creation(lance: LanceStore, boundary: BoundaryProc, dataset: str) -> list[int]:
    ds = lance.open(boundary.scope, dataset)
    if ds is None:
        # Nothing of the corpus goes there (no call of this corpus raised: no errors_v1), in this
        # run and in the one-worker run alike (their rows were compared above): nothing to check.
        assert not _rows(lance, boundary, dataset)
        return []
    versions = [int(v["version"]) for v in ds.versions()]
    return [v for v in versions[1:] if _operation(ds, v) == "Overwrite"]


def _operation(ds: Any, version: int) -> str | None:
    try:
        transaction = ds.read_transaction(version)
    except TypeError:
        # pylance 14 cannot build the Python form of an index rewrite (the committer's
        # optimize_indices): LanceOperation.RewrittenIndex lacks arguments. Not an overwrite.
        return None
    return type(getattr(transaction, "operation", None)).__name__


def _conflict_report(run: Run) -> str:
    ev = run.lance_events
    commits = run.total("commits")
    lost = ev["delete transaction"]
    return (
        f"workers={len(run.children)} committer commits={commits} for {run.total('callers')} callers, "
        f"compactions={run.total('compactions')} (skipped after a lost race: "
        f"{run.total('maintenance_skipped')}); lance: merge commits={sum(run.commits_by_dataset.values())}, "
        f"commit attempts that lost a race and were retried={lost} "
        f"({lost / max(1, commits):.1%} of commits), "
        f"data files rewritten by a re-run merge={ev['delete data']} of {ev['create data']} written; "
        f"outer retries={run.total('outer_conflict_retries')}"
    )


def test_three_workers_project_every_execution_once_with_the_rows_of_one_worker(
    moto: Moto, boundary: BoundaryProc, tmp_path: Path
) -> None:
    # Three streams at two executions a second: ~46 small meta objects (one or two executions each).
    corpus = make_corpus(tmp_path, boundary.scope, executions=60, processes=3, rate_per_second=2)
    keys = corpus.up.meta_keys
    shared_bucket, shared = _bucket_with_packs(moto, boundary, corpus)
    alone_bucket, alone = _bucket_with_packs(moto, boundary, corpus)

    many = _project(moto, boundary, shared_bucket, [keys[i::WORKERS] for i in range(WORKERS)], tmp_path)
    one = _project(moto, boundary, alone_bucket, [keys], tmp_path)
    print("\nseveral workers:", _conflict_report(many))
    print("one worker:", _conflict_report(one))

    for run in (many, one):
        assert [child["errors"] for child in run.children] == [[]] * len(run.children)
    # Every execution exactly once, with the outcome one worker gives it.
    roots = Counter(o["root_id"] for o in many.outcomes)
    assert set(roots) == corpus.ended_ids and set(roots.values()) == {1}
    assert {o["root_id"]: o["outcome"] for o in many.outcomes} == {
        o["root_id"]: o["outcome"] for o in one.outcomes
    }
    assert {o["outcome"] for o in one.outcomes} == {c.PROJECTED}

    # Every dataset: one row per key, and the rows one worker wrote (the ledger's status and
    # index_state included; only its commit time differs).
    for dataset, spec in DATASETS.items():
        rows = _rows(shared, boundary, dataset)
        distinct = {tuple(r[k] for k in spec.keys) for r in rows}
        assert len(rows) == len(distinct), f"{dataset}: {len(rows)} rows for {len(distinct)} keys"
        assert rows == _rows(alone, boundary, dataset), dataset
        # Only the dataset's creation overwrote it: a creator that lost the race to another
        # worker did not commit an (empty) Overwrite over the winner's rows.
        assert _overwrites_after_creation(shared, boundary, dataset) == [], dataset
    ledger = _rows(shared, boundary, LEDGER)
    assert sorted(r["root_id"] for r in ledger) == sorted(corpus.ended_ids)

    # The scenario really raced: the processes overlapped and compacted while the others committed.
    assert many.total("compactions") >= 1
    # No commit storm: each process commits each dataset at most once per interval.
    for child in many.children:
        limit = child["elapsed_s"] / COMMIT_INTERVAL_S + 1
        assert max(child["by_dataset"].values()) <= limit, child["by_dataset"]


def test_an_identical_upsert_rewrites_no_row_and_a_changed_one_is_updated(tmp_path: Path) -> None:
    # What every worker does with the program's shared rows: upsert them again, unchanged.
    store = LanceStore(root=tmp_path)
    scope = Scope("ten_a", "prj_a", "env_a")
    rows = [
        {"row_id": f"fd{i}", "program_id": "p", "source_path": "main.baml", "source_span": None}
        for i in range(3)
    ]
    store.merge(scope, "function_definitions_v1", pa.Table.from_pylist(rows))
    again = store.merge(scope, "function_definitions_v1", pa.Table.from_pylist(rows))
    assert (again.inserted, again.updated) == (0, 0)
    ds = store.open(scope, "function_definitions_v1")
    assert ds is not None and all(f.deletion_file() is None for f in ds.get_fragments())
    changed = [dict(rows[0], source_span="1:1-2:1"), *rows[1:]]
    result = store.merge(scope, "function_definitions_v1", pa.Table.from_pylist(changed))
    assert (result.inserted, result.updated) == (0, 1)
    table = store.read(scope, "function_definitions_v1").sort_by("row_id")
    assert table.to_pylist() == sorted(changed, key=lambda r: str(r["row_id"]))
