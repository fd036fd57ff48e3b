"""The bounded meta walk-back: plan and scan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from projection_builders import EUID, PROGRAM, ROOT

from activities.projection.model import ENGINE_ABSENT, ENGINE_NOT_REGISTERED, MetaProblem
from activities.projection.walk import (
    MAX_WALK,
    find_root_context,
    plan_meta_walk,
)
from api.common.lru import LruCache
from formats.ids import ThreadRef
from formats.meta_segment import EngineStarted, MetaSegment, RootStarted, StreamStarted

STREAM = StreamStarted(1, 10, "v", "arch")
ENGINE = EngineStarted(ROOT.engine_id, PROGRAM)
OTHER_ENGINE = EngineStarted(ROOT.engine_id + 1, PROGRAM)
START = RootStarted(ROOT, 5, b"\x00" * 16)
OTHER_START = RootStarted(ThreadRef(EUID, ROOT.engine_id, ROOT.thread_id + 1), 5, b"\x00" * 16)


def seg(seq: int, *records: object) -> MetaSegment:
    return MetaSegment(seq, EUID, 0, tuple(records))  # type: ignore[arg-type]


def test_plan_is_newest_first_and_bounded() -> None:
    assert plan_meta_walk(5) == (5, 4, 3, 2, 1)
    long = plan_meta_walk(5000)
    assert len(long) == MAX_WALK and long[0] == 5000 and long[-1] == 3001
    assert plan_meta_walk(10, max_walk=3) == (10, 9, 8)
    with pytest.raises(ValueError):
        plan_meta_walk(0)
    with pytest.raises(ValueError):
        plan_meta_walk(3, max_walk=0)


def test_finds_both_records_and_stops_reading() -> None:
    consumed: list[int] = []

    def segments() -> Iterator[MetaSegment]:
        for s in (seg(6), seg(5, START), seg(4, OTHER_ENGINE), seg(3, ENGINE), seg(2), seg(1, STREAM)):
            consumed.append(s.sequence)
            yield s

    ctx = find_root_context(segments(), ROOT)
    assert (ctx.root_started, ctx.root_started_seq, ctx.engine_started) == (START, 5, ENGINE)
    assert ctx.gaps == () and ctx.engine_missing is None
    assert consumed == [6, 5, 4, 3] == list(ctx.sequences_read)
    assert ctx.stream_started is None  # sequence 1 is read by key, separately


def test_walk_reaching_sequence_one_picks_up_stream_started() -> None:
    ctx = find_root_context([seg(2, START), seg(1, STREAM, ENGINE)], ROOT)
    assert ctx.engine_started == ENGINE and ctx.stream_started == STREAM


def test_gap_before_the_root_started_stops_its_search() -> None:
    ctx = find_root_context([seg(3), MetaProblem(2), seg(1, STREAM, ENGINE, START)], ROOT)
    # The RootStarted below the gap is not taken: the gap lies between it and RootEnded.
    assert (ctx.root_started, ctx.gaps) == (None, (2,))
    assert ctx.engine_started == ENGINE  # the engine search walks on through gaps
    skipped = find_root_context([seg(3), seg(1, STREAM, ENGINE, START)], ROOT)
    assert (skipped.root_started, skipped.gaps, skipped.sequences_read) == (None, (2,), (3, 2, 1))


def test_gap_below_the_root_started_does_not_count() -> None:
    ctx = find_root_context([seg(3, START), MetaProblem(2), seg(1, STREAM, ENGINE)], ROOT)
    assert (ctx.root_started_seq, ctx.gaps, ctx.engine_started) == (3, (), ENGINE)


def test_bound_exhaustion() -> None:
    segments = (seg(s, START if s == 9 else OTHER_START) for s in plan_meta_walk(9))
    ctx = find_root_context(segments, ROOT, max_walk=4)
    assert len(ctx.sequences_read) == 4
    assert ctx.root_started == START and ctx.engine_started is None
    assert ctx.engine_missing == ENGINE_NOT_REGISTERED  # may still be registered: pending


def test_registry_answers_the_engine_beyond_the_bound() -> None:
    asked: list[int] = []

    def lookup(engine_id: int) -> EngineStarted | None:
        asked.append(engine_id)
        return ENGINE

    consumed: list[int] = []

    def segments() -> Iterator[MetaSegment]:
        for s in plan_meta_walk(9000):
            consumed.append(s)
            yield seg(s, START) if s == 8999 else seg(s)

    ctx = find_root_context(segments(), ROOT, engine_lookup=lookup)
    assert (ctx.root_started_seq, ctx.engine_started, ctx.engine_missing) == (8999, ENGINE, None)
    assert asked == [ROOT.engine_id] and consumed == [9000, 8999]  # O(1): no walk to the engine


def test_stream_start_reached_without_records() -> None:
    ctx = find_root_context([seg(2, OTHER_START), seg(1, STREAM, ENGINE)], ROOT)
    assert ctx.engine_started == ENGINE and ctx.root_started is None and ctx.root_started_seq is None


def test_engine_absent_from_the_whole_stream() -> None:
    ctx = find_root_context([seg(2, START), seg(1, STREAM)], ROOT, engine_lookup=lambda _: None)
    assert ctx.engine_missing == ENGINE_ABSENT


def test_lost_root_started_needs_only_the_engine() -> None:
    ctx = find_root_context([seg(3), MetaProblem(2), seg(1, STREAM, ENGINE)], ROOT, need_root_started=False)
    assert ctx.engine_started == ENGINE and ctx.root_started is None
    assert ctx.gaps == (2,)  # recorded, but below the RootEnded's own sequence: no shadow


def test_lru_cache_forgets_the_least_recently_used_first() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2
