"""The local profile store (``<project>/.baml/profiles-v1`` or ``$BAML_PROFILE_DIR``).

Profiler side: ``ProfileStore(root).open_stream(euid)`` -> ``StreamWriter``.
Publisher side: the ``ProfileStore`` methods (high-water, committed lists,
cursor, markers, release, retention, disk pressure) and
``acquire_publisher_lock``. Layout and crash safety: docs/profile-store.md.
"""

from formats.profile_store.cursor import Cursor
from formats.profile_store.errors import (
    BudgetExceeded,
    CleanInUse,
    CursorError,
    NotShipped,
    PathConflict,
    PublisherBusy,
    SequenceError,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    StreamInUse,
)
from formats.profile_store.layout import Plane, default_root
from formats.profile_store.ledger import DiskBudget, Usage, scan_physical_usage
from formats.profile_store.store import (
    CasFile,
    Expiry,
    ProfileStore,
    PublisherLease,
    StreamSnapshot,
    clean_profiles,
)
from formats.profile_store.writer import StreamWriter

__all__ = [
    "BudgetExceeded",
    "CasFile",
    "CleanInUse",
    "Cursor",
    "CursorError",
    "DiskBudget",
    "Expiry",
    "NotShipped",
    "PathConflict",
    "Plane",
    "ProfileStore",
    "PublisherBusy",
    "PublisherLease",
    "SequenceError",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "StreamInUse",
    "StreamSnapshot",
    "StreamWriter",
    "Usage",
    "clean_profiles",
    "default_root",
    "scan_physical_usage",
]
