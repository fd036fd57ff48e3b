"""The meta walk-back: which meta sequences to read for a RootEnded, and what they held.

Contract step 1: the projector reads meta sequence 1 by key (StreamStarted, the clock
origin), then walks back from the RootEnded's own meta sequence, by key in descending order,
to the execution's RootStarted. That walk is bounded to ``max_walk`` meta objects (2,000): the
RootStarted sits near its RootEnded. The EngineStarted does not: the real writer emits it once
per engine, at activation, so after the walk it comes from the engine registry
(activities/engine_registry.py) when the walk did not pass it.

What the walk meets decides the index state by the reader's rules
(:func:`formats.reader_rules.index_state`): an unreadable sequence before the RootStarted is a
gap strictly between RootStarted and RootEnded, or the RootStarted was in it; either way the
execution is ``index_corrupt``, so the RootStarted search stops there. So does a walk that
exhausts its bound or reaches sequence 1 without the RootStarted (a RootEnded without
RootStarted, flag bit 0 clear). When RootEnded says the RootStarted was lost (flag bit 0), no
RootStarted is looked for and gaps do not matter.

The engine: found in a walked segment, else by ``engine_lookup`` (the registry), else by
walking on (still within ``max_walk``, through gaps) in case the registry has not caught up
with an earlier meta object that arrived late. Not found: ``ENGINE_NOT_REGISTERED`` (the
execution is pending and retried) unless the walk read the stream down to sequence 1, in which
case it will never appear (``ENGINE_ABSENT``: projected without a function table, as the
upstream reader shows function labels NULL).

Pure: the caller passes segments (decoded by the I/O layer) lazily, in the order
:func:`plan_meta_walk` gives, and :func:`find_root_context` stops consuming as soon as it
has what it needs. A caller walking the same segments for many roots (one meta object's
executions) passes each segment's :class:`MetaIndex` instead, built once with
:func:`index_meta_segment`, so a walk step is a dictionary lookup, not a scan of the records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from activities.projection.model import ENGINE_ABSENT, ENGINE_NOT_REGISTERED, MetaProblem, RootContext
from formats.ids import ThreadRef
from formats.meta_segment import EngineStarted, MetaSegment, RootStarted, StreamStarted

MAX_WALK = 2000


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
    engine_lookup: Callable[[int], EngineStarted | None] | None = None,
) -> RootContext:
    """Scan ``segments`` (newest first, as :func:`plan_meta_walk` orders them) for the root's records.

    Consumes only as many segments as needed. ``stream_started`` is the record from meta
    sequence 1 when the caller already read it; the walk also picks it up if it reaches 1.
    ``engine_lookup`` answers an engine id from the registry (None: not registered).
    """
    root_started: RootStarted | None = None
    root_started_seq: int | None = None
    engine_started: EngineStarted | None = None
    read: list[int] = []
    gaps: list[int] = []
    looking_for_root = need_root_started
    reached_start = False
    previous: int | None = None
    walk = iter(segments)

    pushed_back: list[MetaSegment | MetaIndex | MetaProblem] = []

    def step() -> MetaIndex | MetaProblem | None:
        nonlocal previous, reached_start
        if len(read) >= max_walk or reached_start:
            return None
        item = pushed_back.pop() if pushed_back else next(walk, None)
        if item is None:
            return None
        if previous is not None and item.sequence != previous - 1:
            # The caller skipped a sequence: the same as a gap in the stream.
            pushed_back.append(item)
            item = MetaProblem(previous - 1)
        previous = item.sequence
        read.append(item.sequence)
        reached_start = item.sequence == 1
        if isinstance(item, MetaProblem):
            gaps.append(item.sequence)
            return item
        return item if isinstance(item, MetaIndex) else index_meta_segment(item)

    def absorb(index: MetaIndex) -> None:
        nonlocal engine_started, stream_started
        if engine_started is None:
            engine_started = index.engine_started.get(root.engine_id)
        if stream_started is None:
            stream_started = index.stream_started

    # 1. The RootStarted (or, when it was lost, just the RootEnded's own segment).
    while True:
        item = step()
        if item is None or isinstance(item, MetaProblem):
            break  # bound, stream start or a gap: without a RootStarted the execution is index_corrupt
        absorb(item)
        if looking_for_root:
            root_started = item.root_started.get(root)
            if root_started is not None:
                root_started_seq = item.sequence
                break
        else:
            break
    # 2. The engine: walked past, registered, or further back within the bound.
    if engine_started is None and engine_lookup is not None:
        engine_started = engine_lookup(root.engine_id)
    while engine_started is None:
        item = step()
        if item is None:
            break
        if not isinstance(item, MetaProblem):
            absorb(item)
    missing = None
    if engine_started is None:
        missing = ENGINE_ABSENT if reached_start else ENGINE_NOT_REGISTERED
    return RootContext(
        root_started,
        engine_started,
        stream_started,
        tuple(read),
        root_started_seq,
        # Gaps below a RootStarted that was found (met while looking for the engine) do not count.
        tuple(g for g in gaps if root_started_seq is None or g > root_started_seq),
        missing,
    )
