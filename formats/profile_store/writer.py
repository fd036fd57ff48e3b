"""The profiler side: one open stream, its ``stream.lock`` and its dense sequences."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from formats.integrity import verify_trailer
from formats.profile_store import layout
from formats.profile_store.errors import PathConflict, SequenceError, StoreError, StreamInUse
from formats.profile_store.fsio import BeforeRename
from formats.profile_store.layout import Plane
from formats.profile_store.locks import FileLock

if TYPE_CHECKING:
    from formats.profile_store.store import ProfileStore

# Streams open in this process. flock already refuses a second open description,
# but the set makes the in-process answer independent of the filesystem's flock
# emulation (NFS), as the BAML profiler does.
_OPEN_STREAMS: set[str] = set()
_OPEN_STREAMS_GUARD = threading.Lock()


def stream_open_in_process(euid_hex: str) -> bool:
    with _OPEN_STREAMS_GUARD:
        return euid_hex in _OPEN_STREAMS


class StreamWriter:
    """Writes one stream's segments and the project's CAS objects.

    Holds the store lease (shared) and ``stream.lock`` (exclusive) while open.
    Not thread-safe: the profiler drives a stream from one thread.
    """

    def __init__(
        self, store: ProfileStore, euid: bytes | str, *, before_rename: BeforeRename | None = None
    ) -> None:
        self._store = store
        self.euid = layout.euid_hex(euid)
        self._before_rename = before_rename
        self._lease = FileLock(layout.lease_lock_path(store.root))
        self._stream_lock = FileLock(layout.stream_dir(store.root, self.euid) / layout.STREAM_LOCK)
        self._high_water: dict[Plane, int] = {Plane.META: 0, Plane.DATA: 0}
        self._registered = False
        self._open()

    def _open(self) -> None:
        store = self._store
        store.root.parent.mkdir(parents=True, exist_ok=True)
        self._lease.acquire(exclusive=False, timeout=store.lock_timeout)
        try:
            store.ensure_layout()
            for plane in Plane:
                layout.plane_dir(store.root, self.euid, plane).mkdir(parents=True, exist_ok=True)
            with _OPEN_STREAMS_GUARD:
                if self.euid in _OPEN_STREAMS:
                    raise StreamInUse("stream is already open in this process", path=self.euid)
                _OPEN_STREAMS.add(self.euid)
                self._registered = True
            if not self._stream_lock.try_acquire(exclusive=True):
                raise StreamInUse("another process holds stream.lock", path=str(self._stream_lock.path))
            # Orphan temp files, a stale ledger and the high-water mark are all
            # settled under publish.lock, when no writer can be mid-commit.
            with store.accounting():
                store.resync_usage_locked()
                for plane in Plane:
                    self._high_water[plane] = store.committed_high_water_locked(
                        self.euid, plane, verify_tail=True
                    )
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        return not self._stream_lock.held

    def high_water(self, plane: Plane) -> int:
        return self._high_water[plane]

    def write_meta(self, seq: int, data: bytes) -> Path:
        return self._write(Plane.META, seq, data)

    def write_data(self, seq: int, data: bytes) -> Path:
        return self._write(Plane.DATA, seq, data)

    def put_cas(self, data: bytes) -> Path:
        self._check_open()
        return self._store.put_cas(data, before_rename=self._before_rename)

    def _write(self, plane: Plane, seq: int, data: bytes) -> Path:
        self._check_open()
        expected = self._high_water[plane] + 1
        if seq != expected:
            raise SequenceError(f"{plane.value} sequence {seq} given, next is {expected}", path=self.euid)
        final = layout.segment_path(self._store.root, self.euid, plane, seq)
        verify_trailer(data, file=str(final))  # never commit a file a reader would reject
        with self._store.accounting():
            if final.exists():
                raise PathConflict("segment already exists; segments are never overwritten", path=str(final))
            self._store.commit_locked(final, data, before_rename=self._before_rename)
        self._high_water[plane] = seq
        return final

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError("stream writer is closed", path=self.euid)

    def close(self) -> None:
        self._stream_lock.release()
        if self._registered:
            with _OPEN_STREAMS_GUARD:
                _OPEN_STREAMS.discard(self.euid)
            self._registered = False
        self._lease.release()

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
