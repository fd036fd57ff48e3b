"""The upstream reader's index rules (formats/reader_rules.py), case by case."""

from __future__ import annotations

import pytest

from formats import reader_rules as rr


@pytest.mark.parametrize(
    ("started", "ended", "lost", "gaps", "intact", "want"),
    [
        (3, 7, False, [], True, rr.COMPLETE),
        (3, 3, False, [], True, rr.COMPLETE),
        (3, 7, False, [5], True, rr.INDEX_CORRUPT),  # gap strictly between
        (3, 7, False, [3, 7, 2, 8], True, rr.COMPLETE),  # gaps outside (or on) the pair do not shadow
        (3, None, False, [9], True, rr.INDEX_CORRUPT),  # gap after RootStarted, no RootEnded
        (3, None, False, [2], True, rr.NO_ROOT_ENDED),
        (None, 7, False, [], True, rr.INDEX_CORRUPT),  # RootEnded without RootStarted, bit 0 clear
        (None, 7, True, [1, 2, 3, 6], True, rr.ROOT_STARTED_LOST),  # bit 0 set: RootStarted not needed
        (3, 7, True, [], True, rr.ROOT_STARTED_LOST),
        (3, 7, False, [], False, rr.INDEX_CORRUPT),  # the contract's data rule
        (None, 7, True, [], False, rr.INDEX_CORRUPT),
    ],
)
def test_index_state(started, ended, lost, gaps, intact, want) -> None:
    got = rr.index_state(
        started_seq=started, ended_seq=ended, root_started_lost=lost, gaps=gaps, data_intact=intact
    )
    assert got == want


def test_gaps_missing_and_undecodable_interior() -> None:
    # 1..6: 3 missing, 4 present but undecodable, 6 the tail and undecodable.
    present = [1, 2, 4, 5, 6]
    decoded = [1, 2, 5]
    assert rr.index_gaps(6, decoded, present, alive=False) == [3, 4, 6]
    # Alive: the torn tail is ignored, and so is anything above the newest decoded sequence.
    assert rr.index_gaps(6, decoded, present, alive=True) == [3, 4]


def test_gaps_above_newest_decoded_of_live_stream_are_ignored() -> None:
    assert rr.index_gaps(5, [1, 2], [1, 2, 4, 5], alive=True) == []
    assert rr.index_gaps(5, [1, 2], [1, 2, 4, 5], alive=False) == [3, 4, 5]
