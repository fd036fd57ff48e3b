"""The local profile store: the directory the profiler writes and the publisher ships.

Every mutation runs under ``publish.lock`` (exclusive, short-held), the lock the
BAML profiler takes around each file commit and ledger update, so a Python or
Rust profiler and this publisher can share one root from different processes.
The one publisher of a root additionally holds ``publisher.lock`` for its
lifetime (``acquire_publisher_lock``). See docs/profile-store.md for the
crash-safety argument.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from formats.cas import decode_cas_object
from formats.errors import FormatError
from formats.integrity import verify_trailer
from formats.profile_store import fsio, layout
from formats.profile_store.cursor import Cursor, decode_cursor, encode_cursor
from formats.profile_store.errors import (
    BudgetExceeded,
    CleanInUse,
    CursorError,
    NotShipped,
    PublisherBusy,
    StoreError,
)
from formats.profile_store.fsio import BeforeRename
from formats.profile_store.layout import Plane
from formats.profile_store.ledger import (
    USAGE_STATE_BYTES,
    DiskBudget,
    Usage,
    decode_usage_state,
    read_usage_state,
    scan_physical_usage,
    write_usage_state,
)
from formats.profile_store.locks import DEFAULT_TIMEOUT_S, FileLock, is_held_by_someone
from formats.profile_store.writer import StreamWriter, stream_open_in_process

FreeSpace = Callable[[Path], int]


_MARK_CHUNK = 128  # markers created per thread hand-off in mark_shipped_many


@dataclass(frozen=True)
class CasFile:
    """One CAS object file on disk (value or function table; the codec is in its header)."""

    path: Path
    digest: str
    size_bytes: int

    @property
    def marker(self) -> Path:
        return layout.marker_path(self.path)


@dataclass(frozen=True)
class StreamSnapshot:
    """One stream as committed at one instant (see ``ProfileStore.stream_snapshot``)."""

    cursor: Cursor
    meta_high_water: int
    data_high_water: int
    meta_on_disk: list[int]
    data_on_disk: list[int]


@dataclass(frozen=True)
class Expiry:
    """What one retention pass freed, and when the oldest shipped value it kept falls due (epoch
    seconds; None when no shipped value is left)."""

    freed: int
    next_due: float | None


class PublisherLease:
    """Proof that this process is the root's only publisher; release with ``close`` or ``with``."""

    def __init__(self, lease: FileLock, publisher: FileLock) -> None:
        self._lease = lease
        self._publisher = publisher

    @property
    def held(self) -> bool:
        return self._publisher.held

    def close(self) -> None:
        self._publisher.release()
        self._lease.release()

    def __enter__(self) -> PublisherLease:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class ProfileStore:
    """Handle on one profile root. Cheap to create; holds no lock by itself."""

    def __init__(
        self,
        root: Path | str,
        *,
        budget: DiskBudget | None = None,
        free_space: FreeSpace | None = None,
        lock_timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.root = Path(root)
        self.budget = budget or DiskBudget()
        self._free_space = free_space or fsio.free_bytes
        self.lock_timeout = lock_timeout
        self._layout_ready = False  # the three mkdirs run once per handle, not per lock hold

    @staticmethod
    def default_root(project_dir: Path | str) -> Path:
        return layout.default_root(project_dir)

    # ----------------------------------------------------------------- plumbing

    def ensure_layout(self) -> None:
        for sub in (layout.TMP_DIR, layout.STREAMS_DIR, layout.CAS_DIR):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._layout_ready = True

    @contextlib.contextmanager
    def accounting(self) -> Iterator[None]:
        """Hold ``publish.lock`` exclusively: the one lock around commits and the ledger."""
        if not self._layout_ready or not (self.root / layout.TMP_DIR).is_dir():
            # Checked each hold (one stat) because ``clean_profiles`` may have removed the root.
            self.ensure_layout()
        lock = FileLock(self.root / layout.PUBLISH_LOCK)
        lock.acquire(exclusive=True, timeout=self.lock_timeout)
        try:
            yield
        finally:
            lock.release()

    def _free(self) -> int:
        return self._free_space(self.root)

    def _ledger_locked(self) -> int:
        """The ledger value; a missing or damaged ledger is rebuilt from the tree."""
        try:
            return read_usage_state(self.root)
        except (FileNotFoundError, FormatError):
            return self.resync_usage_locked()

    def _adjust_ledger_locked(self, delta: int) -> None:
        if delta == 0:
            return
        usage = self._ledger_locked() + delta
        if usage < USAGE_STATE_BYTES:
            # The ledger was stale (a crash between rename and ledger write): recount.
            self.resync_usage_locked()
            return
        write_usage_state(self.root, usage)

    def resync_usage_locked(self) -> int:
        """Remove orphan temp files and rewrite the ledger from a scan (caller holds publish.lock).

        Every temp file is written under publish.lock, so while we hold it none is in flight.
        """
        tmp = self.root / layout.TMP_DIR
        for entry in os.scandir(tmp):
            if entry.is_file(follow_symlinks=False):
                Path(entry.path).unlink(missing_ok=True)
        usage = scan_physical_usage(self.root)
        write_usage_state(self.root, usage)
        return usage

    def resync_usage(self) -> int:
        with self.accounting():
            return self.resync_usage_locked()

    def commit_locked(
        self, final: Path, data: bytes, *, old_size: int = 0, before_rename: BeforeRename | None = None
    ) -> None:
        """Budget check, durable write, ledger update (caller holds publish.lock)."""
        usage = self._ledger_locked()
        free = self._free()
        if not self.budget.admits(usage, free, len(data)):
            raise BudgetExceeded(
                f"{len(data)} bytes refused: ledger {usage} of {self.budget.max_project_bytes}, "
                f"free {free}, floor {self.budget.minimum_free_bytes}",
                path=str(final),
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        fsio.write_atomic(self.root / layout.TMP_DIR, final, data, before_rename=before_rename)
        try:
            write_usage_state(self.root, usage + len(data) - old_size)
        except OSError:
            # The file is committed; only the ledger is behind. Recount so it is right again.
            self.resync_usage_locked()

    # ----------------------------------------------------------------- profiler side

    def open_stream(self, euid: bytes | str, *, before_rename: BeforeRename | None = None) -> StreamWriter:
        """Open a stream for writing; raises StreamInUse when someone else has it open."""
        return StreamWriter(self, euid, before_rename=before_rename)

    def put_cas(self, data: bytes, *, before_rename: BeforeRename | None = None) -> Path:
        """Store one framed CAS object and return its path.

        Reuses an existing file that verifies; rewrites one that does not; never
        touches a value whose ``.shipped`` marker exists (it is in the bucket).
        """
        cid = decode_cas_object(data).cid
        path = layout.cas_path(self.root, cid)
        with self.accounting():
            if layout.marker_path(path).exists():
                return path
            old_size = 0
            if path.exists():
                existing = path.read_bytes()
                try:
                    decode_cas_object(existing, file=str(path), expected_cid=cid)
                    return path
                except FormatError:
                    pass
                old_size = len(existing)
            self.commit_locked(path, data, old_size=old_size, before_rename=before_rename)
            if old_size:
                # Damage happened outside the store, so the ledger never saw the old size: recount.
                self.resync_usage_locked()
        return path

    # ----------------------------------------------------------------- publisher side

    def acquire_publisher_lock(self) -> PublisherLease:
        """Become the root's only publisher, or raise PublisherBusy. Also settles the ledger."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        lease = FileLock(layout.lease_lock_path(self.root))
        lease.acquire(exclusive=False, timeout=self.lock_timeout)
        self.ensure_layout()
        publisher = FileLock(self.root / layout.PUBLISHER_LOCK)
        if not publisher.try_acquire(exclusive=True):
            lease.release()
            raise PublisherBusy("another process is publishing this root", path=str(publisher.path))
        try:
            self.resync_usage()
        except BaseException:
            publisher.release()
            lease.release()
            raise
        return PublisherLease(lease, publisher)

    def list_streams(self) -> list[str]:
        streams = self.root / layout.STREAMS_DIR
        if not streams.is_dir():
            return []
        return sorted(e.name for e in os.scandir(streams) if e.is_dir() and layout.is_euid_dir_name(e.name))

    def stream_is_live(self, euid: bytes | str) -> bool:
        """True while the stream's writer holds ``stream.lock`` (in this or another process)."""
        hex_id = layout.euid_hex(euid)
        if stream_open_in_process(hex_id):
            return True
        return is_held_by_someone(layout.stream_dir(self.root, hex_id) / layout.STREAM_LOCK)

    def _sequences(self, euid: str, plane: Plane) -> list[int]:
        directory = layout.plane_dir(self.root, euid, plane)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        found = (layout.parse_segment_name(name, plane) for name in names)
        return sorted(seq for seq in found if seq is not None)

    def committed_high_water_locked(self, euid: str, plane: Plane, *, verify_tail: bool = False) -> int:
        sequences = self._sequences(euid, plane)
        if sequences and verify_tail:
            tail = layout.segment_path(self.root, euid, plane, sequences[-1])
            verify_trailer(tail.read_bytes(), file=str(tail))  # a corrupt tail fails closed
        highest = sequences[-1] if sequences else 0
        cursor = self._read_cursor(euid)
        # Released segments are gone from disk; the cursor still remembers them.
        return max(highest, cursor.meta if plane is Plane.META else cursor.data)

    def committed_high_water(self, euid: bytes | str, plane: Plane | str) -> int:
        """Highest committed sequence of a plane (0 = none).

        Taken under publish.lock, so a commit in progress (renamed but not yet
        ledgered) in any process is never reported.
        """
        with self.accounting():
            return self.committed_high_water_locked(layout.euid_hex(euid), Plane(plane))

    def stream_snapshot(self, euid: bytes | str) -> StreamSnapshot:
        """Cursor, high-water and on-disk sequences of both planes in one ``publish.lock`` hold (the
        publisher's per-stream read at each flush: one lock wait instead of four)."""
        hex_id = layout.euid_hex(euid)
        with self.accounting():
            cursor = self._read_cursor(hex_id)
            on_disk = {plane: self._sequences(hex_id, plane) for plane in (Plane.META, Plane.DATA)}
        return StreamSnapshot(
            cursor=cursor,
            meta_high_water=max([cursor.meta, *on_disk[Plane.META][-1:]]),
            data_high_water=max([cursor.data, *on_disk[Plane.DATA][-1:]]),
            meta_on_disk=on_disk[Plane.META],
            data_on_disk=on_disk[Plane.DATA],
        )

    def list_committed(self, euid: bytes | str, plane: Plane | str, after: int = 0) -> list[int]:
        """Committed sequences above ``after`` that are still on disk, ascending."""
        with self.accounting():
            return [s for s in self._sequences(layout.euid_hex(euid), Plane(plane)) if s > after]

    def segment_path(self, euid: bytes | str, plane: Plane | str, seq: int) -> Path:
        return layout.segment_path(self.root, euid, Plane(plane), seq)

    def _cursor_path(self, euid: str) -> Path:
        return layout.stream_dir(self.root, euid) / layout.CURSOR_FILE

    def _read_cursor(self, euid: str) -> Cursor:
        path = self._cursor_path(euid)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return Cursor()
        return decode_cursor(data, file=str(path))

    def read_cursor(self, euid: bytes | str) -> Cursor:
        """The last shipped sequence per plane; (0, 0) when the stream never shipped."""
        return self._read_cursor(layout.euid_hex(euid))

    def write_cursor(self, euid: bytes | str, meta: int, data: int) -> Cursor:
        """Advance ``publisher.cursor`` atomically. It never moves back or past the high-water."""
        hex_id = layout.euid_hex(euid)
        new = Cursor(meta=meta, data=data)
        path = self._cursor_path(hex_id)
        with self.accounting():
            if not path.parent.is_dir():
                raise StoreError("no such stream", path=str(path.parent))
            old = self._read_cursor(hex_id)
            if new.meta < old.meta or new.data < old.data:
                raise CursorError(f"cursor would move back from {old} to {new}", path=str(path))
            for plane, value in ((Plane.META, new.meta), (Plane.DATA, new.data)):
                high = self.committed_high_water_locked(hex_id, plane)
                if value > high:
                    raise CursorError(
                        f"{plane.value} cursor {value} beyond high-water {high}", path=str(path)
                    )
            if new == old and path.exists():
                return new
            encoded = encode_cursor(new)
            old_size = fsio.file_size(path)
            fsio.write_atomic(self.root / layout.TMP_DIR, path, encoded)
            self._adjust_ledger_locked(len(encoded) - old_size)
        return new

    def pending_cas(self) -> list[CasFile]:
        """CAS files without a ``.shipped`` marker, in path order."""
        out: list[CasFile] = []
        for bucket in self.cas_buckets():
            out.extend(self.pending_cas_in(bucket))
        return out

    def shipped_cas(self) -> list[CasFile]:
        """CAS files with a ``.shipped`` marker, in path order."""
        out: list[CasFile] = []
        for bucket in self.cas_buckets():
            values, markers = self._cas_names(bucket)
            out.extend(
                self._cas_file(bucket, d, n) for d, n in values if n + layout.SHIPPED_SUFFIX in markers
            )
        return out

    def cas_buckets(self) -> list[str]:
        """The ``cas/sha256/<hex2>`` directory names present, sorted."""
        base = self.root / layout.CAS_DIR
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if layout.is_cas_bucket_name(n))

    def cas_bucket_dir(self, bucket: str) -> Path:
        return self.root / layout.CAS_DIR / bucket

    def pending_cas_in(self, bucket: str) -> list[CasFile]:
        """Unmarked CAS files of one ``<hex2>`` directory, from one listing (names only: the
        marker test is a name lookup, not a stat per file; shipped files cost one set lookup)."""
        try:
            names = os.listdir(self.cas_bucket_dir(bucket))
        except (FileNotFoundError, NotADirectoryError):
            return []
        present = set(names)
        suffix = layout.SHIPPED_SUFFIX
        out: list[CasFile] = []
        for name in sorted(n for n in names if not n.endswith(suffix) and n + suffix not in present):
            digest = layout.parse_cas_name(name)
            if digest is not None and digest[:2] == bucket:
                out.append(self._cas_file(bucket, digest, name))
        return out

    def _cas_names(self, bucket: str) -> tuple[list[tuple[str, str]], set[str]]:
        try:
            names = sorted(os.listdir(self.cas_bucket_dir(bucket)))
        except (FileNotFoundError, NotADirectoryError):
            return [], set()
        values: list[tuple[str, str]] = []
        markers: set[str] = set()
        for name in names:
            if name.endswith(layout.SHIPPED_SUFFIX):
                markers.add(name)
                continue
            digest = layout.parse_cas_name(name)
            if digest is not None and digest[:2] == bucket:
                values.append((digest, name))
        return values, markers

    def _cas_file(self, bucket: str, digest: str, name: str) -> CasFile:
        path = self.cas_bucket_dir(bucket) / name
        return CasFile(path, digest, fsio.file_size(path))

    def _own_cas_path(self, cas_path: Path | str) -> Path:
        path = Path(cas_path)
        digest = layout.parse_cas_name(path.name)
        if digest is None or path != layout.cas_path(self.root, bytes.fromhex(digest)):
            raise StoreError("not a CAS object path of this store", path=str(path))
        return path

    def mark_shipped(self, cas_path: Path | str) -> Path:
        """Write the zero-length ``.shipped`` marker beside a value or table (idempotent).

        Raises NotShipped when the value file is missing."""
        path = self._own_cas_path(cas_path)
        missing = self.mark_shipped_many([path])
        if missing:
            raise NotShipped("value file is missing; nothing to mark", path=str(path))
        return layout.marker_path(path)

    def mark_shipped_many(
        self, cas_paths: Iterable[Path | str], *, executor: Executor | None = None
    ) -> list[Path]:
        """Mark many values shipped in one ``publish.lock`` hold; return the paths whose value file
        was missing (nothing to mark). An existing marker is kept: retention counts from it.

        Markers are zero-length and created (``O_EXCL``) without any fsync, of the file or of its
        directory: a marker lost to an OS crash only makes its value ship again, which the gateway
        answers ``stored``, so durability would buy nothing (and cost one directory sync per CAS
        directory, most of a flush's time on a backlog). What must never happen, a marker for a
        value not in the bucket, cannot: the caller marks only after the object is stored. File
        creation is slow on some filesystems: with ``executor`` the creates run side by side, in
        chunks so that thread hand-offs stay few (still inside the one lock hold).
        """
        paths = [self._own_cas_path(p) for p in cas_paths]

        def mark(chunk: list[Path]) -> list[bool | None]:  # None: the value is missing
            return [fsio.create_empty(layout.marker_path(p)) if p.exists() else None for p in chunk]

        chunks = [paths[i : i + _MARK_CHUNK] for i in range(0, len(paths), _MARK_CHUNK)]
        with self.accounting():
            parts = (
                executor.map(mark, chunks) if executor is not None and len(chunks) > 1 else map(mark, chunks)
            )
            results = [created for part in parts for created in part]
        return [p for p, created in zip(paths, results, strict=True) if created is None]

    def release_segments(self, euid: bytes | str, plane: Plane | str, through_seq: int) -> int:
        """Delete shipped segments at or below ``through_seq``; return the bytes freed.

        Refuses (NotShipped) when ``through_seq`` is beyond the plane's cursor, so
        an unshipped segment is never removed.
        """
        hex_id = layout.euid_hex(euid)
        plane = Plane(plane)
        with self.accounting():
            cursor = self._read_cursor(hex_id)
            shipped = cursor.meta if plane is Plane.META else cursor.data
            if through_seq > shipped:
                raise NotShipped(
                    f"{plane.value} release through {through_seq} beyond cursor {shipped}",
                    path=str(layout.stream_dir(self.root, hex_id)),
                )
            freed = 0
            removed = False
            for seq in self._sequences(hex_id, plane):
                if seq > through_seq:
                    break
                target = layout.segment_path(self.root, hex_id, plane, seq)
                freed += fsio.file_size(target)
                target.unlink(missing_ok=True)
                removed = True
            if removed:
                fsio.fsync_dir(layout.plane_dir(self.root, hex_id, plane))
                self._adjust_ledger_locked(-freed)
        return freed

    def expire_shipped_values(self, now: float, retention_seconds: float, *, force: bool = False) -> int:
        """Remove shipped values whose marker is older than the window (all of them when ``force``).

        Unshipped values (no marker) are never touched. Returns the bytes freed. Candidates are found
        without the lock (a listing and one stat per marker), so profilers are not held up by the
        scan; under ``publish.lock`` each candidate's marker is checked again before anything goes.
        """
        return self.expire_shipped(now, retention_seconds, force=force).freed

    def expire_shipped(self, now: float, retention_seconds: float, *, force: bool = False) -> Expiry:
        """``expire_shipped_values`` that also says when the oldest value it kept falls due, so a
        caller can skip the scan until then (markers it writes later are due later still)."""
        candidates, oldest_kept = self._expiry_candidates(now, retention_seconds, force=force)
        next_due = None if oldest_kept is None else oldest_kept + retention_seconds
        if not candidates:
            return Expiry(0, next_due)
        with self.accounting():
            freed = self._expire_locked(now, retention_seconds, force=force, candidates=candidates)
        return Expiry(freed, next_due)

    def _expiry_candidates(
        self, now: float, retention: float, *, force: bool
    ) -> tuple[list[tuple[float, CasFile]], float | None]:
        candidates: list[tuple[float, CasFile]] = []
        oldest_kept: float | None = None
        for bucket in self.cas_buckets():
            values, markers = self._cas_names(bucket)
            directory = self.cas_bucket_dir(bucket)
            for digest, name in values:
                marker_name = name + layout.SHIPPED_SUFFIX
                if marker_name not in markers:
                    continue
                try:
                    marked_at = (directory / marker_name).stat().st_mtime
                except FileNotFoundError:
                    continue
                if force or now - marked_at >= retention:
                    candidates.append((marked_at, CasFile(directory / name, digest, 0)))
                elif oldest_kept is None or marked_at < oldest_kept:
                    oldest_kept = marked_at
        candidates.sort(key=lambda item: (item[0], item[1].digest))  # oldest shipped first
        return candidates, oldest_kept

    def _expire_locked(
        self,
        now: float,
        retention: float,
        *,
        force: bool,
        stop_when_relieved: bool = False,
        candidates: list[tuple[float, CasFile]] | None = None,
    ) -> int:
        if candidates is None:
            candidates, _ = self._expiry_candidates(now, retention, force=force)
        freed = 0
        touched: set[Path] = set()
        for _, cas in candidates:
            if stop_when_relieved and not self._pressure_locked(freed):
                break
            try:  # checked again under the lock: the marker must still be there, and still old
                marked_at = cas.marker.stat().st_mtime
            except FileNotFoundError:
                continue
            if not force and now - marked_at < retention:
                continue
            size = fsio.file_size(cas.path)
            # Marker first: a crash in between leaves an unmarked value, which simply re-ships.
            cas.marker.unlink(missing_ok=True)
            cas.path.unlink(missing_ok=True)
            freed += size
            touched.add(cas.path.parent)
        for directory in touched:
            fsio.fsync_dir(directory)
        self._adjust_ledger_locked(-freed)
        return freed

    def relieve_pressure(self, now: float) -> int:
        """Free space while the store reports pressure: shipped values (oldest first), then
        shipped segments up to each stream's cursor. Unshipped files are never removed."""
        with self.accounting():
            freed = self._expire_locked(now, 0.0, force=True, stop_when_relieved=True)
        if not self.disk_pressure():
            return freed
        for euid in self.list_streams():
            cursor = self.read_cursor(euid)
            freed += self.release_segments(euid, Plane.DATA, cursor.data)
            freed += self.release_segments(euid, Plane.META, cursor.meta)
        return freed

    def _pressure_locked(self, freed_not_yet_ledgered: int = 0) -> bool:
        usage = self._ledger_locked() - freed_not_yet_ledgered
        return Usage(usage, self._free(), self.budget).pressure

    def usage(self) -> Usage:
        with self.accounting():
            return Usage(self._ledger_locked(), self._free(), self.budget)

    def ledger_signature(self) -> tuple[int, int, int, int] | None:
        """A cheap change detector, read without any lock: ``(usage, inode, mtime_ns, ctime_ns)`` of
        ``usage.state``. Every commit and release in any process rewrites the ledger by a rename, so a
        signature equal to an earlier one means (barring a same-tick write that exactly cancels an
        earlier one) that nothing was committed or released in between. None when unreadable.
        """
        path = self.root / layout.USAGE_STATE
        try:
            with open(path, "rb") as fh:
                info = os.fstat(fh.fileno())
                data = fh.read(USAGE_STATE_BYTES + 1)
            usage = decode_usage_state(data, file=str(path))
        except (OSError, FormatError):
            return None
        return (usage, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)

    def disk_pressure(self) -> bool:
        """Ledger over the project budget, or free disk below the configured floor."""
        return self.usage().pressure


def clean_profiles(root: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Remove the whole root (``baml clean``) while no writer or publisher has it open.

    Returns False when there was nothing to remove; raises CleanInUse when in use.
    """
    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    lease = FileLock(layout.lease_lock_path(root))
    if not lease.try_acquire(exclusive=True):
        raise CleanInUse("profile root is open by a writer or publisher", path=str(root))
    try:
        if not root.exists():
            return False
        if root.is_symlink() or not root.is_dir():
            raise StoreError("profile root is not a directory", path=str(root))
        publish = root / layout.PUBLISH_LOCK
        with FileLock(publish) as commit_lock:
            commit_lock.acquire(exclusive=True, timeout=lock_timeout)  # wait out a commit in flight
            shutil.rmtree(root)
        return True
    finally:
        lease.release()
