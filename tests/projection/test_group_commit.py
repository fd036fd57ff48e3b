"""GroupCommit (the cadence group commit) and the grouped fact sink built on it, with real threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest

from activities.fact_sink import SINK_LANES, GroupedFactSink, fact_sink
from activities.group_commit import GroupCommit, wait
from activities.projection.model import BatchHeader, ProjectionBatch
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")


def _run(n: int, call: Any) -> list[Any]:
    out: list[Any] = [None] * n
    start = threading.Barrier(n)

    def one(i: int) -> None:
        start.wait()
        try:
            out[i] = call(i)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_callers_within_one_interval_share_one_flush_and_get_their_own_answers() -> None:
    flushes: list[list[int]] = []

    def flush(key: str, items: list[int]) -> list[int | BaseException]:
        flushes.append(items)
        return [ValueError(f"bad {i}") if i == 3 else i * 10 for i in items]

    group: GroupCommit[str, int, int] = GroupCommit(flush, interval_s=0.3)
    group.submit("k", 100)  # the first flush: no previous one to wait for
    t0 = time.monotonic()
    got = _run(6, lambda i: group.submit("k", i))
    assert [len(f) for f in flushes] == [1, 6] and time.monotonic() - t0 >= 0.25
    assert [g for i, g in enumerate(got) if i != 3] == [0, 10, 20, 40, 50]
    assert isinstance(got[3], ValueError) and str(got[3]) == "bad 3"  # only its own caller fails


def test_a_failing_flush_fails_every_caller_in_it_and_the_next_flush_works() -> None:
    calls = {"n": 0}

    def flush(key: str, items: list[int]) -> list[int | BaseException]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("store down")
        return items

    group: GroupCommit[str, int, int] = GroupCommit(flush, interval_s=0.0)
    with pytest.raises(RuntimeError):
        group.submit("k", 1)
    assert group.submit("k", 2) == 2


def test_a_caller_beats_while_it_waits_behind_a_slow_flush_and_gets_its_answer() -> None:
    """A Temporal activity waiting for its commit must heartbeat: the flush and its upkeep can
    outlast the activity's heartbeat timeout (the 60-minute soak of 2026-12-05)."""
    release = threading.Event()
    beats: list[float] = []

    def flush(key: str, items: list[int]) -> list[int]:
        release.wait(5)
        return [i * 2 for i in items]

    def beat() -> None:
        beats.append(time.monotonic())
        if len(beats) == 3:
            release.set()

    group: GroupCommit[str, int, int] = GroupCommit(flush, interval_s=0.0, beat=beat, beat_every_s=0.05)
    assert group.submit("k", 21) == 42
    assert len(beats) >= 3  # the flush answered only after the third beat
    silent: GroupCommit[str, int, int] = GroupCommit(lambda k, items: items, interval_s=0.0)
    assert silent.submit("k", 7) == 7  # no beat given: a plain wait


def test_wait_raises_a_timeout_the_flush_answered_instead_of_waiting_on() -> None:
    """A store's own TimeoutError is the answer, not the end of one beat's wait."""
    done: Future[int] = Future()
    done.set_exception(TimeoutError("the store's socket timed out"))
    beats: list[int] = []
    with pytest.raises(TimeoutError, match="socket"):
        wait(done, lambda: beats.append(1), every_s=0.01)
    assert beats == []
    later: Future[int] = Future()
    threading.Timer(0.2, later.set_exception, (TimeoutError("late"),)).start()
    with pytest.raises(TimeoutError, match="late"):
        wait(later, lambda: beats.append(1), every_s=0.02)
    assert beats  # it beat while the answer was not there yet


def _batch(batch_id: str, digest: str) -> ProjectionBatch:
    return ProjectionBatch(BatchHeader(batch_id, 1, 1, "calls_v1", "root", 0, digest, 1), b"ipc")


class Inner:
    """Boundary's answers per batch: a conflict for batch ids starting with 'x'."""

    def __init__(self) -> None:
        self.client = object()
        self.requests: list[list[str]] = []

    def active_generation(self, environment_id: str) -> int:
        return 1

    def answers(self, scope: Scope, batches: Sequence[ProjectionBatch]) -> list[Exception | None]:
        self.requests.append([b.header.batch_id for b in batches])
        return [RuntimeError("conflict") if b.header.batch_id.startswith("x") else None for b in batches]


def test_grouped_sink_sends_one_request_and_fails_only_the_conflicting_caller() -> None:
    inner = Inner()
    sink = GroupedFactSink(inner, interval_s=0.3)  # type: ignore[arg-type]
    sink.put_batches(SCOPE, [_batch("warm", "d")])
    shared = _batch("program-defs", "same")  # every caller's function definitions: sent once

    def put(i: int) -> None:
        own = _batch(("x" if i == 2 else "b") + str(i), "d")
        sink.put_batches(SCOPE, [own, shared])

    got = _run(5, put)
    assert len(inner.requests) == 2
    assert sorted(inner.requests[1]) == sorted(["b0", "b1", "x2", "b3", "b4", "program-defs"])
    assert [isinstance(g, RuntimeError) for g in got] == [False, False, True, False, False]


