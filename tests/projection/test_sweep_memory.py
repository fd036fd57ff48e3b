"""The sweep's memory of each stream between ticks (pure): where to list from, which silent streams
it closed, and what of them it keeps in the bucket (activities/sweep_memory.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from activities.sweep_memory import RELIST_S, SweepMemory, decode_state, encode_state
from formats import object_keys

T0 = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
SCOPE = object_keys.Scope("t", "p", "e")
EUID = "a" * 32
A = object_keys.stream_prefix(SCOPE, EUID)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def meta(seq: int) -> tuple[str, dt.datetime]:
    """Stream A's meta object ``seq``, as a listing gives it (key, LastModified)."""
    return object_keys.meta_segment_key(SCOPE, EUID, seq), at(seq)


def test_a_stream_is_listed_in_full_once_then_after_its_last_key() -> None:
    memory = SweepMemory()
    assert memory.start_after(A, 0.0) is None
    assert memory.listed(A, [], 0.0, full=True) is None  # no meta object yet: nothing kept
    assert memory.start_after(A, 1.0) is None
    seen = memory.listed(A, [meta(2), meta(1)], 1.0, full=True)
    assert seen is not None and (seen.last_key, seen.newest, seen.keys) == (meta(2)[0], at(2), 2)
    assert memory.start_after(A, 2.0) == meta(2)[0]
    seen = memory.listed(A, [], 2.0, full=False)  # nothing new: the stream's state stays
    assert seen is not None and (seen.last_key, seen.newest, seen.keys) == (meta(2)[0], at(2), 2)
    seen = memory.listed(A, [meta(3)], 3.0, full=False)
    assert seen is not None and (seen.last_key, seen.newest, seen.keys) == (meta(3)[0], at(3), 3)
    # Sequences 1 to 3 without a gap: no earlier key can arrive, so StartAfter sees all, for ever.
    assert memory.start_after(A, 1.0 + 100 * RELIST_S) == meta(3)[0]


def test_a_stream_with_a_gap_is_listed_in_full_again_after_relist_s() -> None:
    # Sequence 2 is missing: a repair could upload it later, which StartAfter would pass over.
    memory = SweepMemory()
    memory.listed(A, [meta(1), meta(3)], 1.0, full=True)
    assert memory.start_after(A, RELIST_S) == meta(3)[0]
    assert memory.start_after(A, 1.0 + RELIST_S) is None
    memory.close(A, 1)
    # A full listing that finds the same keys keeps the stream closed: its segments are not read again.
    memory.listed(A, [meta(1), meta(3)], 1.0 + RELIST_S, full=True)
    assert memory.closed(A, 1)
    assert memory.start_after(A, 2.0 + RELIST_S) == meta(3)[0]  # listed in full an hour ago
    # The repair arrives: the next full listing finds it, and the stream is swept again.
    memory.listed(A, [meta(1), meta(2), meta(3)], 1.0 + 2 * RELIST_S, full=True)
    assert not memory.closed(A, 1)
    assert memory.start_after(A, 1.0 + 10 * RELIST_S) == meta(3)[0]  # no gap left


def test_a_closed_stream_stays_closed_until_something_arrives_or_the_generation_changes() -> None:
    memory = SweepMemory()
    assert memory.close(A, 1) is None  # a stream never listed: nothing to remember
    assert not memory.closed(A, 1)
    memory.listed(A, [meta(1)], 0.0, full=True)
    assert not memory.closed(A, 1)
    memory.close(A, 1)
    assert memory.closed(A, 1)
    assert not memory.closed(A, 2)  # a rebuild's generation has its own ledger: swept again
    memory.listed(A, [], 1.0, full=False)
    assert memory.closed(A, 1)
    memory.listed(A, [meta(2)], 2.0, full=False)
    assert not memory.closed(A, 1)  # a meta object arrived since the tick that closed it
    memory.close(A, 1)
    assert memory.closed(A, 1)


def test_the_memory_keeps_the_streams_used_last() -> None:
    memory = SweepMemory(max_streams=2)
    for name in ("a", "b", "c"):
        memory.listed(name, [(name + "/meta/01", at(1))], 0.0, full=True)
    assert memory.start_after("a", 1.0) is None  # forgotten: listed in full again
    assert memory.start_after("b", 1.0) == "b/meta/01"
    assert memory.start_after("c", 1.0) == "c/meta/01"


def test_a_closed_streams_state_read_back_by_another_worker_closes_it_there() -> None:
    first = SweepMemory()
    first.listed(A, [meta(1), meta(2)], 0.0, full=True)
    closed = first.close(A, 3)
    assert closed is not None
    data = encode_state(closed)
    assert meta(1)[0] not in data.decode()  # the last key, not the stream's listing

    other = SweepMemory()  # a worker that starts
    assert not other.knows(A)
    recalled = decode_state(data, A, 50.0)
    assert recalled is not None
    other.recall(A, recalled)
    assert other.knows(A) and other.closed(A, 3) and not other.closed(A, 4)
    assert other.start_after(A, 51.0) == meta(2)[0]
    seen = other.listed(A, [], 51.0, full=False)
    assert seen is not None and (seen.newest, seen.keys) == (at(2), 2)
    assert other.closed(A, 3)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"last_key": 1, "newest": "2026-12-06T00:00:00+00:00", "keys": 1, "closed_generation": 1}',
        b'{"last_key": "x", "newest": "2026-12-06T00:00:00+00:00", "keys": 1, "closed_generation": 1}',
        b'{"newest": "2026-12-06T00:00:00+00:00", "keys": 1, "closed_generation": 1}',
    ],
)
def test_an_unreadable_state_is_a_stream_not_seen_yet(data: bytes) -> None:
    assert decode_state(data, A, 0.0) is None


def test_a_state_of_another_stream_is_not_taken() -> None:
    memory = SweepMemory()
    memory.listed(A, [meta(1)], 0.0, full=True)
    closed = memory.close(A, 1)
    assert closed is not None
    other_stream = object_keys.stream_prefix(SCOPE, "b" * 32)
    assert decode_state(encode_state(closed), other_stream, 0.0) is None


def test_only_a_closed_stream_has_a_state_to_keep() -> None:
    memory = SweepMemory()
    seen = memory.listed(A, [meta(1)], 0.0, full=True)
    assert seen is not None
    with pytest.raises(ValueError, match="closed"):
        encode_state(seen)


def test_a_known_stream_takes_another_workers_closing_only_for_the_same_meta_objects() -> None:
    closer = SweepMemory()
    closer.listed(A, [meta(1), meta(2)], 0.0, full=True)
    closed = closer.close(A, 1)
    assert closed is not None
    state = decode_state(encode_state(closed), A, 10.0)
    assert state is not None

    same = SweepMemory()  # listed the stream before the other worker closed it
    same.listed(A, [meta(1), meta(2)], 5.0, full=True)
    same.recall(A, state)
    assert same.closed(A, 1)

    ahead = SweepMemory()  # has listed a meta object that arrived after the closing
    ahead.listed(A, [meta(1), meta(2), meta(3)], 5.0, full=True)
    ahead.recall(A, state)
    assert not ahead.closed(A, 1)
    assert ahead.start_after(A, 6.0) == meta(3)[0]  # its own listing stands
