"""Errors of the local profile store.

Bad *file bytes* handed to the store raise the shared decoder family in
``formats.errors``. Everything here is about the store itself: budgets, locks,
ordering and ownership. Messages carry paths, sequences and sizes only, never
file contents.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store failure; ``reason`` is a stable machine-readable string."""

    reason: str = "store_error"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.message = message
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{self.reason}: {message}")


class BudgetExceeded(StoreError):
    """A write would take the project over its disk budget or under the free-space floor."""

    reason = "disk_budget_exceeded"


class StreamInUse(StoreError):
    """Another open writer (this process or another) owns the stream's ``stream.lock``."""

    reason = "stream_in_use"


class SequenceError(StoreError):
    """A segment sequence is not the next dense sequence of its plane."""

    reason = "sequence_not_dense"


class PathConflict(StoreError):
    """A segment's final path already exists; segments are never overwritten."""

    reason = "path_conflict"


class NotShipped(StoreError):
    """A release or marker asked for something the publisher has not shipped."""

    reason = "not_shipped"


class CursorError(StoreError):
    """A cursor update would move backwards or past the committed high-water."""

    reason = "cursor_invalid"


class PublisherBusy(StoreError):
    """Another process already holds ``publisher.lock`` for this root."""

    reason = "publisher_busy"


class StoreBusy(StoreError):
    """A store lock could not be taken before the deadline."""

    reason = "store_busy"


class StoreUnavailable(StoreError):
    """The directory holds something the store cannot account for (a symlink, a device...)."""

    reason = "store_unavailable"


class CleanInUse(StoreError):
    """``clean`` found the root open by a writer or a publisher."""

    reason = "clean_in_use"