def test_the_workers_sink_sends_at_once_and_groups_what_comes_while_a_request_is_out() -> None:
    """No cadence of its own (Boundary holds one for every worker): a lone set goes at once, and
    the sets that come while a request is out go together in the next."""
    inner = Inner()
    out = threading.Event()
    released = threading.Event()
    answers = inner.answers

    def held(scope: Scope, batches: Sequence[ProjectionBatch]) -> list[Exception | None]:
        if not inner.requests:  # the first request stays out until released
            out.set()
            released.wait(10)
        return answers(scope, batches)

    inner.answers = held  # type: ignore[method-assign]
    sink = GroupedFactSink(inner)  # type: ignore[arg-type]  # no interval, as fact_sink builds it
    first = threading.Thread(target=sink.put_batches, args=(SCOPE, [_batch("first", "d")]))
    first.start()
    assert out.wait(10)
    later = [
        threading.Thread(target=sink.put_batches, args=(SCOPE, [_batch(f"b{i}", "d")])) for i in range(3)
    ]
    for t in later:
        t.start()
    time.sleep(0.2)  # all three queued behind the request that is out
    released.set()
    for t in [first, *later]:
        t.join(10)
    assert len(inner.requests) == 2 and sorted(inner.requests[1]) == ["b0", "b1", "b2"]
    started = time.monotonic()
    sink.put_batches(SCOPE, [_batch("alone", "d")])
    assert time.monotonic() - started < 5.0  # not held behind anything
    assert inner.requests[-1] == ["alone"]


def test_the_workers_sink_has_a_second_lane_so_a_set_joins_the_flush_boundary_holds() -> None:
    """Boundary holds a request until its next flush. The worker's sink has no cadence and two
    lanes: a set that comes while one request is out goes at once, in a second request that can
    join the same flush; only once both are out do sets wait, together, for the next request."""
    workers = fact_sink(object())
    assert isinstance(workers, GroupedFactSink)
    assert workers._group.interval_s == 0.0 and workers.lanes == SINK_LANES == 2
    inner = Inner()
    both_out = threading.Barrier(3, timeout=10)  # the two requests and this test
    released = threading.Event()
    answers = inner.answers
    sent = iter(range(100))
    lock = threading.Lock()

    def held(scope: Scope, batches: Sequence[ProjectionBatch]) -> list[Exception | None]:
        with lock:
            n = next(sent)
        if n < 2:  # the first two requests stay out until released
            both_out.wait()
            released.wait(10)
        return answers(scope, batches)

    inner.answers = held  # type: ignore[method-assign]
    sink = GroupedFactSink(inner, lanes=2)  # type: ignore[arg-type]
    first = [
        threading.Thread(target=sink.put_batches, args=(SCOPE, [_batch(name, "d")]))
        for name in ("one", "two")
    ]
    first[0].start()
    time.sleep(0.2)  # "one" is out before "two" comes
    first[1].start()
    both_out.wait()  # raises BrokenBarrierError unless "two" went while "one" was out
    later = [
        threading.Thread(target=sink.put_batches, args=(SCOPE, [_batch(f"b{i}", "d")])) for i in range(3)
    ]
    for t in later:
        t.start()
    time.sleep(0.2)  # all three queued behind the two requests that are out
    released.set()
    for t in [*first, *later]:
        t.join(10)
    assert sorted(map(sorted, inner.requests)) == [["b0", "b1", "b2"], ["one"], ["two"]]
    with pytest.raises(ValueError, match="lanes"):
        GroupedFactSink(inner, lanes=0)  # type: ignore[arg-type]


def test_one_caller_queues_several_keys_and_their_flushes_run_side_by_side() -> None:
    """A projection queues its seven datasets at once: their commits overlap, and the leaders are
    one thread per key, whatever the number of callers waiting."""
    both_started = threading.Barrier(2, timeout=5)
    leaders: set[threading.Thread] = set()  # the objects, so no id of an ended thread is reused

    def flush(key: str, items: list[int]) -> list[int]:
        leaders.add(threading.current_thread())
        if key in ("a", "b") and items[0] == 0:
            both_started.wait()  # raises BrokenBarrierError unless a's and b's flushes overlap
        return [i + 1 for i in items]

    group: GroupCommit[str, int, int] = GroupCommit(flush, interval_s=0.2)
    futures = [group.enqueue("a", 0), group.enqueue("b", 0)]
    assert [f.result(timeout=10) for f in futures] == [1, 1]
    # Items from 1 on: a flush whose first item is 0 waits at the barrier for the other key's, and
    # in this round the two keys' groups need not start with the same caller's item.
    got = _run(40, lambda i: [group.enqueue(k, i + 1) for k in "ab"])
    assert sorted(f.result(timeout=10) for fs in got for f in fs) == sorted(list(range(2, 42)) * 2)
    # A leader per key per busy period (4 here, unless a caller comes late), never one per caller (80).
    assert len(leaders) < 20
