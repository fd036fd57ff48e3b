"""The cyclic garbage collector's settings for a long-lived service process (Boundary, the worker)."""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """Collect less often, once start-up is done. Projection and batch ingest allocate millions of
    short-lived objects (decoded facts, rows, answers, registry rows); with the default thresholds
    (700 allocations) gen-2 collections walked every start-up object (FastAPI, SQLAlchemy, pyarrow,
    Temporal) again and again: about a fifth of the worker's Python time in bench/projection.py.
    Start-up objects are frozen, so the collector no longer walks them."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
