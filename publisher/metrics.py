"""The guide's counters and gauges ("Observability"), thread-safe and readable from Python.

Counters only grow; gauges are set by the last flush. ``snapshot()`` returns plain dicts so the CLI
prints them and a host exports them to its own metrics system. Every skipped or dropped item is a
counter with its reason (``skipped{reason}``), never only a log line.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Timing:
    count: int = 0
    total_seconds: float = 0.0
    last_seconds: float = 0.0
    max_seconds: float = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total_seconds += seconds
        self.last_seconds = seconds
        self.max_seconds = max(self.max_seconds, seconds)

    def as_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "total_seconds": round(self.total_seconds, 6),
            "last_seconds": round(self.last_seconds, 6),
            "max_seconds": round(self.max_seconds, 6),
        }


@dataclass
class PublisherMetrics:
    """Counters keyed by kind, outcome or reason; gauges keyed by plane."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    objects_shipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_shipped_compressed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_shipped_original: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    authorize_outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "kind/state"
    put_retries: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    put_412: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "reason"
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "reason"
    bytes_freed: dict[str, int] = field(
        default_factory=lambda: defaultdict(int)
    )  # release|retention|pressure
    flushes: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # outcome
    flush_duration: _Timing = field(default_factory=_Timing)
    authorize_latency: _Timing = field(default_factory=_Timing)
    # Gauges.
    pending_segments: dict[str, int] = field(default_factory=dict)  # plane -> files
    pending_values: int = 0
    pending_tables: int = 0
    oldest_unshipped_age_seconds: dict[str, float] = field(default_factory=dict)  # plane -> seconds
    state: str = "starting"

    def count(self, counter: str, key: str, n: int = 1) -> None:
        with self._lock:
            getattr(self, counter)[key] += n

    def shipped(self, kind: str, compressed: int, original: int) -> None:
        with self._lock:
            self.objects_shipped[kind] += 1
            self.bytes_shipped_compressed[kind] += compressed
            self.bytes_shipped_original[kind] += original

    def time_flush(self, seconds: float) -> None:
        with self._lock:
            self.flush_duration.add(seconds)

    def time_authorize(self, seconds: float) -> None:
        with self._lock:
            self.authorize_latency.add(seconds)

    def set_gauges(
        self,
        *,
        pending_segments: dict[str, int],
        pending_values: int,
        pending_tables: int,
        oldest_age: dict[str, float],
    ) -> None:
        with self._lock:
            self.pending_segments = dict(pending_segments)
            self.pending_values = pending_values
            self.pending_tables = pending_tables
            self.oldest_unshipped_age_seconds = dict(oldest_age)

    def set_state(self, state: str) -> None:
        with self._lock:
            self.state = state

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "state": self.state,
                "objects_shipped": dict(self.objects_shipped),
                "bytes_shipped_compressed": dict(self.bytes_shipped_compressed),
                "bytes_shipped_original": dict(self.bytes_shipped_original),
                "authorize_outcomes": dict(self.authorize_outcomes),
                "put_retries": dict(self.put_retries),
                "put_412": dict(self.put_412),
                "skipped": dict(self.skipped),
                "errors": dict(self.errors),
                "bytes_freed": dict(self.bytes_freed),
                "flushes": dict(self.flushes),
                "flush_duration": self.flush_duration.as_dict(),
                "authorize_latency": self.authorize_latency.as_dict(),
                "pending_segments": dict(self.pending_segments),
                "pending_values": self.pending_values,
                "pending_tables": self.pending_tables,
                "oldest_unshipped_age_seconds": {
                    k: round(v, 3) for k, v in self.oldest_unshipped_age_seconds.items()
                },
            }
