"""A dataset's index lease: while one process builds or folds a query index, the others do not
compact the dataset.

In pylance 14 every compaction (a ``Rewrite``) preempts every index build or fold (a
``CreateIndex``) in progress on the same dataset, whatever fragments each touches (checked: a
compaction that excluded the fragments a fold covered, or only those, still preempted it). Every
worker's committer compacts the datasets it writes every few seconds under load, so with more
than one worker a fold that takes longer than that always loses: the hour's soak of 2026-12-05
saw an IndexAndCompact tick fail 8 attempts over 36 minutes, and the committers' own n-gram folds
(seconds at least) lose the same way to the other worker. A lost fold leaves the rows it was
folding to every query's unindexed scan.

A lock in one process cannot stop another process's compaction, so the lease lives where every
writer already looks: the dataset's manifest config (``update_config``, an ``UpdateConfig``
commit that neither compactions, appends nor index folds conflict with). The folder commits
``owner@until`` before its long fold and deletes it after; a committer that opens the dataset to
compact reads the config it already holds (no request) and leaves the compaction for a later
commit while another's lease is live. ``until`` bounds a folder that died: its lease is ignored
once past. Two folders racing to take a lease conflict (``UpdateConfig`` against
``UpdateConfig``); the loser sees the winner's lease and does not fold.

``until`` is short, and the holder renews it while it folds (every quarter of the lease, from a
thread beside the fold: an ``UpdateConfig`` the fold's commit does not conflict with). A fold
longer than the lease keeps it; a folder that died leaves the dataset uncompacted only until its
last renewal lapses. With one long lease instead (15 minutes), a worker killed in a tick's fold of
``value_leaves_v1`` held every committer's compaction of it, and the tick's retry, for the rest
of a soak (2026-12-06, docs/projection-runtime.md).

The lookup indexes' folds (``DatasetSpec.lookup``) are quick and take no lease; nor does an
erasure's compaction, which must remove erased values whatever is being folded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import lance
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

log = logging.getLogger("baml_studio.index_lease")

LEASE_KEY = "baml_studio.index_lease"
# How long a lease lasts past its last renewal: what a folder that died costs (the dataset left
# uncompacted). Renewed every RENEW_FRACTION of it, so a renewal delayed by a loaded machine or a
# slow store (seconds) does not let it lapse under a live fold.
DEFAULT_LEASE_S = 120.0
RENEW_FRACTION = 0.25
# How long the tick waits for another's live lease: a fold of minutes (an n-gram fold of a tick:
# seconds to 2 minutes on moto), renewing; a dead holder's lease lapses sooner.
TICK_WAIT_S = 900.0
RELEASE_ATTEMPTS = 5


@dataclass(frozen=True)
class IndexLease:
    owner: str
    until: float  # Unix time (seconds); the lease is ignored after it

    def encode(self) -> str:
        return f"{self.owner}@{self.until:.3f}"

    @classmethod
    def decode(cls, text: str) -> IndexLease | None:
        owner, sep, until = text.rpartition("@")
        try:
            return cls(owner, float(until)) if sep and owner else None
        except ValueError:
            return None  # not ours to read: treated as no lease rather than blocking compaction

    def live(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) < self.until


def read_lease(ds: lance.LanceDataset) -> IndexLease | None:
    """The lease in this version's manifest config, live or not (no request: the manifest is read)."""
    text = ds.config().get(LEASE_KEY)
    return IndexLease.decode(text) if text else None


def held_by_another(ds: lance.LanceDataset, owner: str | None = None, now: float | None = None) -> bool:
    """Whether someone other than ``owner`` holds a live lease in this version."""
    lease = read_lease(ds)
    return lease is not None and lease.owner != owner and lease.live(now)


