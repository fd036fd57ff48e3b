"""Whether the bridge delivers: what it writes into its heartbeat, and the verdict read from it.

A fresh heartbeat only proves the bridge's heartbeat task runs. Delivery is judged from three
figures the bridge records beside it:

* ``last_received_at``: when a receive last returned at least one message;
* ``last_handled_at``: when the handling of a message last ended (deleted, dead-lettered or
  left for retry);
* ``visible_since``: since when the projection queue has continuously shown visible messages
  (reset when it shows none).

SQS has no queue attribute for the age of the oldest message (``ApproximateAgeOfOldestMessage``
is a CloudWatch metric, and moto has none), so the wait of the oldest visible message is
bounded from these: messages have been visible since ``visible_since`` and none was taken since
``last_received_at``, so the oldest has waited at least ``now - max(visible_since,
last_received_at)``. A bridge whose receive loop stopped (slots never freed, a hung call) keeps
heartbeating while that wait grows past the threshold: unhealthy.

Pure: clocks come in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_STALL_AFTER_S = 60.0  # visible messages untaken this long: the bridge does not deliver


@dataclass
class DeliveryClock:
    """The bridge's own record of delivery (unix seconds; None: never)."""

    last_received_at: float | None = None
    last_handled_at: float | None = None
    visible_since: float | None = None
    received: int = 0
    handled: int = 0

    def saw_queue(self, visible: int, now: float) -> None:
        if visible <= 0:
            self.visible_since = None
        elif self.visible_since is None:
            self.visible_since = now

    def took(self, messages: int, now: float) -> None:
        if messages > 0:
            self.last_received_at = now
            self.received += messages

    def finished(self, now: float) -> None:
        self.last_handled_at = now
        self.handled += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "last_received_at": self.last_received_at,
            "last_handled_at": self.last_handled_at,
            "visible_since": self.visible_since,
            "received": self.received,
            "handled": self.handled,
        }


@dataclass(frozen=True)
class DeliveryFigures:
    """What ``stack status`` and ``baml-studio status`` show (seconds; None: not known or never)."""

    visible: int | None
    oldest_visible_wait_s: float | None
    last_received_age_s: float | None
    last_handled_age_s: float | None
    heartbeat_age_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "visible": self.visible,
            "oldest_visible_wait_s": self.oldest_visible_wait_s,
            "last_received_age_s": self.last_received_age_s,
            "last_handled_age_s": self.last_handled_age_s,
            "heartbeat_age_s": self.heartbeat_age_s,
        }


def _age(at: Any, now: float) -> float | None:
    return None if at is None else round(max(now - float(at), 0.0), 1)


def figures(beat: dict[str, Any], now: float) -> DeliveryFigures:
    """The delivery figures of one heartbeat document, as of ``now``."""
    queue = beat.get("queue")
    visible = int(queue["visible"]) if isinstance(queue, dict) and "visible" in queue else None
    delivery = beat.get("delivery") or {}
    since = delivery.get("visible_since")
    received = delivery.get("last_received_at")
    wait: float | None = None
    if visible is not None:
        if visible <= 0 or since is None:
            wait = 0.0
        else:
            start = max(float(since), float(received)) if received is not None else float(since)
            wait = round(max(now - start, 0.0), 1)
    return DeliveryFigures(
        visible=visible,
        oldest_visible_wait_s=wait,
        last_received_age_s=_age(received, now),
        last_handled_age_s=_age(delivery.get("last_handled_at"), now),
        heartbeat_age_s=_age(beat.get("at"), now),
    )


def verdict(
    beat: dict[str, Any], now: float, *, max_heartbeat_age_s: float, stall_after_s: float
) -> str | None:
    """None when the bridge delivers, else the reason (a stale heartbeat, or messages left waiting)."""
    f = figures(beat, now)
    if f.heartbeat_age_s is None or f.heartbeat_age_s > max_heartbeat_age_s:
        age = "no" if f.heartbeat_age_s is None else f"{f.heartbeat_age_s:.0f}s old"
        return f"heartbeat {age} (limit {max_heartbeat_age_s:.0f}s)"
    if "error" in beat:
        return f"the bridge cannot read its queue ({beat['error']})"
    if f.oldest_visible_wait_s is not None and f.oldest_visible_wait_s > stall_after_s:
        last = "never" if f.last_received_age_s is None else f"{f.last_received_age_s:.0f}s ago"
        return (
            f"not consuming: {f.visible} messages visible for {f.oldest_visible_wait_s:.0f}s "
            f"(limit {stall_after_s:.0f}s), last message received {last}"
        )
    return None
