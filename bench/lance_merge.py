"""CPU of one commit of new rows as a dataset grows: the probe-and-append merge against merge_insert.

Every commit of the projector writes each dataset once; a merge_insert joins its rows against
the key of every row already there, so its cost grows with the dataset. ``LanceStore.merge``
probes the new rows' keys through the index on the column they derive from and appends them
(api/dataplane/lance_store.py). For each size, a local ``value_leaves_v1`` of that many rows
(100 leaves per execution, the execution_id index built as the committer keeps it) takes
``--commits`` commits of one new execution's leaves each way, alternating, and the bench prints
the process CPU (Lance's threads included) and wall time per commit, then the ratio.

    .venv/bin/python bench/lance_merge.py [--sizes 10000,100000,1000000] [--commits 20] [--rows 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from api.dataplane import lance_store  # noqa: E402
from api.dataplane.lance_store import DATASETS, LanceStore, create_missing_indexes, dataset_schema  # noqa: E402
from formats.object_keys import Scope  # noqa: E402

SCOPE = Scope("ten_bench", "prj_bench", "env_bench")
DATASET = "value_leaves_v1"
LEAVES_PER_EXECUTION = 100
LOAD_CHUNK = 200_000


def leaves(first: int, n: int, execution_base: int = 0) -> pa.Table:
    """``n`` leaf rows numbered from ``first``: unique row ids, 100 per execution."""
    schema = dataset_schema(DATASET)
    ids = range(first, first + n)
    given = {
        "row_id": [f"{i:032x}" for i in ids],
        "execution_id": [f"{execution_base + i // LEAVES_PER_EXECUTION:032x}" for i in ids],
        "call_id": [f"{i % 7:016x}" for i in ids],
        "cid": [f"{i % 1000:064x}" for i in ids],
        "role": ["output"] * n,
        "path": ["$.text"] * n,
        "key": [f"$.text=row {i}" for i in ids],
        "function_name": ["Summarise"] * n,
        "started_at_ns": [i * 1000 for i in ids],
        "string": [f"row {i} of the bench" for i in ids],
    }
    return pa.table({f.name: given.get(f.name, pa.nulls(n, f.type)) for f in schema}, schema=schema)


def build(root: Path, size: int) -> LanceStore:
    return fill(LanceStore(root=root), size)


def fill(store: LanceStore, size: int) -> LanceStore:
    """``size`` leaf rows in the store's dataset, compacted, with the committer's lookup index."""
    for start in range(0, size, LOAD_CHUNK):
        store.append_new(SCOPE, DATASET, leaves(start, min(LOAD_CHUNK, size - start)))
    ds = store.open(SCOPE, DATASET)
    assert ds is not None
    ds.optimize.compact_files()
    ds = store.open(SCOPE, DATASET)
    assert ds is not None
    create_missing_indexes(ds, DATASET, only=("execution_id",))
    return store


def one_commit(store: LanceStore, table: pa.Table) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    store.merge(SCOPE, DATASET, table)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="dataset sizes in rows, comma-separated")
    ap.add_argument("--commits", type=int, default=20, help="commits per path and size")
    ap.add_argument("--rows", type=int, default=50, help="new rows per commit (one execution's leaves)")
    args = ap.parse_args()
    probing = DATASETS[DATASET]
    joining = dataclasses.replace(probing, probe=None)
    print(f"{DATASET}: CPU (ms, process) and wall (ms) per commit of {args.rows} new rows, median")
    head = ("rows", "join CPU", "join wall", "probe CPU", "probe wall", "CPU ratio")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (10, 9, 10, 10, 11, 10), strict=True)))
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-lance-merge-") as tmp:
            t0 = time.perf_counter()
            store = build(Path(tmp), size)
            built = time.perf_counter() - t0
            runs: dict[str, list[tuple[float, float]]] = {"join": [], "probe": []}
            next_row = size
            for i in range(args.commits * 2):
                path = "probe" if i % 2 else "join"
                lance_store.DATASETS[DATASET] = probing if path == "probe" else joining
                try:
                    table = leaves(next_row, args.rows, execution_base=10**9)
                    runs[path].append(one_commit(store, table))
                finally:
                    lance_store.DATASETS[DATASET] = probing
                next_row += LEAVES_PER_EXECUTION  # the next commit is the next execution
            j_cpu, j_wall = (statistics.median(x) * 1000 for x in zip(*runs["join"], strict=True))
            p_cpu, p_wall = (statistics.median(x) * 1000 for x in zip(*runs["probe"], strict=True))
            print(
                f"{size:>10,} {j_cpu:>9.1f} {j_wall:>10.1f} {p_cpu:>10.1f} {p_wall:>11.1f}"
                f" {p_cpu / j_cpu:>9.2f}x   (built in {built:.1f} s)"
            )


if __name__ == "__main__":
    main()