def new_owner() -> str:
    """A lease owner unique to one fold: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def take(ds: lance.LanceDataset, owner: str, seconds: float = DEFAULT_LEASE_S) -> bool:
    """Commit ``owner``'s lease on the newest version ``ds`` stands for; False when another holds
    a live one or took one meanwhile (two ``UpdateConfig`` commits conflict: one loses)."""
    if held_by_another(ds, owner):
        return False
    # A failure: another folder's UpdateConfig committed first (Lance: "Incompatible
    # transaction"), or the store failed; either way this fold runs later, not unprotected.
    return _commit(ds, owner, seconds, "taken")


def renew(newest: Callable[[], lance.LanceDataset], owner: str, seconds: float = DEFAULT_LEASE_S) -> bool:
    """Move ``owner``'s lease on the newest version to ``seconds`` from now; False when it is no
    longer ``owner``'s (it lapsed and another took it) or the commit failed (the next renewal
    tries again: the lease is still live until it lapses)."""
    ds = newest()
    lease = read_lease(ds)
    if lease is None or lease.owner != owner:
        return False
    return _commit(ds, owner, seconds, "renewed")


def _commit(ds: lance.LanceDataset, owner: str, seconds: float, what: str) -> bool:
    """Commit ``owner``'s lease until ``seconds`` from now on ``ds``; False when the commit failed."""
    try:
        ds.update_config({LEASE_KEY: IndexLease(owner, time.time() + seconds).encode()})
    except OSError as exc:
        log.info("index lease not %s (%s)", what, type(exc).__name__)
        return False
    return True


class _Renewer:
    """Renews a held lease every ``RENEW_FRACTION`` of it from a daemon thread until stopped."""

    def __init__(self, newest: Callable[[], lance.LanceDataset], owner: str, seconds: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(newest, owner, seconds), name="index-lease-renewer", daemon=True
        )
        self._thread.start()

    def _run(self, newest: Callable[[], lance.LanceDataset], owner: str, seconds: float) -> None:
        while not self._stop.wait(seconds * RENEW_FRACTION):
            try:
                renew(newest, owner, seconds)
            except Exception as exc:  # a failed open: the lease stays live until it lapses
                log.info("index lease not renewed (%s)", type(exc).__name__)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def release(newest: Callable[[], lance.LanceDataset], owner: str, attempts: int = RELEASE_ATTEMPTS) -> None:
    """Remove ``owner``'s lease from the dataset's newest version (``newest`` opens it), if it is
    still there. A removal that fails is tried again on the newest version: a lease left behind
    holds every other process's compaction of the dataset until it lapses (the hour's soak of
    2026-12-05 left one once)."""

    def remove() -> None:
        ds = newest()
        lease = read_lease(ds)
        if lease is not None and lease.owner == owner:
            ds.delete_config_keys([LEASE_KEY])

    try:
        Retrying(
            retry=retry_if_exception_type(OSError),
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=0.2, max=2.0),
            reraise=True,
        )(remove)
    except OSError as exc:
        log.warning(
            "index lease not released after %d attempts (%s); other processes compact the dataset"
            " again once it lapses",
            attempts,
            type(exc).__name__,
        )


@contextlib.contextmanager
def index_lease(
    newest: Callable[[], lance.LanceDataset],
    seconds: float = DEFAULT_LEASE_S,
    *,
    wait_s: float = 0.0,
    poll_s: float = 2.0,
    beat: Callable[[], None] | None = None,
) -> Iterator[bool]:
    """Hold a lease on the dataset for the block, renewed while it runs; yields whether it is held
    (False: another process holds one). ``newest`` opens the dataset's newest version. With
    ``wait_s``, a lease held by another is waited for that long at most (looked at every
    ``poll_s``, ``beat`` called each time): the holder is folding, and a fold without the lease
    loses to the next compaction once the holder releases it."""
    owner = new_owner()
    deadline = time.monotonic() + wait_s
    held = take(newest(), owner, seconds)
    while not held and time.monotonic() < deadline:
        time.sleep(poll_s)
        if beat is not None:
            beat()
        held = take(newest(), owner, seconds)
    renewer = _Renewer(newest, owner, seconds) if held else None
    try:
        yield held
    finally:
        if renewer is not None:
            renewer.stop()
            release(newest, owner)
