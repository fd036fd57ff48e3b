"""A weighted gate on the executions a worker holds in memory at once.

A worker runs hundreds of activities at once because a small meta object spends most of its
time waiting for the committer's next commit (docs/projection-runtime.md, "Throughput comes from
concurrency"). A big meta object holds its data segments, decoded groups and rows for the whole
activity (about 16 MB for 87 executions of 10 spans: ``bench/projection.py --executions 6000``
peaked at 1.35 GB with 8 activities and 2.4 GB with 256). So the bound is on executions, not
activities: an activity takes as many slots as its meta object ends executions, and waits while
the worker holds more than ``capacity``. Hundreds of small objects pass at once; a backlog of big
ones is held to a few dozen. An object bigger than the whole gate takes all of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class WorkGate:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a gate needs at least one slot")
        self.capacity = capacity
        self.held = 0
        self._free = threading.Condition()

    @contextmanager
    def hold(
        self, weight: int, *, waiting: Callable[[], None] | None = None, every_s: float = 5.0
    ) -> Iterator[None]:
        """Hold ``weight`` slots (at least one, at most the capacity) for the block; ``waiting``
        is called every ``every_s`` while it waits (an activity's heartbeat: a wait is not a
        dead worker)."""
        weight = min(max(1, weight), self.capacity)
        while True:
            with self._free:
                if self._free.wait_for(lambda: self.held + weight <= self.capacity, every_s):
                    self.held += weight
                    break
            if waiting is not None:
                waiting()  # outside the lock: the others' releases need not wait for it
        try:
            yield
        finally:
            with self._free:
                self.held -= weight
                self._free.notify_all()
