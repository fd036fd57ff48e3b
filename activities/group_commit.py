"""Group commit with a cadence: concurrent callers' items for one key go out in one flush.

The worker's activities each have a little to write (a small meta object's rows, its few public
batches), and the stores charge per write, not per row: a Lance commit, a Boundary request. So
callers submit their item under a key and wait; the first caller leads: it waits until
``interval_s`` after that key's previous flush, collecting what the others submit meanwhile,
flushes the whole group in one call, hands every caller its own answer, runs ``after`` (upkeep
that must not overlap this process's next flush of the key) and passes leadership to the oldest
waiter, so no caller flushes others' items forever. A flush that raises raises in every caller
whose item it held; each caller returns only once a flush holding its item is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

# flush(key, items) -> one answer per item, in order: a result, or the exception for that item.
Flush = Callable[[K, list[I]], Sequence["R | BaseException"]]


@dataclass
class _Waiter(Generic[I, R]):
    item: I
    wake: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    done: bool = False
    result: R | None = None
    error: BaseException | None = None


class GroupCommit(Generic[K, I, R]):
    def __init__(
        self,
        flush: Callable[[K, list[I]], Sequence[R | BaseException]],
        *,
        interval_s: float = 1.0,
        after: Callable[[K], None] | None = None,
    ) -> None:
        self._flush = flush
        self.interval_s = interval_s
        self._after = after
        self._lock = threading.Lock()
        self._queues: dict[K, list[_Waiter[I, R]]] = {}
        self._leading: set[K] = set()
        self._last: dict[K, float] = {}

    def submit(self, key: K, item: I) -> R:
        me: _Waiter[I, R] = _Waiter(item)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._leading:
                self._leading.add(key)
                me.lead = True
        if not me.lead:
            me.wake.wait()
        if not me.done:
            self._lead(key, me)
        if me.error is not None:
            raise me.error
        return me.result  # type: ignore[return-value]

    def _lead(self, key: K, me: _Waiter[I, R]) -> None:
        wait = self._last.get(key, 0.0) + self.interval_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        with self._lock:
            group = self._queues.pop(key, [])
        try:
            answers = list(self._flush(key, [w.item for w in group]))
            if len(answers) != len(group):
                raise RuntimeError(f"a flush answered {len(answers)} items of {len(group)}")
            for w, answer in zip(group, answers, strict=True):
                if isinstance(answer, BaseException):
                    w.error = answer
                else:
                    w.result = answer
        except BaseException as exc:  # every caller whose item the flush held must see it
            for w in group:
                w.error = exc
        self._last[key] = time.monotonic()
        for w in group:
            w.done = True
            if w is not me:
                w.wake.set()
        try:
            if self._after is not None and me.error is None:
                self._after(key)
        finally:
            with self._lock:
                waiting = self._queues.get(key)
                successor = waiting[0] if waiting else None
                if successor is None:
                    self._leading.discard(key)
                else:
                    successor.lead = True
            if successor is not None:
                successor.wake.set()
