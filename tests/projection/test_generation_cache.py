"""The worker asks Boundary for an environment's active generation at most once per TTL, sees a
switch once the TTL has passed, and asks once for all the activities waiting at expiry."""

from __future__ import annotations

import threading
import time

from activities.generation_cache import ActiveGenerations

THREADS = 16


def _all_arrived(arrived: threading.Semaphore) -> None:
    """Hold the question until every thread is about to ask, and a moment for the last ones to
    reach the cache: they must find the question in flight, not ask again."""
    for _ in range(THREADS):
        assert arrived.acquire(timeout=10)
    time.sleep(0.2)


class _Boundary:
    def __init__(self) -> None:
        self.active = {"env-a": 1, "env-b": 7}
        self.asked: list[str] = []

    def fetch(self, environment_id: str) -> int:
        self.asked.append(environment_id)
        return self.active[environment_id]


def test_one_question_per_environment_within_the_ttl_and_a_switch_seen_after_it() -> None:
    boundary, now = _Boundary(), [100.0]
    cache = ActiveGenerations(boundary.fetch, ttl_s=1.0, clock=lambda: now[0])
    assert [cache.get("env-a") for _ in range(5)] == [1] * 5
    assert cache.get("env-b") == 7
    assert boundary.asked == ["env-a", "env-b"]

    boundary.active["env-a"] = 2  # a rebuild switched generations
    now[0] += 0.9
    assert cache.get("env-a") == 1  # still inside the TTL: Boundary refuses stale batches itself
    now[0] += 0.1
    assert cache.get("env-a") == 2
    assert boundary.asked == ["env-a", "env-b", "env-a"]


def test_a_ttl_of_zero_asks_every_time() -> None:
    boundary = _Boundary()
    cache = ActiveGenerations(boundary.fetch, ttl_s=0.0)
    for _ in range(3):
        assert cache.get("env-a") == 1
    assert boundary.asked == ["env-a"] * 3


def test_a_failed_question_is_asked_again_by_the_next_caller() -> None:
    boundary, calls = _Boundary(), [0]

    def flaky(environment_id: str) -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("boundary unreachable")
        return boundary.fetch(environment_id)

    cache = ActiveGenerations(flaky, ttl_s=60.0)
    try:
        cache.get("env-a")
    except ConnectionError:
        pass
    else:
        raise AssertionError("the first question's failure must reach its caller")
    assert cache.get("env-a") == 1
    assert calls[0] == 2


def test_activities_waiting_at_expiry_share_one_question() -> None:
    boundary = _Boundary()
    arrived = threading.Semaphore(0)

    def slow(environment_id: str) -> int:
        _all_arrived(arrived)
        return boundary.fetch(environment_id)

    cache = ActiveGenerations(slow, ttl_s=60.0)
    got: list[int] = []

    def ask() -> None:
        arrived.release()
        got.append(cache.get("env-a"))

    threads = [threading.Thread(target=ask) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [1] * THREADS
    assert boundary.asked == ["env-a"]


def test_activities_waiting_on_a_failing_question_share_its_failure() -> None:
    arrived, calls = threading.Semaphore(0), [0]

    def unreachable(environment_id: str) -> int:
        calls[0] += 1
        _all_arrived(arrived)
        raise ConnectionError("boundary unreachable")

    cache = ActiveGenerations(unreachable, ttl_s=60.0)
    failures: list[BaseException] = []

    def ask() -> None:
        arrived.release()
        try:
            cache.get("env-a")
        except ConnectionError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(failures) == THREADS
    assert calls[0] == 1
