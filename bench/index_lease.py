"""Index folds under two workers' commits, with and without the index lease.

In pylance 14 a compaction preempts any index build or fold in progress on the same dataset, and
every worker's committer compacts the datasets it writes every ``max_fragments`` commits. A fold
that takes longer than the gap between two workers' compactions loses every time: the query
indexes then stop covering new rows, and queries scan them unindexed
(api/dataplane/index_lease.py).

A ``value_leaves_v1`` of ``--rows`` rows gets the tick's indexes; then two committers, each with
its own LanceStore on the dataset (two worker processes sharing a bucket), take ``--writers``
writer threads each, merging ``--leaves`` rows, pausing ``--pause-s`` and going again for
``--seconds``. Each committer's fold thread folds the query and n-gram indexes once
``--fold-rows`` rows wait, and an IndexAndCompact tick runs every ``--tick-s`` on a third store.
Both ways in the same run, each on its own copy of the dataset: without the lease (the code
before: the lease's checks answer "no lease" and taking one commits nothing) and with it.

Prints, per way: merges and the callers' wait (p50, p95); the fold threads' folds done and lost;
the ticks finished, failed, and their fold attempts lost to a compaction; compactions done and
deferred; and at the end, the fragments and the rows each query index does not cover.

    .venv/bin/python bench/index_lease.py [--rows 200000] [--seconds 60] [--tick-s 15] [--moto]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "projection_io"))

import conftest as fx  # noqa: E402
from committer_folds import ROWS_PER_WRITER, write  # noqa: E402
from lance_merge import DATASET, LEAVES_PER_EXECUTION, SCOPE, build, fill  # noqa: E402

from activities import lance_committer  # noqa: E402
from activities.lance_committer import LanceCommitter  # noqa: E402
from api.dataplane import lance_store  # noqa: E402
from api.dataplane.lance_store import LanceStore  # noqa: E402


class Census(logging.Handler):
    """Counts the committer's "skipped" lines: folds and upkeep rounds that lost a race."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        for what in ("index fold skipped", "maintenance skipped"):
            if what in text:
                self.counts[what] += 1


