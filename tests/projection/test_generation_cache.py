"""The worker asks Boundary for an environment's active generation at most once per TTL, sees a
switch once the TTL has passed, and asks once for all the activities waiting at expiry."""

from __future__ import annotations

import threading
import time

from activities.generation_cache import ActiveGenerations


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
    gate = threading.Event()

    def slow(environment_id: str) -> int:
        gate.wait(5)
        time.sleep(0.05)
        return boundary.fetch(environment_id)

    cache = ActiveGenerations(slow, ttl_s=60.0)
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("env-a"))) for _ in range(16)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert got == [1] * 16
    assert boundary.asked == ["env-a"]
