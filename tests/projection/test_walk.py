"""The bounded meta walk-back: plan and scan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from projection_builders import EUID, PROGRAM, ROOT

from activities.projection.model import MetaProblem
from activities.projection.walk import (
    MAX_WALK,
    REASON_BOUND,
    REASON_GAP,
    REASON_STREAM_START,
    LruCache,
    find_root_context,
    plan_meta_walk,
)
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
    assert ctx.complete and ctx.reason is None
    assert (ctx.root_started, ctx.engine_started) == (START, ENGINE)
    assert consumed == [6, 5, 4, 3] == list(ctx.sequences_read)
    assert ctx.stream_started is None  # sequence 1 is read by key, separately


def test_walk_reaching_sequence_one_picks_up_stream_started() -> None:
    ctx = find_root_context([seg(2, START), seg(1, STREAM, ENGINE)], ROOT)
    assert ctx.complete and ctx.stream_started == STREAM


def test_gap_stops_the_walk() -> None:
    ctx = find_root_context([seg(3, START), MetaProblem(2), seg(1, STREAM, ENGINE)], ROOT)
    assert (ctx.complete, ctx.reason, ctx.sequences_read) == (False, REASON_GAP, (3, 2))
    skipped = find_root_context([seg(3, START), seg(1, STREAM, ENGINE)], ROOT)
    assert (skipped.complete, skipped.reason) == (False, REASON_GAP)


def test_bound_exhaustion() -> None:
    segments = (seg(s, START if s == 9 else OTHER_START) for s in plan_meta_walk(9))
    ctx = find_root_context(segments, ROOT, max_walk=4)
    assert (ctx.complete, ctx.reason, len(ctx.sequences_read)) == (False, REASON_BOUND, 4)
    assert ctx.root_started == START and ctx.engine_started is None


def test_stream_start_reached_without_records() -> None:
    ctx = find_root_context([seg(2, OTHER_START), seg(1, STREAM, ENGINE)], ROOT)
    assert (ctx.complete, ctx.reason) == (False, REASON_STREAM_START)
    assert ctx.engine_started == ENGINE and ctx.root_started is None


def test_lost_root_started_needs_only_the_engine() -> None:
    ctx = find_root_context([seg(3), seg(2, ENGINE), seg(1, STREAM)], ROOT, need_root_started=False)
    assert ctx.complete and ctx.engine_started == ENGINE and ctx.sequences_read == (3, 2)


def test_lru_cache_forgets_the_least_recently_used_first() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2
