"""The bridge's clock of held messages' visibility (worker/bridge/visibility.py), without servers."""

from __future__ import annotations

from worker.bridge.visibility import HeldVisibility


def test_a_message_is_due_an_interval_after_its_visibility_was_set_the_longest_waiting_first() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("b", now=5)
    held.hold("a", now=0)
    held.hold("c", now=15)
    assert held.due(now=19) == []
    assert held.due(now=25) == ["a", "b"]
    assert held.due(now=40) == ["a", "b", "c"]


def test_an_extension_resets_the_clock_and_a_failed_one_leaves_the_message_due() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.hold("b", now=0)
    held.extended("a", sent_at=21)  # b's call failed: nothing recorded
    assert held.due(now=22) == ["b"]
    assert held.due(now=41) == ["b", "a"]


def test_a_released_message_is_never_due_and_a_late_success_for_it_is_ignored() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.release("a")
    held.extended("a", sent_at=30)
    assert held.due(now=100) == [] and len(held) == 0


def test_a_timeout_that_ran_out_is_counted_once_and_again_only_after_a_new_lapse() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.hold("b", now=50)
    assert held.due(now=59) == ["a"] and held.lapsed == 0
    assert held.due(now=61) == ["a"] and held.lapsed == 1
    assert held.due(now=70) == ["a", "b"] and held.lapsed == 1  # the same lapse; b not run out
    held.extended("a", sent_at=71)
    assert held.due(now=132) == ["b", "a"] and held.lapsed == 3  # b ran out, and a again
