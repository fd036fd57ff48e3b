"""The publisher's steady-state cost: what it skips when nothing changed (issue 4 follow-up).

Against moto and the real gateway app (the ``env`` fixture), plus the pure CAS index on a store.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from publisher_harness import EUID, data_bytes, value_file, write_stream

from formats.cas import encode_cas_object
from formats.profile_store import ProfileStore
from publisher.cas_scan import PendingCasIndex


def _age_dirs(root: Path, seconds: float = 5.0) -> None:
    """Push every directory's mtime into the past, as if the last change were a while ago."""
    stamp = time.time() - seconds
    for directory, _, _ in os.walk(root):
        os.utime(directory, (stamp, stamp))


def test_cas_index_relists_only_directories_that_changed(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "profiles-v1")
    paths = [store.put_cas(encode_cas_object(1, bytes([i]) * 40)) for i in range(40)]
    buckets = {p.parent.name for p in paths}
    index = PendingCasIndex(store)
    assert {f.path for f in index.pending()} == set(paths)
    assert index.listed == len(buckets)
    _age_dirs(store.root)
    index.invalidate()
    index.pending()
    assert {f.path for f in index.pending()} == set(paths)
    assert index.listed == 0  # nothing changed: no directory listed
    store.mark_shipped(paths[0])
    new = store.put_cas(encode_cas_object(1, b"new value"))
    pending = {f.path for f in index.pending()}
    assert pending == (set(paths) - {paths[0]}) | {new}
    assert index.listed == len({paths[0].parent, new.parent})
    assert index.store.pending_cas() == sorted(index.pending(), key=lambda f: f.path)


def test_cas_index_does_not_trust_a_directory_changed_within_the_clock_tick(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "profiles-v1")
    first = store.put_cas(encode_cas_object(1, b"first"))
    index = PendingCasIndex(store)
    assert [f.path for f in index.pending()] == [first]
    # Same directory mtime as at the listing (a coarse clock), but the directory changed after it.
    stamp = os.stat(first.parent).st_mtime_ns
    second = first.parent / (first.name[:2] + "f" * 62 + ".bamlvalue")
    second.write_bytes(b"not verified here")
    os.utime(first.parent, ns=(stamp, stamp))
    assert second in {f.path for f in index.pending()}


def test_no_flush_work_while_nothing_changes_then_ships_new_files(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=2, meta=1, values=[value_file(b"V" * 100)])
    pub = env.publisher()
    assert pub._ensure_lease()
    pub._refresh_config(force=True)
    flusher = pub._flusher
    first = flusher.flush(pub.config)
    assert first.ok and first.shipped > 0
    assert not flusher.unchanged_since_clean_flush(60)  # this flush released segments itself
    second = flusher.flush(pub.config)
    assert second.ok and second.shipped == 0
    assert flusher.unchanged_since_clean_flush(60)
    assert not flusher.unchanged_since_clean_flush(0)  # the backstop: a full flush after max_age
    store = ProfileStore(env.root)
    with store.open_stream(bytes.fromhex("aa" * 16)) as w:
        w.write_data(1, data_bytes(w.euid, 1))
    assert not flusher.unchanged_since_clean_flush(60)
    third = flusher.flush(pub.config)
    assert third.ok and third.shipped == 1
    pub.close()


def test_idle_streams_are_skipped_until_their_directories_change(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=2, meta=2)
    pub = env.publisher()
    assert pub.run_once(30) is not None
    _age_dirs(env.root)
    collector = pub._flusher.collector
    assert pub.run_once(30) is not None  # finds the stream caught up: remembered as idle
    assert EUID in collector._idle_streams
    store = ProfileStore(env.root)
    with store.open_stream(EUID) as w:
        w.write_data(3, data_bytes(EUID, 3))
    report = pub.run_once(30)
    assert report is not None and report.shipped == 1 and report.cursors[EUID] == (2, 3)
