"""CPU of one commit of new rows as a dataset grows: the probe-and-append merge against merge_insert.

Every commit of the projector writes each dataset once; a merge_insert joins its rows against
the key of every row already there, so its cost grows with the dataset. ``LanceStore.merge``
probes the new rows' keys through the index on the column they derive from and appends them
(api/dataplane/lance_store.py). For each size, a local ``value_leaves_v1`` of that many rows
(100 leaves per execution, the execution_id index built as the committer keeps it) takes
``--commits`` commits of one new execution's leaves each way, alternating, and the bench prints
the process CPU (Lance's threads included) and wall time per commit, then the ratio.

    .venv/bin/python bench/lance_merge.py [--sizes 10000,100000,1000000] [--commits 20] [--rows 50]

``--upkeep`` measures the committer's cost per commit as versions pile up, on moto (the embedded
stack's S3, in a process of its own): a ``LanceCommitter`` (cadence skipped, default upkeep) takes
``--commits`` commits of ``--rows`` new rows into a fresh dataset, two ways in the same run, each
on its own dataset: old versions removed at every compaction (the committer before) and at most
once per ``cleanup_interval_s`` (now). No version gets older than the committer's ``retain_s``
(600 s) within the run, so the versions held grow as a dataset committed once a second holds them
over ten minutes (and twice that with two workers). Per window of ``--window`` commits it prints
the versions held and the CPU per commit of this process and of moto.

    .venv/bin/python bench/lance_merge.py --upkeep [--commits 1200] [--window 200] [--rows 50]

``--write-base`` measures where a commit starts, on moto: two committers (default upkeep, cadence
skipped), each with a store of its own and its own dataset, take turns at windows of
``--window`` commits. One store looks for the newest version before every write (the missing
next version, then the known one: ``write_base_ttl_s=0``), the other starts from the handle its
own last commit left (``LanceStore._write_base``). Per window it prints the CPU per commit of this
process and of moto, and the wall time per commit.

    .venv/bin/python bench/lance_merge.py --write-base [--commits 600] [--window 100] [--rows 50]

``--own-fragments`` measures the key probe's reads the same way: one store's probe reads every
fragment the lookup index does not cover, the other's leaves out its own appends that hold none of
the probed values (``LanceStore._may_hold``). Each commit is a new execution's leaves.

    .venv/bin/python bench/lance_merge.py --own-fragments [--commits 600] [--window 100] [--rows 50]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from proc_cpu import process_cpu  # noqa: E402

from activities.lance_committer import LanceCommitter  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.dataplane import lance_store  # noqa: E402
from api.dataplane.lance_store import (  # noqa: E402
    DATASETS,
    LanceStore,
    create_missing_indexes,
    dataset_schema,
)
from formats.object_keys import Scope  # noqa: E402

SCOPE = Scope("ten_bench", "prj_bench", "env_bench")
DATASET = "value_leaves_v1"
LEAVES_PER_EXECUTION = 100
LOAD_CHUNK = 200_000
CLEANUP_INTERVAL_S = float(ProjectionSettings.model_fields["commit_cleanup_interval_s"].default)


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


def upkeep_windows(
    store: LanceStore, scope: Scope, moto: subprocess.Popen[bytes], args: argparse.Namespace, interval: float
) -> list[tuple[int, float, float]]:
    """(versions held, this process's CPU ms, moto's CPU ms) per commit, per window of commits."""
    committer = LanceCommitter(store, interval_s=0.0, cleanup_interval_s=interval)
    out: list[tuple[int, float, float]] = []
    try:
        for start in range(0, args.commits, args.window):
            cpu, moto_cpu = time.process_time(), process_cpu(moto.pid)
            for i in range(start, start + args.window):
                committer.merge(scope, DATASET, leaves(i * LEAVES_PER_EXECUTION, args.rows))
            cpu, moto_cpu = time.process_time() - cpu, process_cpu(moto.pid) - moto_cpu
            ds = store.open(scope, DATASET)
            assert ds is not None
            out.append((len(ds.versions()), 1000 * cpu / args.window, 1000 * moto_cpu / args.window))
    finally:
        committer.close()
    return out


@contextlib.contextmanager
def moto_bucket(bucket: str) -> Iterator[tuple[Callable[[], LanceStore], subprocess.Popen[bytes]]]:
    """The stack's moto in a process of its own with ``bucket`` created: a maker of stores on that
    bucket, and moto's process."""
    sys.path.insert(0, str(ROOT / "tests" / "projection_io"))
    import conftest as fx

    port = fx.free_port()
    moto = fx.start_moto_process(port)
    try:
        endpoint = fx.Moto(f"http://127.0.0.1:{port}")
        endpoint.client("s3").create_bucket(Bucket=bucket)
        yield (lambda: fx.make_lance(endpoint, bucket)), moto
    finally:
        moto.terminate()
        moto.wait(10)