@contextlib.contextmanager
def without_lease() -> Iterator[None]:
    """The code before the lease: nobody ever holds one, and taking one commits nothing."""

    @contextlib.contextmanager
    def no_lease(newest: Any, seconds: float = 0.0) -> Iterator[bool]:
        yield True

    saved = [
        (m, n, getattr(m, n))
        for m in (lance_committer, lance_store)
        for n in ("held_by_another", "index_lease")
    ]
    for module in (lance_committer, lance_store):
        module.held_by_another = lambda *a, **k: False  # type: ignore[attr-defined]
        module.index_lease = no_lease  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def run_way(stores: list[LanceStore], tick_store: LanceStore, args: argparse.Namespace) -> dict[str, Any]:
    census = Census()
    logging.getLogger("baml_studio.lance_committer").addHandler(census)
    logging.getLogger("baml_studio.lance_committer").setLevel(logging.INFO)
    lost_attempts = Counter[str]()
    real_retryable = lance_store.is_retryable_conflict

    def counting(exc: BaseException) -> bool:
        retryable = real_retryable(exc)
        if retryable and threading.current_thread().name == "tick":
            lost_attempts["tick"] += 1
        return retryable

    lance_store.is_retryable_conflict = counting  # type: ignore[assignment]
    committers = [
        LanceCommitter(store, query_fold_rows=args.fold_rows, ngram_fold_rows=args.fold_rows)
        for store in stores
    ]
    waits: list[float] = []
    ticks: list[tuple[float, str]] = []  # (seconds, "finished" or the error type)
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds

    def tick() -> None:
        while time.perf_counter() + args.tick_s < stop:
            time.sleep(args.tick_s)
            t0 = time.perf_counter()
            try:
                tick_store.index_and_compact(SCOPE, DATASET)
                ticks.append((time.perf_counter() - t0, "finished"))
            except Exception as exc:  # the tick's activity would fail back to Temporal
                ticks.append((time.perf_counter() - t0, type(exc).__name__))

    threads = [
        threading.Thread(
            target=write,
            args=(c, args.rows + (i * args.writers + w) * ROWS_PER_WRITER, args, stop, waits, lock),
        )
        for i, c in enumerate(committers)
        for w in range(args.writers)
    ]
    threads.append(threading.Thread(target=tick, name="tick"))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in committers:
            c.close()
    finally:
        lance_store.is_retryable_conflict = real_retryable  # type: ignore[assignment]
        logging.getLogger("baml_studio.lance_committer").removeHandler(census)
    ds = tick_store.open(SCOPE, DATASET)
    assert ds is not None
    unindexed = {
        f"{i['fields'][0]} ({str(i['type']).lower()})": int(
            ds.stats.index_stats(i["name"])["num_unindexed_rows"]
        )
        for i in ds.list_indices()
    }
    waits.sort()
    return {
        "merges": len(waits),
        "wait p50": statistics.median(waits),
        "wait p95": waits[int(0.95 * (len(waits) - 1))],
        "folds done": sum(c.stats.folds for c in committers),
        "folds lost": census.counts["index fold skipped"],
        "upkeep lost": census.counts["maintenance skipped"],
        "compactions": sum(c.stats.compactions for c in committers),
        "deferred": sum(c.stats.compactions_deferred for c in committers),
        "ticks": ticks,
        "tick attempts lost": lost_attempts["tick"],
        "rows": ds.count_rows(),
        "fragments": len(ds.get_fragments()),
        "unindexed": unindexed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="leaf rows in the dataset at the start")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each way runs")
    ap.add_argument("--writers", type=int, default=2, help="writer threads per worker")
    ap.add_argument("--leaves", type=int, default=5 * LEAVES_PER_EXECUTION, help="rows per merge")
    ap.add_argument("--pause-s", type=float, default=0.2)
    ap.add_argument("--fold-rows", type=int, default=20_000, help="query and n-gram fold thresholds")
    ap.add_argument("--tick-s", type=float, default=15.0, help="IndexAndCompact every this many seconds")
    ap.add_argument("--moto", action="store_true", help="each copy in a bucket on moto, not on local disk")
    args = ap.parse_args()
    ways = ("without the lease", "with the lease")
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-index-lease-"))
        t0 = time.perf_counter()
        # Three stores per way on one copy: two workers and the tick.
        stores: dict[str, list[LanceStore]] = {}
        if args.moto:
            port = fx.free_port()
            moto = fx.start_moto_process(port)
            stack.callback(moto.terminate)
            endpoint = fx.Moto(f"http://127.0.0.1:{port}")
            for n, way in enumerate(ways):
                bucket = f"bench-lease-{n}"
                endpoint.client("s3").create_bucket(Bucket=bucket)
                fill(fx.make_lance(endpoint, bucket), args.rows).index_and_compact(SCOPE, DATASET)
                stores[way] = [fx.make_lance(endpoint, bucket) for _ in range(3)]
        else:
            base = Path(tmp) / "base"
            build(base, args.rows).index_and_compact(SCOPE, DATASET)  # the tick's query indexes
            for n, way in enumerate(ways):
                shutil.copytree(base, Path(tmp) / str(n))
                stores[way] = [LanceStore(root=Path(tmp) / str(n)) for _ in range(3)]
        where = "on moto" if args.moto else "on local disk"
        took = time.perf_counter() - t0
        print(f"{DATASET} {where}: {args.rows} rows and the tick's indexes, each way, in {took:.1f}s")
        print(
            f"2 workers x {args.writers} writers, {args.leaves} rows per merge, a pause of {args.pause_s}s"
            f" between, {args.seconds:.0f}s each way; folds once {args.fold_rows} rows wait;"
            f" a tick every {args.tick_s:.0f}s"
        )
        results = {}
        for way in ways:
            with without_lease() if way == "without the lease" else contextlib.nullcontext():
                results[way] = run_way(stores[way][:2], stores[way][2], args)
        for way, r in results.items():
            ticks = r["ticks"]
            finished = [s for s, outcome in ticks if outcome == "finished"]
            print(f"\n{way}:")
            print(
                f"  merges {r['merges']}, wait p50 {r['wait p50']:.2f}s, p95 {r['wait p95']:.2f}s;"
                f" compactions {r['compactions']}, deferred by a lease {r['deferred']},"
                f" upkeep rounds lost {r['upkeep lost']}"
            )
            print(f"  the workers' fold threads: {r['folds done']} folds done, {r['folds lost']} lost")
            print(
                f"  ticks: {len(finished)} finished of {len(ticks)}"
                f" (in {', '.join(f'{s:.1f}' for s in finished) or '-'} s), failed: "
                f"{[outcome for _, outcome in ticks if outcome != 'finished'] or 'none'};"
                f" their attempts lost to a race {r['tick attempts lost']}"
            )
            print(
                f"  at the end: {r['rows']} rows in {r['fragments']} fragments; rows no index entry covers"
                " (what came after the last fold):"
            )
            for name, n in sorted(r["unindexed"].items()):
                print(f"    {name:<26}{n:>10}")


if __name__ == "__main__":
    main()
