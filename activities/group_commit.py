"""Group commit with a cadence: concurrent callers' items for one key go out in one flush.

The worker's activities each have a little to write (a small meta object's rows, its few public
batches), and the stores charge per write, not per row: a Lance commit, a Boundary request. So
callers enqueue their item under a key and wait on its future. Each key with items waiting has
one leader thread: it waits until ``interval_s`` after that key's previous flush, collecting what
is enqueued meanwhile, flushes the whole group in one call, hands every caller its own answer,
runs ``after`` (upkeep that must not overlap this process's next flush of the key), and leads
the next group, until nothing is waiting. A flush that raises raises in every caller whose item
it held; each caller's future is done only once a flush holding its item is done.

A caller may wait a long time: behind the flush in progress, the upkeep after it, and a store
that retries its own conflicts for half a minute. A caller that must show it is alive meanwhile
(a Temporal activity, whose heartbeat timeout is 30 s) gives a ``beat``, called every
``beat_every_s`` while it waits (:func:`wait`). Without it, a slow commit in the 60-minute soak
of 2026-12-05 timed out the heartbeats of every activity queued behind it, 256 at once, and
their re-tries did the same work again.

Leaders are threads per key, not per caller: an activity that writes seven datasets enqueues
seven items and waits, instead of holding seven threads (one per dataset per concurrent
activity) that only wait. So a worker can run hundreds of activities at once, which is what its
throughput needs: each small meta object spends about two cadences waiting (its datasets, then
the ledger), and the activities in flight divided by that wait bound the objects per second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

log = logging.getLogger("baml_studio.group_commit")

# flush(key, items) -> one answer per item, in order: a result, or the exception for that item.
Flush = Callable[[K, list[I]], Sequence["R | BaseException"]]
# Seconds between two beats of a waiting caller: well inside a 30 s heartbeat timeout.
BEAT_EVERY_S = 5.0


def wait(future: Future[R], beat: Callable[[], None] | None = None, every_s: float = BEAT_EVERY_S) -> R:
    """The future's answer (or its exception), calling ``beat`` every ``every_s`` until it is done."""
    if beat is None:
        return future.result()
    while True:
        try:
            return future.result(timeout=every_s)
        except TimeoutError:
            if future.done():
                raise  # the answer itself is a TimeoutError (a store's socket), not the wait's
            beat()


class GroupCommit(Generic[K, I, R]):
    def __init__(
        self,
        flush: Flush[K, I, R],
        *,
        interval_s: float = 1.0,
        after: Callable[[K], None] | None = None,
        name: str = "group-commit",
        beat: Callable[[], None] | None = None,
        beat_every_s: float = BEAT_EVERY_S,
    ) -> None:
        self._flush = flush
        self.interval_s = interval_s
        self._after = after
        self._name = name
        self._beat = beat
        self._beat_every_s = beat_every_s
        self._lock = threading.Lock()
        self._queues: dict[K, list[tuple[I, Future[R]]]] = {}
        self._leaders: dict[K, threading.Thread] = {}  # the keys being led, and by which thread
        self._last: dict[K, float] = {}

    def enqueue(self, key: K, item: I) -> Future[R]:
        """Queue ``item`` for the key's next flush; the future holds its answer."""
        done: Future[R] = Future()
        with self._lock:
            self._queues.setdefault(key, []).append((item, done))
            if key not in self._leaders:
                # Not a daemon: a process that exits waits for the commit (and upkeep) in progress.
                # A daemon leader cut off inside Lance at interpreter exit aborted the process
                # ("PyGILState_Release ... finalizing", tests/projection_io/test_several_workers.py).
                leader = threading.Thread(target=self._lead, args=(key,), name=f"{self._name}-{key}")
                self._leaders[key] = leader
                leader.start()
        return done

    def idle(self, key: K) -> bool:
        """True when the key has nothing queued or in flight: an item queued now is flushed at once
        (after the interval since the key's last flush)."""
        with self._lock:
            return key not in self._leaders

    def close(self, timeout_s: float | None = None) -> None:
        """Wait for the leaders: every item queued so far is flushed, and its upkeep done."""
        with self._lock:
            leaders = list(self._leaders.values())
        for leader in leaders:
            leader.join(timeout_s)

    def submit(self, key: K, item: I) -> R:
        """Queue ``item`` and wait for the flush that holds it: its answer, or its exception. The
        group's ``beat`` is called while it waits."""
        return self.result(self.enqueue(key, item))

    def result(self, future: Future[R]) -> R:
        """The answer of an item :meth:`enqueue` queued, waiting with the group's ``beat``."""
        return wait(future, self._beat, self._beat_every_s)

    def _lead(self, key: K) -> None:
        # Runs while the key has items: it starts with one queued and stops when none are left.
        while True:
            wait = self._last.get(key, 0.0) + self.interval_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            with self._lock:
                group = self._queues.pop(key, [])
            self._flush_group(key, group)
            self._last[key] = time.monotonic()
            failed = any(f.exception() is not None for _, f in group)
            try:
                if self._after is not None and not failed:
                    self._after(key)
            except Exception as exc:
                # Upkeep never fails a caller (theirs are answered already), and the leader must
                # go on: a dead leader would leave the key's next callers waiting forever.
                log.warning("%s upkeep after a flush failed (%s)", self._name, type(exc).__name__)
            with self._lock:
                if not self._queues.get(key):
                    del self._leaders[key]
                    return

    def _flush_group(self, key: K, group: list[tuple[I, Future[R]]]) -> None:
        try:
            answers = list(self._flush(key, [item for item, _ in group]))
            if len(answers) != len(group):
                raise RuntimeError(f"a flush answered {len(answers)} items of {len(group)}")
        except BaseException as exc:  # every caller whose item the flush held must see it
            for _, f in group:
                f.set_exception(exc)
            return
        for (_, f), answer in zip(group, answers, strict=True):
            if isinstance(answer, BaseException):
                f.set_exception(answer)
            else:
                f.set_result(answer)
