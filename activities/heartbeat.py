"""Temporal activity heartbeats, callable from code that also runs outside an activity."""

from __future__ import annotations

from typing import Any

from temporalio import activity


def heartbeat(*details: Any) -> None:
    """Heartbeat the current activity; nothing outside one (tests and benches call the same code)."""
    if activity.in_activity():
        activity.heartbeat(*details)
