"""Durable file primitives: write a temp file, fsync, rename, sync the directory.

A file at its final path is therefore always complete: readers never see a
partial file, and after a crash a file is either wholly present or absent
(its temp file may be left in ``tmp/``; the store removes those under
``publish.lock``, when no writer can be mid-write).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

from formats.profile_store.layout import PENDING_SUFFIX

BeforeRename = Callable[[Path], None]


def fsync_dir(path: Path) -> None:
    """Persist a directory entry change (create, rename, unlink)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes, *, exclusive: bool = True) -> None:
    """Write ``data`` to ``path`` and fsync it (``exclusive``: the path must not exist)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def create_empty(path: Path) -> bool:
    """Create a zero-length file unless it exists, without fsync (a caller that needs the entry to
    survive an OS crash syncs the directory). True when this call created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def temp_path(tmp_dir: Path) -> Path:
    return tmp_dir / f"{uuid.uuid4().hex}{PENDING_SUFFIX}"


def write_atomic(
    tmp_dir: Path, final_path: Path, data: bytes, *, before_rename: BeforeRename | None = None
) -> None:
    """Temp file in ``tmp_dir``, fsync, rename over ``final_path``, fsync its directory.

    ``before_rename`` is a fault-injection seam for tests (kill the process
    between the durable temp file and the rename).
    """
    temporary = temp_path(tmp_dir)
    try:
        write_synced(temporary, data)
        if before_rename is not None:
            before_rename(temporary)
        os.replace(temporary, final_path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(final_path.parent)


def free_bytes(path: Path) -> int:
    """Bytes available to an unprivileged writer on the filesystem holding ``path``."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def file_size(path: Path) -> int:
    """Size of a regular file, 0 when it vanished (another process released it)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
