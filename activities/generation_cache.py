"""The active generation per environment, asked of Boundary at most once per ``ttl_s`` (pure).

Every meta object's projection checks its generation against the active one before it writes.
Asking Boundary each time cost a request per meta object: a small object holds one or two
executions, and that request (TLS, token check, metastore read) cost Boundary about 6.5 ms of CPU
and the worker about 2.5 ms, more than the object's batches. The answer changes only when a
rebuild switches generations, and Boundary refuses a batch of a generation that is no longer
writable whatever the worker believed (409 ``generation_not_writable``): a stale answer costs at
most a retried activity, whose next check, after ``ttl_s``, refuses the stale generation for good.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future


class ActiveGenerations:
    def __init__(
        self, fetch: Callable[[str], int], ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._clock = clock
        self._known: dict[str, tuple[float, int]] = {}  # environment -> (asked at, generation)
        # When the answer expires, hundreds of activities need it at once: one asks, the others
        # wait for its answer, or its failure (so an unreachable Boundary costs one timeout for
        # all of them, not one each in turn).
        self._asking: dict[str, Future[int]] = {}
        self._lock = threading.Lock()

    def get(self, environment_id: str) -> int:
        with self._lock:
            known = self._known.get(environment_id)
            now = self._clock()
            if known is not None and now - known[0] < self._ttl_s:
                return known[1]
            asking = self._asking.get(environment_id)
            mine = asking is None
            if asking is None:
                asking = self._asking[environment_id] = Future()
        if not mine:
            return asking.result()
        try:
            generation = self._fetch(environment_id)
        except BaseException as exc:
            asking.set_exception(exc)
            raise
        else:
            asking.set_result(generation)
            with self._lock:
                self._known[environment_id] = (now, generation)
            return generation
        finally:
            with self._lock:
                del self._asking[environment_id]
