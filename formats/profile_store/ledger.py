"""The ``usage.state`` disk-usage ledger and the disk budget.

Byte layout (48 bytes, same as the BAML profiler's ``BAMLUSE1`` ledger)::

    +----------+------------------+---------------------------+
    | "BAMLUSE1" | u64 usage (BE) | sha256 of the first 16 bytes |
    |  8 bytes   |    8 bytes     |          32 bytes            |
    +----------+------------------+---------------------------+

``usage`` is the physical size of the root: 48 bytes for the ledger itself plus
every regular file under the root except ``publish.lock``, ``usage.state`` and
``tmp/usage-state.pending``. Every change to it happens under ``publish.lock``;
it is written to ``tmp/usage-state.pending``, fsynced, renamed and the root is
synced. A crash can leave it stale; the next writer open (or publisher lock)
rescans the tree and rewrites it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from formats.errors import BadMagicError, ChecksumMismatchError, TrailingBytesError, TruncatedError
from formats.profile_store import fsio
from formats.profile_store.errors import StoreUnavailable
from formats.profile_store.layout import PUBLISH_LOCK, USAGE_PENDING, USAGE_STATE

USAGE_MAGIC = b"BAMLUSE1"
USAGE_STATE_BYTES = 8 + 8 + 32
GIB = 1024**3
_EXCLUDED = {PUBLISH_LOCK, USAGE_STATE, USAGE_PENDING}


@dataclass(frozen=True)
class DiskBudget:
    """Project disk policy: the profiler's defaults are 10 GiB with 1 GiB left free."""

    max_project_bytes: int = 10 * GIB
    minimum_free_bytes: int = 1 * GIB

    def __post_init__(self) -> None:
        if self.max_project_bytes < USAGE_STATE_BYTES or self.minimum_free_bytes < 0:
            raise ValueError("disk budget must allow the ledger and have a non-negative floor")

    def admits(self, usage: int, free: int, extra: int) -> bool:
        """Whether writing ``extra`` bytes keeps usage within budget and free space above the floor."""
        peak = usage + extra + USAGE_STATE_BYTES
        left = free - (extra + USAGE_STATE_BYTES)
        return peak <= self.max_project_bytes and left >= self.minimum_free_bytes


@dataclass(frozen=True)
class Usage:
    """A snapshot of the ledger against the budget."""

    ledger_bytes: int
    free_bytes: int
    budget: DiskBudget

    @property
    def over_budget(self) -> bool:
        return self.ledger_bytes > self.budget.max_project_bytes

    @property
    def below_free_floor(self) -> bool:
        return self.free_bytes < self.budget.minimum_free_bytes

    @property
    def pressure(self) -> bool:
        return self.over_budget or self.below_free_floor


def encode_usage_state(usage: int) -> bytes:
    if not 0 <= usage < 2**64:
        raise ValueError("usage must fit in u64")
    head = USAGE_MAGIC + usage.to_bytes(8, "big")
    return head + hashlib.sha256(head).digest()


def decode_usage_state(data: bytes, *, file: str | None = None) -> int:
    if len(data) < USAGE_STATE_BYTES:
        raise TruncatedError(f"usage ledger is {len(data)} bytes, expected 48", file=file, offset=len(data))
    if len(data) > USAGE_STATE_BYTES:
        raise TrailingBytesError("usage ledger longer than 48 bytes", file=file, offset=USAGE_STATE_BYTES)
    if data[:8] != USAGE_MAGIC:
        raise BadMagicError("usage ledger does not start with BAMLUSE1", file=file, offset=0)
    if hashlib.sha256(data[:16]).digest() != data[16:]:
        raise ChecksumMismatchError("usage ledger checksum mismatch", file=file, offset=16)
    return int.from_bytes(data[8:16], "big")


def scan_physical_usage(root: Path) -> int:
    """Recompute the ledger value from the files on disk (call under ``publish.lock``)."""
    total = USAGE_STATE_BYTES
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                raise StoreUnavailable("profile store contains a symlink", path=entry.path)
            if stat.S_ISDIR(info.st_mode):
                stack.append(Path(entry.path))
            elif stat.S_ISREG(info.st_mode):
                if Path(entry.path).relative_to(root).as_posix() not in _EXCLUDED:
                    total += info.st_size
            else:
                raise StoreUnavailable("profile store contains an unsupported file type", path=entry.path)
    return total


def read_usage_state(root: Path) -> int:
    """The ledger value; raises FileNotFoundError or a FormatError when missing or damaged."""
    path = root / USAGE_STATE
    return decode_usage_state(path.read_bytes(), file=str(path))


def write_usage_state(root: Path, usage: int) -> None:
    """Atomically replace the ledger (caller holds ``publish.lock``)."""
    pending = root / USAGE_PENDING
    fsio.write_synced(pending, encode_usage_state(usage), exclusive=False)
    os.replace(pending, root / USAGE_STATE)
    fsio.fsync_dir(root)
