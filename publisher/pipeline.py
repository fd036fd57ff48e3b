"""Bounded, ordered parallel map over a thread pool: the publisher's CPU pipeline.

zstd and SHA-256 release the GIL on large buffers, so files compress and hash in parallel while
the caller consumes results in input order (segment planes must be walked in ascending sequence).
At most ``window`` items are in flight: memory stays bounded and a caller that stops early (plane
blocked, flush byte cap reached) wastes at most ``window`` items of work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(
    executor: Executor | None, fn: Callable[[T], R], items: Iterable[T], window: int
) -> Iterator[R]:
    """Yield ``fn(item)`` for each item in order; up to ``window`` run ahead on ``executor``.

    Without an executor (or with ``window`` 1) it runs inline. Closing the iterator early cancels
    the work not yet started; an exception from ``fn`` is raised at that item's position.
    """
    if executor is None or window <= 1:
        for item in items:
            yield fn(item)
        return
    pending: deque[Future[R]] = deque()
    source = iter(items)
    try:
        for item in source:
            pending.append(executor.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
