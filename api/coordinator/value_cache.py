"""A disposable local disk cache of value bodies, content-addressed by CID, bounded with LRU eviction.

Spec ("Private execution over Lance"): value reads go through a cache on local disk that is
disposable: losing it changes latency, not results. So every entry is verified against its CID on
read (``SHA-256("baml-value-v1" ‖ codec ‖ body)``); a file that is missing, cut or altered is a
miss, is removed, and the value is read again from Lance or the CAS prefix.

Layout: ``<dir>/<hex2>/<hex64>.val`` holding ``codec u16 BE ‖ body``. Writes go to a temporary
file first and are renamed into place, so a reader never sees half an entry from this process.
The LRU order lives in memory; at start the directory is scanned and ordered by modification time.
The cache holds private value bodies: its directory must be on the coordinator's own disk.
"""

from __future__ import annotations

import logging
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from formats.cas import value_cid

log = logging.getLogger("baml_studio.coordinator.value_cache")

_HEADER = struct.Struct(">H")
_SUFFIX = ".val"


class DiskValueCache:
    """Thread-safe; shared by every query of one coordinator process."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self._total = 0
        self.hits = 0
        self.misses = 0
        self.rejected = 0
        self._scan()

    def _path(self, cid_hex: str) -> Path:
        return self.directory / cid_hex[:2] / (cid_hex + _SUFFIX)

    def _scan(self) -> None:
        found: list[tuple[float, str, int]] = []
        if self.directory.is_dir():
            for sub in self.directory.iterdir():
                if not sub.is_dir():
                    continue
                for f in sub.glob("*" + _SUFFIX):
                    try:
                        st = f.stat()
                    except OSError:
                        continue
                    found.append((st.st_mtime, f.name[: -len(_SUFFIX)], st.st_size))
        with self._lock:
            for _, cid_hex, size in sorted(found):
                self._sizes[cid_hex] = size
                self._total += size
        self._evict()

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total

    def __len__(self) -> int:
        with self._lock:
            return len(self._sizes)

    def _forget(self, cid_hex: str) -> None:
        with self._lock:
            size = self._sizes.pop(cid_hex, None)
            if size is not None:
                self._total -= size

    def get(self, cid_hex: str) -> tuple[int, bytes] | None:
        """(codec, body) when a verified entry exists; otherwise None (and a bad entry is removed)."""
        path = self._path(cid_hex)
        try:
            data = path.read_bytes()
        except OSError:
            self._forget(cid_hex)
            with self._lock:
                self.misses += 1
            return None
        ok = len(data) >= _HEADER.size
        codec = _HEADER.unpack_from(data)[0] if ok else 0
        body = data[_HEADER.size :]
        if not ok or value_cid(codec, body).hex() != cid_hex:
            # Corrupt or altered entry: never served; drop it and read the source again.
            self._forget(cid_hex)
            path.unlink(missing_ok=True)
            with self._lock:
                self.rejected += 1
                self.misses += 1
            log.warning("value cache entry failed verification; removed")
            return None
        with self._lock:
            self.hits += 1
            if cid_hex in self._sizes:
                self._sizes.move_to_end(cid_hex)
            else:  # written by an earlier process after our scan, or re-created
                self._sizes[cid_hex] = len(data)
                self._total += len(data)
        return codec, body

    def put(self, cid_hex: str, codec: int, body: bytes) -> None:
        """Store a body the caller already verified against ``cid_hex``; too-large bodies are skipped."""
        size = _HEADER.size + len(body)
        if size > self.max_bytes:
            return
        path = self._path(cid_hex)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_HEADER.pack(codec))
                    f.write(body)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            # A full or vanished disk costs latency only: the value was already read from its source.
            log.warning("value cache write failed error=%s", type(exc).__name__)
            return
        with self._lock:
            old = self._sizes.pop(cid_hex, None)
            if old is not None:
                self._total -= old
            self._sizes[cid_hex] = size
            self._total += size
        self._evict()

    def _evict(self) -> None:
        victims: list[str] = []
        with self._lock:
            while self._total > self.max_bytes and self._sizes:
                cid_hex, size = self._sizes.popitem(last=False)
                self._total -= size
                victims.append(cid_hex)
        for cid_hex in victims:
            self._path(cid_hex).unlink(missing_ok=True)
