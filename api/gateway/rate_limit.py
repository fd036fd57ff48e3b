"""A token bucket per caller key (the hash of a bearer token), in process memory.

Each key holds up to ``burst`` permits and regains ``rate`` permits per second. ``acquire``
takes one permit or says how long until one is available (the ``Retry-After`` of a 429).
The table is bounded: keys idle long enough to be full again carry no state worth keeping,
so they are dropped first. Pure apart from the clock, which tests inject.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    retry_after_seconds: float = 0.0

    @property
    def retry_after_header(self) -> str:
        """Whole seconds, at least 1 (HTTP ``Retry-After`` has no fractions)."""
        return str(max(1, math.ceil(self.retry_after_seconds)))


class TokenBucketLimiter:
    def __init__(
        self,
        rate_per_second: float,
        burst: int,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_per_second <= 0 or burst < 1:
            raise ValueError("rate_per_second must be > 0 and burst >= 1")
        self.rate = rate_per_second
        self.burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (permits, last refill time); most recently used last.
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def acquire(self, key: str) -> Decision:
        now = self._clock()
        with self._lock:
            permits, last = self._buckets.pop(key, (self.burst, now))
            permits = min(self.burst, permits + (now - last) * self.rate)
            if permits >= 1.0:
                decision = Decision(True)
                permits -= 1.0
            else:
                decision = Decision(False, (1.0 - permits) / self.rate)
            self._buckets[key] = (permits, now)
            while len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
            return decision

    def __len__(self) -> int:
        return len(self._buckets)