def upkeep(args: argparse.Namespace) -> None:
    with moto_bucket("bench-upkeep") as (new_store, moto):
        store = new_store()
        every = upkeep_windows(store, Scope("ten_a", "prj_a", "env_a"), moto, args, 0.0)
        spaced = upkeep_windows(store, Scope("ten_b", "prj_b", "env_b"), moto, args, CLEANUP_INTERVAL_S)
    print(f"{DATASET}: CPU per commit of {args.rows} rows through the committer, upkeep included (ms)")
    print(f"           old versions removed at every compaction | at most every {CLEANUP_INTERVAL_S:.0f} s")
    print("  commits  versions   worker    moto | versions   worker    moto | worker+moto ratio")
    for n, ((v0, w0, m0), (v1, w1, m1)) in enumerate(zip(every, spaced, strict=True), start=1):
        print(
            f"  {n * args.window:>7,} {v0:>9} {w0:>8.1f} {m0:>7.1f} | {v1:>8} {w1:>8.1f} {m1:>7.1f}"
            f" | {(w1 + m1) / (w0 + m0):.2f}x"
        )


def in_turns(args: argparse.Namespace, bucket: str, ways: dict[str, Callable[[LanceStore], None]]) -> None:
    """Two committers, each with a store set up its own way and a dataset of its own, on one moto:
    windows of ``--window`` commits taken in turns; per window the CPU per commit of this process
    and of moto, and the wall time per commit, with the second way's ratios to the first."""
    # per way: (this process's CPU, moto's CPU, wall) in ms per commit, per window
    figures: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    with moto_bucket(bucket) as (new_store, moto):
        committers = {}
        for way, setup in ways.items():
            store = new_store()
            setup(store)
            committers[way] = LanceCommitter(store, interval_s=0.0)
        scopes = {way: Scope(f"ten_{n}", "prj_turns", "env_turns") for n, way in enumerate(ways)}
        for start in range(0, args.commits, args.window):
            for way, committer in committers.items():
                cpu, moto_cpu, wall = time.process_time(), process_cpu(moto.pid), time.perf_counter()
                for i in range(start, start + args.window):
                    committer.merge(scopes[way], DATASET, leaves(i * LEAVES_PER_EXECUTION, args.rows))
                cpu, moto_cpu = time.process_time() - cpu, process_cpu(moto.pid) - moto_cpu
                wall = time.perf_counter() - wall
                per = 1000 / args.window
                figures[way].append((cpu * per, moto_cpu * per, wall * per))
        for committer in committers.values():
            committer.close()
    names = list(ways)
    old, new = (figures[way] for way in names)
    print(f"{DATASET}: per commit of {args.rows} rows through the committer (ms), windows taken in turns")
    print(f"           {names[0]:<29}| {names[1]:<25}| ratio")
    print("  commits  worker   moto   wall   |  worker   moto   wall   |  worker  moto  wall")

    def line(label: str, a: Sequence[float], b: Sequence[float]) -> str:
        ratios = "  ".join(f"{y / x:.2f}" for x, y in zip(a, b, strict=True))
        way = [" ".join(f"{x:>{w}.1f}" for x, w in zip(f, (7, 6, 6), strict=True)) for f in (a, b)]
        return f"  {label:>7} {way[0]}   | {way[1]}   |  {ratios}"

    for n, (a, b) in enumerate(zip(old, new, strict=True), start=1):
        print(line(f"{n * args.window:,}", a, b))
    mean = [statistics.fmean(column) for column in zip(*old, strict=True)]
    print(line("all", mean, [statistics.fmean(column) for column in zip(*new, strict=True)]))


def write_base(args: argparse.Namespace) -> None:
    def newest_first(store: LanceStore) -> None:
        store.write_base_ttl_s = 0.0

    in_turns(
        args, "bench-write-base", {"newest version first": newest_first, "own last commit's handle": noop}
    )


def own_fragments(args: argparse.Namespace) -> None:
    def every_fragment(store: LanceStore) -> None:
        store._may_hold = lambda uri, ds, values: None  # type: ignore[method-assign]

    in_turns(
        args, "bench-own-fragments", {"probe reads every fragment": every_fragment, "own ones skipped": noop}
    )


def noop(store: LanceStore) -> None:
    """A store as the worker builds it."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="dataset sizes in rows, comma-separated")
    ap.add_argument(
        "--commits", type=int, default=None, help="commits per path and size (20); --upkeep: per way (1200)"
    )
    ap.add_argument("--rows", type=int, default=50, help="new rows per commit (one execution's leaves)")
    ap.add_argument("--upkeep", action="store_true", help="the committer's cost as versions pile up")
    ap.add_argument(
        "--window", type=int, default=None, help="--upkeep (200), --write-base (100): commits per window"
    )
    ap.add_argument(
        "--write-base", action="store_true", help="where a commit starts: newest version or own last"
    )
    ap.add_argument(
        "--own-fragments",
        action="store_true",
        help="a probe reading every fragment, or only those it may need",
    )
    args = ap.parse_args()
    if args.own_fragments:
        args.commits = args.commits or 600
        args.window = args.window or 100
        own_fragments(args)
        return
    if args.write_base:
        args.commits = args.commits or 600
        args.window = args.window or 100
        write_base(args)
        return
    args.window = args.window or 200
    if args.upkeep:
        args.commits = args.commits or 1200
        upkeep(args)
        return
    args.commits = args.commits or 20
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
