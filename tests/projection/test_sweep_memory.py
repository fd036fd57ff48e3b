"""The sweep's memory of each stream between ticks (pure): where to list from, and which silent
streams it closed (activities/sweep_memory.py)."""

from __future__ import annotations

import datetime as dt

from activities.sweep_memory import RELIST_S, SweepMemory

T0 = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
A = "evidence/v1/t/p/e/streams/a/"


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_a_stream_is_listed_in_full_once_then_after_its_last_key() -> None:
    memory = SweepMemory()
    assert memory.start_after(A, 0.0) is None
    assert memory.listed(A, [], 0.0, full=True) is None  # no meta object yet: nothing kept
    assert memory.start_after(A, 1.0) is None
    seen = memory.listed(A, [(A + "meta/02", at(2)), (A + "meta/01", at(1))], 1.0, full=True)
    assert seen is not None and (seen.last_key, seen.newest) == (A + "meta/02", at(2))
    assert memory.start_after(A, 2.0) == A + "meta/02"
    seen = memory.listed(A, [], 2.0, full=False)  # nothing new: the stream's state stays
    assert seen is not None and (seen.last_key, seen.newest) == (A + "meta/02", at(2))
    seen = memory.listed(A, [(A + "meta/03", at(3))], 3.0, full=False)
    assert seen is not None and (seen.last_key, seen.newest) == (A + "meta/03", at(3))
    # Past RELIST_S since the last full listing, a tick lists the stream in full again (a segment
    # uploaded out of order would be missed by StartAfter), and that listing replaces the memory.
    assert memory.start_after(A, 1.0 + RELIST_S) is None
    seen = memory.listed(A, [(A + "meta/01", at(1))], 1.0 + RELIST_S, full=True)
    assert seen is not None and (seen.last_key, seen.newest, seen.listed_at) == (
        A + "meta/01",
        at(1),
        1.0 + RELIST_S,
    )


def test_a_closed_stream_stays_closed_until_something_arrives_or_the_generation_changes() -> None:
    memory = SweepMemory()
    memory.close(A, 1)  # a stream never listed: nothing to remember
    assert not memory.closed(A, 1)
    memory.listed(A, [(A + "meta/01", at(1))], 0.0, full=True)
    assert not memory.closed(A, 1)
    memory.close(A, 1)
    assert memory.closed(A, 1)
    assert not memory.closed(A, 2)  # a rebuild's generation has its own ledger: swept again
    memory.listed(A, [], 1.0, full=False)
    assert memory.closed(A, 1)
    memory.listed(A, [(A + "meta/02", at(2))], 2.0, full=False)
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
