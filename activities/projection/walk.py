"""The bounded meta walk-back: which meta sequences to read for a RootEnded, and what they held.

Contract step 1: the projector reads meta sequence 1 by key (StreamStarted, the clock
origin), then walks back from the RootEnded's own meta sequence, by key in descending
order, until it has the execution's RootStarted and the EngineStarted of its engine. The
walk reads at most ``max_walk`` meta objects (2,000). A walk that hits a missing or corrupt
sequence, or exhausts the bound or the stream, before finding both is treated like a
sequence gap: the execution is ``index_corrupt``. When RootEnded says the RootStarted was
lost (flag bit 0), only the EngineStarted is needed.

Pure: the caller passes segments (decoded by the I/O layer) lazily, in the order
:func:`plan_meta_walk` gives, and :func:`find_root_context` stops consuming as soon as it
has what it needs. A caller walking the same segments for many roots (one meta object's
executions) passes each segment's :class:`MetaIndex` instead, built once with
:func:`index_meta_segment`, so a walk step is a dictionary lookup, not a scan of the records.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from activities.projection.model import MetaProblem, RootContext
from formats.ids import ThreadRef
from formats.meta_segment import EngineStarted, MetaSegment, RootStarted, StreamStarted

MAX_WALK = 2000

REASON_GAP = "meta_gap"  # a sequence in the walk was missing or failed verification
REASON_BOUND = "walk_bound_exhausted"
REASON_STREAM_START = "stream_start_reached"  # walked to sequence 1 without the records


def plan_meta_walk(root_ended_seq: int, max_walk: int = MAX_WALK) -> tuple[int, ...]:
    """Meta sequences to read, newest first: the RootEnded's own sequence down to 1, at most ``max_walk``."""
    if root_ended_seq < 1:
        raise ValueError(f"meta sequences start at 1, got {root_ended_seq}")
    if max_walk < 1:
        raise ValueError(f"max_walk must be >= 1, got {max_walk}")
    lowest = max(1, root_ended_seq - max_walk + 1)
    return tuple(range(root_ended_seq, lowest - 1, -1))


@dataclass(frozen=True, slots=True)
class MetaIndex:
    """The records a walk looks for in one meta segment: the first of each per root / engine."""

    sequence: int
    root_started: Mapping[ThreadRef, RootStarted]
    engine_started: Mapping[int, EngineStarted]
    stream_started: StreamStarted | None


def index_meta_segment(segment: MetaSegment) -> MetaIndex:
    roots: dict[ThreadRef, RootStarted] = {}
    engines: dict[int, EngineStarted] = {}
    stream: StreamStarted | None = None
    for record in segment.records:
        if isinstance(record, RootStarted):
            roots.setdefault(record.root, record)
        elif isinstance(record, EngineStarted):
            engines.setdefault(record.engine_id, record)
        elif isinstance(record, StreamStarted) and stream is None:
            stream = record
    return MetaIndex(segment.sequence, roots, engines, stream)


def find_root_context(
    segments: Iterable[MetaSegment | MetaIndex | MetaProblem],
    root: ThreadRef,
    *,
    need_root_started: bool = True,
    max_walk: int = MAX_WALK,
    stream_started: StreamStarted | None = None,
) -> RootContext:
    """Scan ``segments`` (newest first, as :func:`plan_meta_walk` orders them) for the root's records.

    Consumes only as many segments as needed. ``stream_started`` is the record from meta
    sequence 1 when the caller already read it; the walk also picks it up if it reaches 1.
    """
    root_started: RootStarted | None = None
    engine_started: EngineStarted | None = None
    read: list[int] = []
    previous: int | None = None

    def done() -> bool:
        return engine_started is not None and (root_started is not None or not need_root_started)

    def result(complete: bool, reason: str | None) -> RootContext:
        return RootContext(root_started, engine_started, stream_started, tuple(read), complete, reason)

    for item in segments:
        if len(read) >= max_walk:
            return result(False, REASON_BOUND)
        if previous is not None and item.sequence != previous - 1:
            # The caller skipped a sequence: the same as a gap in the stream.
            return result(False, REASON_GAP)
        previous = item.sequence
        read.append(item.sequence)
        if isinstance(item, MetaProblem):
            return result(False, REASON_GAP)
        index = item if isinstance(item, MetaIndex) else index_meta_segment(item)
        if root_started is None:
            root_started = index.root_started.get(root)
        if engine_started is None:
            # The newest EngineStarted for the engine at or before the root is the one that ran it.
            engine_started = index.engine_started.get(root.engine_id)
        if stream_started is None:
            stream_started = index.stream_started
        if done():
            return result(True, None)
        if item.sequence == 1:
            return result(False, REASON_STREAM_START)
    if done():
        return result(True, None)
    return result(False, REASON_BOUND if len(read) >= max_walk else REASON_GAP)


K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A bounded, thread-safe map that forgets the least recently used entry first.

    The projector keeps the indexes of meta segments it has read: the objects are immutable, and
    without it every meta object's walk-back would GET and decode its stream's earlier meta
    objects again (O(sequence) reads per meta object, O(sequence squared) over a stream's life)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
