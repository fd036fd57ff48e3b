"""The per-token bucket, driven by an injected clock."""

from __future__ import annotations

import pytest

from api.gateway.rate_limit import TokenBucketLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_refill_at_rate() -> None:
    clock = Clock()
    limiter = TokenBucketLimiter(2.0, 3, clock=clock)
    assert [limiter.acquire("a").allowed for _ in range(4)] == [True, True, True, False]
    denied = limiter.acquire("a")
    assert denied.retry_after_seconds == pytest.approx(0.5)
    assert denied.retry_after_header == "1"
    clock.now = 0.5
    assert limiter.acquire("a").allowed
    assert not limiter.acquire("a").allowed
    clock.now = 100.0  # refills up to the burst, never beyond
    assert [limiter.acquire("a").allowed for _ in range(4)] == [True, True, True, False]


def test_keys_are_independent_and_bounded() -> None:
    clock = Clock()
    limiter = TokenBucketLimiter(1.0, 1, max_keys=3, clock=clock)
    assert limiter.acquire("a").allowed
    assert not limiter.acquire("a").allowed
    assert limiter.acquire("b").allowed
    for key in ("c", "d", "e"):
        limiter.acquire(key)
    assert len(limiter) == 3
    assert limiter.acquire("a").allowed  # evicted as least recently used: starts full again


def test_retry_after_is_whole_seconds() -> None:
    limiter = TokenBucketLimiter(0.1, 1, clock=Clock())
    limiter.acquire("a")
    assert limiter.acquire("a").retry_after_header == "10"


def test_rejects_impossible_settings() -> None:
    with pytest.raises(ValueError):
        TokenBucketLimiter(0, 1)
    with pytest.raises(ValueError):
        TokenBucketLimiter(1, 0)
