"""Temporal activity heartbeats, callable from code that also runs outside an activity."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from temporalio import activity

from activities.group_commit import BEAT_EVERY_S, wait

R = TypeVar("R")


def heartbeat(*details: Any) -> None:
    """Heartbeat the current activity; nothing outside one (tests and benches call the same code)."""
    if activity.in_activity():
        activity.heartbeat(*details)


def beating(work: Callable[[], R], *details: Any, every_s: float = BEAT_EVERY_S) -> R:
    """``work()``'s answer, the activity heartbeating every ``every_s`` while it runs.

    For a step that is one long call into a store (a Lance index fold runs for minutes and has
    no callback to beat from): the call runs on a thread of its own, in this activity's context
    (so its own heartbeats still reach Temporal), while this thread beats. Then the activity's
    heartbeat timeout can be short: it needs to cover a beat, not the longest call, so an attempt
    on a worker that died is retried in minutes.
    """
    context = contextvars.copy_context()
    with ThreadPoolExecutor(1, thread_name_prefix="beating") as pool:
        return wait(pool.submit(context.run, work), lambda: heartbeat(*details), every_s)
