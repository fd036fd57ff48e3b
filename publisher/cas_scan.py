"""Pending CAS files without relisting the whole CAS tree every flush.

Shipped values stay on disk for the retention window (an hour by default), so a full listing each
flush grows with everything shipped in the last hour. A ``<hex2>`` directory whose mtime did not
change since it was listed holds the same names, so its pending list is reused: only directories
that gained or lost a file are listed again. Directory timestamps are coarse (a clock tick), so a
directory modified within ``fresh_ns`` of the listing is never trusted, and everything is listed
again every ``full_rescan_seconds`` as a backstop (a clock step, a filesystem without mtimes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from formats.profile_store import CasFile, ProfileStore

_FRESH_NS = 1_000_000_000


class PendingCasIndex:
    """``pending()``: the store's ``pending_cas()``, relisting only changed directories."""

    def __init__(
        self,
        store: ProfileStore,
        *,
        full_rescan_seconds: float = 60.0,
        fresh_ns: int = _FRESH_NS,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.store = store
        self.full_rescan_seconds = full_rescan_seconds
        self.fresh_ns = fresh_ns
        self._clock_ns = clock_ns
        self._cache: dict[str, tuple[int, list[CasFile]]] = {}
        self._last_full: float | None = None
        self.listed = 0  # directories listed by the last call (for tests and the benchmark)

    def invalidate(self) -> None:
        self._cache.clear()

    def pending(self) -> list[CasFile]:
        mono = time.monotonic()
        full = self._last_full is None or mono - self._last_full >= self.full_rescan_seconds
        if full:
            self._cache.clear()
            self._last_full = mono
        out: list[CasFile] = []
        fresh: dict[str, tuple[int, list[CasFile]]] = {}
        listed = 0
        for bucket in self.store.cas_buckets():
            try:
                # Stat before listing: a change after the stat leaves a newer mtime, seen next time.
                mtime = os.stat(self.store.cas_bucket_dir(bucket)).st_mtime_ns
            except FileNotFoundError:
                continue
            cached = self._cache.get(bucket)
            if cached is not None and cached[0] == mtime:
                files = cached[1]
            else:
                files = self.store.pending_cas_in(bucket)
                listed += 1
            if self._clock_ns() - mtime > self.fresh_ns:
                fresh[bucket] = (mtime, files)
            out.extend(files)
        self._cache = fresh
        self.listed = listed
        return out
