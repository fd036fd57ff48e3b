"""The stack's moto dispatch patch answers what moto's own directory listing answers, once."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from moto import backends

from worker.stack import moto_dispatch_speedup

ORIGINAL = backends.list_of_moto_modules


@pytest.fixture
def restore() -> Iterator[None]:
    yield
    backends.list_of_moto_modules = ORIGINAL  # type: ignore[assignment]
    moto_dispatch_speedup._applied = False


def test_the_cached_listing_names_what_moto_lists(restore: None) -> None:
    # Compared with moto's own code, not with an earlier application of the patch in this process.
    assert ORIGINAL.__module__ == "moto.backends"
    expected = set(ORIGINAL())
    assert {"s3", "sqs"} <= expected
    moto_dispatch_speedup.apply()
    assert backends.list_of_moto_modules is not ORIGINAL
    assert set(backends.list_of_moto_modules()) == expected
    assert "s3" in backends.list_of_moto_modules()


def test_the_directory_is_listed_once(restore: None, monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[str] = []
    real = os.listdir

    def counting(path: str) -> list[str]:
        listed.append(path)
        return real(path)

    monkeypatch.setattr(os, "listdir", counting)
    moto_dispatch_speedup.apply()
    for _ in range(50):
        assert "s3" in backends.list_of_moto_modules()
    assert len(listed) == 1
