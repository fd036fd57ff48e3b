"""The sink's set splitting (pure): consecutive, order-preserving, under both caps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from activities.fact_sink import chunks
from activities.projection.model import BatchHeader, ProjectionBatch


def _batch(i: int, size: int) -> ProjectionBatch:
    return ProjectionBatch(
        BatchHeader(f"b{i}", 1, 1, "calls_v1", "r", 0, "sha256:" + "0" * 64, 1), b"x" * size
    )


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50), max_size=40),
    max_bytes=st.integers(1, 120),
    max_batches=st.integers(1, 7),
)
def test_chunks_keep_order_and_respect_caps(sizes: list[int], max_bytes: int, max_batches: int) -> None:
    batches = [_batch(i, n) for i, n in enumerate(sizes)]
    parts = list(chunks(batches, max_bytes, max_batches))
    assert [b for p in parts for b in p] == batches
    for part in parts:
        assert 1 <= len(part) <= max_batches
        # Only a lone batch may exceed the byte cap (it cannot be split).
        assert len(part) == 1 or sum(len(b.ipc) for b in part) <= max_bytes
