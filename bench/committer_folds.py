"""How long a caller of the Lance committer waits while the query indexes are folded.

The committer folds new rows into a dataset's query indexes once enough wait
(activities/lance_committer.py). A fold takes seconds; run on the dataset's leader thread, as it
was before, it held every commit of the dataset meanwhile, and each activity waiting on one (and
its ledger commit behind it). Now a fold thread per dataset runs it beside the commits.

A local ``value_leaves_v1`` of ``--rows`` rows gets the tick's query indexes; then ``--writers``
threads, each like an activity, merge one execution's ``--leaves`` leaves through the committer
(one-second cadence), pause ``--pause-s`` and go again, for ``--seconds``, with the fold
thresholds at ``--fold-rows`` so folds happen every few commits. Both ways in the same run, each
on its own copy of the dataset: the fold on the leader (the committer before) and beside the
commits (now). Prints the callers' wait per merge (p50, p95, max), merges done and folds run.

With ``--moto`` each copy is a bucket on moto (the embedded stack's S3, in a process of its own),
where a fold costs what it costs against S3: seconds.

    .venv/bin/python bench/committer_folds.py [--rows 1000000] [--seconds 60] [--fold-rows 10000] [--moto]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import conftest as fx  # noqa: E402
from lance_merge import DATASET, LEAVES_PER_EXECUTION, SCOPE, build, fill, leaves  # noqa: E402

from activities.lance_committer import LanceCommitter, fold_thresholds  # noqa: E402
from api.dataplane.lance_store import LanceStore, fold_new_rows  # noqa: E402
from formats.object_keys import Scope  # noqa: E402


class FoldOnLeader(LanceCommitter):
    """The committer before: the query-index folds on the dataset's leader, after its upkeep."""

    def _fold_soon(self, key: tuple[Scope, str]) -> None:
        t0 = time.perf_counter()
        ds = self.store.open(*key)
        thresholds = fold_thresholds(key[1], self.query_fold_rows, self.ngram_fold_rows)
        if ds is not None and fold_new_rows(ds, key[1], thresholds):
            self.stats.folds += 1
            self.stats.fold_s += time.perf_counter() - t0


ROWS_PER_WRITER = 10_000_000  # each writer's own range of leaf rows


def write(
    committer: LanceCommitter,
    row: int,
    args: argparse.Namespace,
    stop: float,
    waits: list[float],
    lock: threading.Lock,
) -> None:
    """One writer, like an activity: merge ``args.leaves`` rows from ``row`` on, pause
    ``args.pause_s``, again until ``stop`` (perf_counter); each merge's wait into ``waits``."""
    while time.perf_counter() < stop:
        table = leaves(row, args.leaves, execution_base=row)
        row += args.leaves
        t0 = time.perf_counter()
        committer.merge(SCOPE, DATASET, table)
        with lock:
            waits.append(time.perf_counter() - t0)
        time.sleep(args.pause_s)


def run(committer: LanceCommitter, first_row: int, args: argparse.Namespace) -> list[float]:
    """Each writer's merges for ``args.seconds``: the wait of every merge, seconds."""
    waits: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds
    threads = [
        threading.Thread(
            target=write, args=(committer, first_row + w * ROWS_PER_WRITER, args, stop, waits, lock)
        )
        for w in range(args.writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    committer.close()
    return waits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="leaf rows in the dataset at the start")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each way runs")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=5 * LEAVES_PER_EXECUTION, help="rows per merge")
    ap.add_argument("--pause-s", type=float, default=0.2)
    ap.add_argument("--fold-rows", type=int, default=10_000, help="query and n-gram fold thresholds")
    ap.add_argument("--moto", action="store_true", help="each copy in a bucket on moto, not on local disk")
    args = ap.parse_args()
    ways = (("on the leader", FoldOnLeader), ("beside commits", LanceCommitter))
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-committer-folds-"))
        t0 = time.perf_counter()
        if args.moto:
            port = fx.free_port()
            moto = fx.start_moto_process(port)
            stack.callback(moto.terminate)
            endpoint = fx.Moto(f"http://127.0.0.1:{port}")
            stores = {}
            for _, kind in ways:  # each way its own copy, built the same way
                bucket = f"bench-{kind.__name__.lower()}"
                endpoint.client("s3").create_bucket(Bucket=bucket)
                stores[kind] = fill(fx.make_lance(endpoint, bucket), args.rows)
                stores[kind].index_and_compact(SCOPE, DATASET)
        else:
            base = Path(tmp) / "base"
            build(base, args.rows).index_and_compact(SCOPE, DATASET)  # the tick's query indexes
            for _, kind in ways:
                shutil.copytree(base, Path(tmp) / kind.__name__)
            stores = {kind: LanceStore(root=Path(tmp) / kind.__name__) for _, kind in ways}
        where = "on moto" if args.moto else "on local disk"
        print(
            f"{DATASET} {where}: {args.rows} rows and the tick's indexes, each way,"
            f" in {time.perf_counter() - t0:.1f}s"
        )
        print(
            f"{args.writers} writers, {args.leaves} rows per merge, a pause of {args.pause_s}s between,"
            f" {args.seconds:.0f}s each way; folds once {args.fold_rows} rows wait"
        )
        head = ("merges", "wait p50", "p95", "max", "folds", "fold s")
        print(f"{'folds run':<18}" + "".join(f"{h:>10}" for h in head))
        for label, kind in ways:
            committer = kind(stores[kind], query_fold_rows=args.fold_rows, ngram_fold_rows=args.fold_rows)
            waits = sorted(run(committer, args.rows, args))
            stats = committer.stats
            p95 = waits[int(0.95 * (len(waits) - 1))]
            print(
                f"{label:<18}{len(waits):>10}{statistics.median(waits):>10.2f}{p95:>10.2f}"
                f"{waits[-1]:>10.2f}{stats.folds:>10}{stats.fold_s:>10.1f}"
            )


if __name__ == "__main__":
    main()
