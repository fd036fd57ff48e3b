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
    held.extended("a", sent_at=21, timeout=60)  # b's call failed: nothing recorded
    assert held.due(now=22) == ["b"]
    assert held.due(now=41) == ["b", "a"]


def test_a_released_message_is_never_due_and_a_late_success_for_it_is_ignored() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.release("a")
    held.extended("a", sent_at=30, timeout=60)
    assert held.due(now=100) == [] and len(held) == 0


def test_a_timeout_that_ran_out_is_counted_once_and_again_only_after_a_new_lapse() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.hold("b", now=50)
    assert held.due(now=59) == ["a"] and held.lapsed == 0
    assert held.due(now=61) == ["a"] and held.lapsed == 1
    assert held.due(now=70) == ["a", "b"] and held.lapsed == 1  # the same lapse; b not run out
    held.extended("a", sent_at=71, timeout=60)
    assert held.due(now=132) == ["b", "a"] and held.lapsed == 3  # b ran out, and a again


def test_a_started_message_is_lengthened_at_once_then_extended_a_third_of_its_timeout_on() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60, started_timeout_s=600)
    held.hold("a", now=0)
    held.hold("b", now=0)
    held.started("a")
    # a's workflow started: due now, whatever its clock, for the longer timeout; b keeps the short one.
    assert held.due(now=1) == ["a"]
    assert held.timeout_for("a") == 600 and held.timeout_for("b") == 60
    held.extended("a", sent_at=1, timeout=600)
    assert held.due(now=25) == ["b"]
    held.extended("b", sent_at=25, timeout=60)
    # 200 s (a third of 600) after its last setting, not 20: ten times fewer calls while it runs.
    assert "a" not in held.due(now=200)
    assert held.due(now=201) == ["a", "b"]
    assert held.lapsed == 1  # b, last set at 25, ran out at 85
    held.release("a")
    held.started("a")  # a late start of a message already disposed of changes nothing
    assert held.timeout_for("a") == 60 and "a" not in held.due(now=1000)


def test_without_a_started_timeout_a_start_changes_nothing() -> None:
    held = HeldVisibility(every_s=20, timeout_s=60)
    held.hold("a", now=0)
    held.started("a")
    assert held.due(now=1) == [] and held.timeout_for("a") == 60
