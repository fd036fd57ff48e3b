"""OS advisory locks (``flock``) on lock files.

``flock`` locks belong to an open file description, so two opens of the same
file conflict even inside one process and across threads; the kernel drops a
lock when its process dies, which is what makes ``stream.lock`` a liveness
signal and keeps a crashed publisher from blocking the next one.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from formats.profile_store.errors import StoreBusy

DEFAULT_TIMEOUT_S = 30.0


class FileLock:
    """One open lock file; ``acquire`` shared or exclusive, ``release`` closes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self, *, exclusive: bool) -> bool:
        """Take the lock without waiting; False when someone else holds a conflicting lock."""
        fd = self._open()
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def acquire(self, *, exclusive: bool, timeout: float | None = DEFAULT_TIMEOUT_S) -> None:
        """Wait for the lock, polling so that a holder stuck forever turns into StoreBusy."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        while not self.try_acquire(exclusive=exclusive):
            if deadline is not None and time.monotonic() >= deadline:
                raise StoreBusy(f"lock not acquired within {timeout} s", path=str(self.path))
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor drops the flock

    def _open(self) -> int:
        if self._fd is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __enter__(self) -> FileLock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def exclusive(path: Path, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> FileLock:
    """Acquire an exclusive lock on ``path``; use as ``with exclusive(p): ...``."""
    lock = FileLock(path)
    lock.acquire(exclusive=True, timeout=timeout)
    return lock


def is_held_by_someone(path: Path) -> bool:
    """Probe without creating: True when another open description holds ``path`` exclusively."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
