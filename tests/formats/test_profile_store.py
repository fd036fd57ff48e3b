"""Unit tests of the local profile store (formats/profile_store)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from formats.cas import encode_cas_object
from formats.errors import BadMagicError, ChecksumMismatchError, FormatError, TruncatedError
from formats.integrity import append_trailer
from formats.profile_store import (
    BudgetExceeded,
    CleanInUse,
    Cursor,
    CursorError,
    DiskBudget,
    NotShipped,
    PathConflict,
    Plane,
    ProfileStore,
    PublisherBusy,
    SequenceError,
    StoreError,
    StreamInUse,
    clean_profiles,
    scan_physical_usage,
)
from formats.profile_store.cursor import decode_cursor, encode_cursor
from formats.profile_store.ledger import USAGE_STATE_BYTES, decode_usage_state, encode_usage_state

PROCS = Path(__file__).with_name("profile_store_procs.py")
BIG = DiskBudget(max_project_bytes=1 << 40, minimum_free_bytes=0)
EUID = bytes(range(16))
EUID_HEX = EUID.hex()


def seg(n: int, size: int = 100) -> bytes:
    return append_trailer(bytes([n % 256]) * size)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "project" / ".baml" / "profiles-v1"


@pytest.fixture
def store(root: Path) -> ProfileStore:
    return ProfileStore(root, budget=BIG)


def ledger(root: Path) -> int:
    return decode_usage_state((root / "usage.state").read_bytes())


def assert_ledger_matches_disk(root: Path) -> None:
    assert ledger(root) == scan_physical_usage(root)


def child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PROCS), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# --------------------------------------------------------------------- layout and formats


def test_default_root_uses_project_dir_then_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAML_PROFILE_DIR", raising=False)
    assert ProfileStore.default_root(tmp_path) == tmp_path / ".baml" / "profiles-v1"
    monkeypatch.setenv("BAML_PROFILE_DIR", str(tmp_path / "elsewhere"))
    assert ProfileStore.default_root(tmp_path) == tmp_path / "elsewhere"


def test_usage_state_round_trip_and_bad_input() -> None:
    data = encode_usage_state(12345)
    assert len(data) == USAGE_STATE_BYTES and data[:8] == b"BAMLUSE1"
    assert decode_usage_state(data) == 12345
    with pytest.raises(TruncatedError):
        decode_usage_state(data[:-1])
    with pytest.raises(BadMagicError):
        decode_usage_state(b"X" + data[1:])
    with pytest.raises(ChecksumMismatchError):
        decode_usage_state(data[:15] + bytes([data[15] ^ 1]) + data[16:])


def test_cursor_format_round_trip_and_bad_input() -> None:
    encoded = encode_cursor(Cursor(meta=41, data=120))
    assert encoded == b'{"data":120,"format":"baml-publisher-cursor-v1","meta":41}\n'
    assert decode_cursor(encoded) == Cursor(41, 120)
    for bad in (b"not json", b"[]", b'{"format":"baml-publisher-cursor-v1","meta":-1,"data":0}'):
        with pytest.raises(FormatError):
            decode_cursor(bad, file="publisher.cursor")


# --------------------------------------------------------------------- writer


def test_writes_land_at_layout_paths_with_dense_sequences(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        meta = writer.write_meta(1, seg(1))
        data = writer.write_data(1, seg(2))
        writer.write_data(2, seg(3))
        assert meta == root / "streams" / EUID_HEX / "meta" / "00000000000000000001.bamlmeta"
        assert data == root / "streams" / EUID_HEX / "data" / "00000000000000000001.bamldata"
        assert (root / "streams" / EUID_HEX / "stream.lock").exists()
        with pytest.raises(SequenceError):
            writer.write_data(4, seg(4))  # gap
        with pytest.raises(SequenceError):
            writer.write_data(2, seg(4))  # repeat
    assert store.committed_high_water(EUID, Plane.META) == 1
    assert store.committed_high_water(EUID_HEX, "data") == 2
    assert store.list_committed(EUID, Plane.DATA) == [1, 2]
    assert store.list_committed(EUID, Plane.DATA, after=1) == [2]
    assert store.list_streams() == [EUID_HEX]
    assert_ledger_matches_disk(root)
    assert list((root / "tmp").iterdir()) == []


def test_write_refuses_a_file_without_a_valid_trailer(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        with pytest.raises(ChecksumMismatchError):
            writer.write_meta(1, b"x" * 100)
        assert store.list_committed(EUID, Plane.META) == []
        writer.write_meta(1, seg(1))  # the sequence was not consumed


def test_existing_final_path_is_never_overwritten(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        stray = writer.write_data(1, seg(1)).with_name("00000000000000000002.bamldata")
        stray.write_bytes(b"someone else's bytes")
        with pytest.raises(PathConflict):
            writer.write_data(2, seg(2))
        assert stray.read_bytes() == b"someone else's bytes"


def test_reopen_resumes_after_highest_sequence_and_after_released_ones(store: ProfileStore) -> None:
    with store.open_stream(EUID) as writer:
        for n in (1, 2, 3):
            writer.write_data(n, seg(n))
        writer.write_meta(1, seg(9))
    with store.open_stream(EUID) as writer:
        assert writer.high_water(Plane.DATA) == 3
        writer.write_data(4, seg(4))
    store.write_cursor(EUID, meta=1, data=4)
    store.release_segments(EUID, Plane.DATA, 4)
    store.release_segments(EUID, Plane.META, 1)
    assert store.list_committed(EUID, Plane.DATA) == []
    assert store.committed_high_water(EUID, Plane.DATA) == 4  # remembered through the cursor
    with store.open_stream(EUID) as writer:
        assert writer.high_water(Plane.DATA) == 4
        assert writer.high_water(Plane.META) == 1
        writer.write_data(5, seg(5))


def test_corrupt_tail_segment_fails_open_closed(store: ProfileStore) -> None:
    with store.open_stream(EUID) as writer:
        path = writer.write_meta(1, seg(1))
    path.write_bytes(path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(ChecksumMismatchError):
        store.open_stream(EUID)
    path.unlink()
    store.open_stream(EUID).close()  # the failed open released every lock


def test_second_open_of_a_stream_in_the_same_process_is_refused(store: ProfileStore) -> None:
    with store.open_stream(EUID):
        with pytest.raises(StreamInUse):
            store.open_stream(EUID)
        store.open_stream(bytes(16)).close()  # other streams coexist
    store.open_stream(EUID).close()


def test_crash_between_temp_write_and_rename_leaves_no_partial_file(store: ProfileStore, root: Path) -> None:
    proc = child("crash", str(root), EUID_HEX)
    proc.communicate(timeout=30)
    assert proc.returncode == -9
    leftovers = [p for p in (root / "tmp").iterdir() if p.name.endswith(".pending")]
    assert leftovers, "the killed writer left its durable temp file behind"
    assert store.list_committed(EUID, Plane.META) == []
    assert not store.stream_is_live(EUID)
    with store.open_stream(EUID) as writer:  # reopen cleans temp files and recounts
        assert list((root / "tmp").iterdir()) == []
        assert_ledger_matches_disk(root)
        assert writer.high_water(Plane.META) == 0
        writer.write_meta(1, seg(1))


def test_stream_liveness_follows_the_lock_holder_process(store: ProfileStore, root: Path) -> None:
    assert not store.stream_is_live(EUID)
    proc = child("hold", str(root), EUID_HEX)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert store.stream_is_live(EUID)
        with pytest.raises(StreamInUse):
            store.open_stream(EUID)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert not store.stream_is_live(EUID)
    store.open_stream(EUID).close()


def test_liveness_of_a_stream_open_in_this_process(store: ProfileStore) -> None:
    with store.open_stream(EUID):
        assert store.stream_is_live(EUID)
    assert not store.stream_is_live(EUID)


# --------------------------------------------------------------------- CAS


def test_put_cas_reuses_a_verified_file(store: ProfileStore, root: Path) -> None:
    value = encode_cas_object(1, b"body" * 50)
    with store.open_stream(EUID) as writer:
        path = writer.put_cas(value)
        before = path.stat()
        usage = ledger(root)
        assert writer.put_cas(value) == path
    assert path.read_bytes() == value
    assert path.stat().st_ino == before.st_ino and path.stat().st_mtime_ns == before.st_mtime_ns
    assert ledger(root) == usage
    assert path.parent.name == path.name[:2] and path.name.endswith(".bamlvalue")


def test_put_cas_rewrites_a_corrupt_unshipped_file(store: ProfileStore, root: Path) -> None:
    value = encode_cas_object(1, b"body" * 50)
    path = store.put_cas(value)
    path.write_bytes(value[:-40])  # truncated by some accident
    assert store.put_cas(value) == path
    assert path.read_bytes() == value
    assert_ledger_matches_disk(root)


def test_put_cas_never_rewrites_a_shipped_value(store: ProfileStore) -> None:
    value = encode_cas_object(2, b"table" * 10)
    path = store.put_cas(value)
    store.mark_shipped(path)
    path.write_bytes(b"damaged after shipping")
    assert store.put_cas(value) == path
    assert path.read_bytes() == b"damaged after shipping"


def test_put_cas_rejects_invalid_objects(store: ProfileStore) -> None:
    value = bytearray(encode_cas_object(1, b"abc"))
    value[60] ^= 1
    with pytest.raises(FormatError):
        store.put_cas(bytes(value))
    with pytest.raises(FormatError):
        store.put_cas(b"short")
    assert store.pending_cas() == []


# --------------------------------------------------------------------- budget and ledger


def test_writes_over_budget_raise_budget_exceeded_and_reuse_still_works(root: Path) -> None:
    store = ProfileStore(root, budget=DiskBudget(max_project_bytes=2000, minimum_free_bytes=0))
    value = encode_cas_object(1, b"v" * 500)
    with store.open_stream(EUID) as writer:
        path = writer.put_cas(value)
        writer.write_data(1, seg(1, 800))
        with pytest.raises(BudgetExceeded):
            writer.write_data(2, seg(2, 800))
        with pytest.raises(BudgetExceeded):
            writer.put_cas(encode_cas_object(1, b"w" * 500))
        assert writer.put_cas(value) == path  # reuse writes nothing
        assert writer.high_water(Plane.DATA) == 1
    assert list((root / "tmp").iterdir()) == []
    assert_ledger_matches_disk(root)


def test_free_space_floor_refuses_writes_and_reports_pressure(root: Path) -> None:
    free = {"bytes": 10_000_000}
    store = ProfileStore(
        root,
        budget=DiskBudget(max_project_bytes=1 << 30, minimum_free_bytes=1_000_000),
        free_space=lambda _p: free["bytes"],
    )
    with store.open_stream(EUID) as writer:
        writer.write_data(1, seg(1))
        assert not store.disk_pressure()
        free["bytes"] = 999_999
        assert store.disk_pressure()
        assert store.usage().below_free_floor
        with pytest.raises(BudgetExceeded):
            writer.write_data(2, seg(2))


def test_ledger_counts_written_released_and_expired_bytes(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        start = ledger(root)
        writer.write_data(1, seg(1, 1000))
        writer.write_meta(1, seg(2, 300))
        value_path = writer.put_cas(encode_cas_object(1, b"x" * 700))
    written = 1032 + 332 + 84 + 700
    assert ledger(root) == start + written
    cursor_bytes = len(encode_cursor(Cursor(1, 1)))
    store.write_cursor(EUID, meta=1, data=1)
    assert ledger(root) == start + written + cursor_bytes
    assert store.release_segments(EUID, Plane.DATA, 1) == 1032
    assert store.release_segments(EUID, Plane.META, 1) == 332
    assert ledger(root) == start + 784 + cursor_bytes
    store.mark_shipped(value_path)
    assert store.expire_shipped_values(time.time() + 3600, 3600) == 784  # conformance item 9
    assert ledger(root) == start + cursor_bytes
    assert store.usage().ledger_bytes == ledger(root)
    assert_ledger_matches_disk(root)


def test_damaged_ledger_is_rebuilt_from_the_tree(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        writer.write_data(1, seg(1))
    (root / "usage.state").write_bytes(b"garbage")
    assert store.usage().ledger_bytes == scan_physical_usage(root)
    assert_ledger_matches_disk(root)


# --------------------------------------------------------------------- publisher operations


def test_cursor_is_atomic_monotonic_and_bounded_by_high_water(store: ProfileStore, root: Path) -> None:
    assert store.read_cursor(EUID) == Cursor(0, 0)
    with store.open_stream(EUID) as writer:
        writer.write_meta(1, seg(1))
        writer.write_data(1, seg(2))
        writer.write_data(2, seg(3))
    assert store.write_cursor(EUID, meta=1, data=1) == Cursor(1, 1)
    assert store.read_cursor(EUID_HEX) == Cursor(1, 1)
    path = root / "streams" / EUID_HEX / "publisher.cursor"
    assert decode_cursor(path.read_bytes()) == Cursor(1, 1)
    with pytest.raises(CursorError):
        store.write_cursor(EUID, meta=0, data=2)  # backwards
    with pytest.raises(CursorError):
        store.write_cursor(EUID, meta=1, data=3)  # past the high-water
    store.write_cursor(EUID, meta=1, data=2)
    assert store.read_cursor(EUID) == Cursor(1, 2)
    assert_ledger_matches_disk(root)


def test_release_removes_only_shipped_segments(store: ProfileStore) -> None:
    with store.open_stream(EUID) as writer:
        for n in range(1, 6):
            writer.write_data(n, seg(n))
    store.write_cursor(EUID, meta=0, data=3)
    with pytest.raises(NotShipped):
        store.release_segments(EUID, Plane.DATA, 4)
    assert store.list_committed(EUID, Plane.DATA) == [1, 2, 3, 4, 5]
    assert store.release_segments(EUID, Plane.DATA, 2) == 2 * 132
    assert store.list_committed(EUID, Plane.DATA) == [3, 4, 5]
    assert store.release_segments(EUID, Plane.DATA, 3) == 132
    assert store.release_segments(EUID, Plane.DATA, 3) == 0  # idempotent
    assert store.list_committed(EUID, Plane.DATA) == [4, 5]


def test_pending_and_mark_shipped(store: ProfileStore, root: Path) -> None:
    a = store.put_cas(encode_cas_object(1, b"a"))
    b = store.put_cas(encode_cas_object(2, b"b"))
    (a.parent / "not-a-cas-file.txt").write_bytes(b"junk")
    assert {f.path for f in store.pending_cas()} == {a, b}
    marker = store.mark_shipped(a)
    assert marker == a.with_name(a.name + ".shipped") and marker.stat().st_size == 0
    first_mark = marker.stat().st_mtime_ns
    store.mark_shipped(a)  # idempotent; keeps the first ship time
    assert marker.stat().st_mtime_ns == first_mark
    assert [f.path for f in store.pending_cas()] == [b]
    with pytest.raises(StoreError):
        store.mark_shipped(root / "streams" / "x.bamlvalue")
    b.unlink()
    with pytest.raises(NotShipped):
        store.mark_shipped(b)


def age_marker(path: Path, seconds_ago: float) -> None:
    marker = path.with_name(path.name + ".shipped")
    stamp = time.time() - seconds_ago
    os.utime(marker, (stamp, stamp))


def test_retention_removes_old_shipped_values_and_never_unshipped(store: ProfileStore, root: Path) -> None:
    old = store.put_cas(encode_cas_object(1, b"old" * 100))
    young = store.put_cas(encode_cas_object(1, b"young" * 100))
    unshipped = store.put_cas(encode_cas_object(1, b"pending" * 100))
    store.mark_shipped(old)
    store.mark_shipped(young)
    age_marker(old, 7200)
    age_marker(young, 60)
    freed = store.expire_shipped_values(time.time(), 3600)
    assert freed == 84 + 300
    assert not old.exists() and not old.with_name(old.name + ".shipped").exists()
    assert young.exists() and unshipped.exists()
    assert store.expire_shipped_values(time.time(), 3600, force=True) == 84 + 500
    assert not young.exists() and unshipped.exists()
    assert_ledger_matches_disk(root)


def test_disk_pressure_frees_shipped_values_first_and_never_unshipped_segments(root: Path) -> None:
    budget = DiskBudget(max_project_bytes=6000, minimum_free_bytes=0)
    store = ProfileStore(root, budget=budget)
    with store.open_stream(EUID) as writer:
        for n in (1, 2, 3):
            writer.write_data(n, seg(n, 900))
        values = [writer.put_cas(encode_cas_object(1, bytes([i]) * 700)) for i in range(3)]
    for age, path in zip((300, 200, 100), values, strict=True):
        store.mark_shipped(path)
        age_marker(path, age)
    store.write_cursor(EUID, meta=0, data=1)
    # Tighten the budget so that freeing two values is enough.
    store.budget = DiskBudget(max_project_bytes=ledger(root) - 1200, minimum_free_bytes=0)
    assert store.disk_pressure()
    freed = store.relieve_pressure(time.time())
    assert freed == 2 * 784  # the two oldest shipped values, nothing else
    assert [p.exists() for p in values] == [False, False, True]
    assert store.list_committed(EUID, Plane.DATA) == [1, 2, 3]
    assert not store.disk_pressure()
    # Under harder pressure: every shipped value, then shipped segments; never unshipped ones.
    store.budget = DiskBudget(max_project_bytes=USAGE_STATE_BYTES, minimum_free_bytes=0)
    store.relieve_pressure(time.time())
    assert not values[2].exists()
    assert store.list_committed(EUID, Plane.DATA) == [2, 3]
    assert_ledger_matches_disk(root)


def test_one_publisher_per_root(store: ProfileStore, root: Path) -> None:
    lease = store.acquire_publisher_lock()
    with pytest.raises(PublisherBusy):
        ProfileStore(root).acquire_publisher_lock()
    lease.close()
    with ProfileStore(root).acquire_publisher_lock() as again:
        assert again.held


def test_clean_refuses_while_open_and_removes_the_root_after(store: ProfileStore, root: Path) -> None:
    with store.open_stream(EUID) as writer:
        writer.write_data(1, seg(1))
        with pytest.raises(CleanInUse):
            clean_profiles(root)
    assert clean_profiles(root)
    assert not root.exists()
    assert not clean_profiles(root)


# --------------------------------------------------------------------- batched and lock-free publisher reads


def test_mark_shipped_many_marks_in_one_call_reports_missing_and_keeps_first_time(
    store: ProfileStore, root: Path
) -> None:
    paths = [store.put_cas(encode_cas_object(1, bytes([i]) * 50)) for i in range(20)]
    store.mark_shipped(paths[0])
    age_marker(paths[0], 500)
    first = paths[0].with_name(paths[0].name + ".shipped").stat().st_mtime_ns
    gone = paths[19]
    gone.unlink()
    missing = store.mark_shipped_many(paths)
    assert missing == [gone]
    assert store.pending_cas() == []
    for path in paths[:19]:
        marker = path.with_name(path.name + ".shipped")
        assert marker.exists() and marker.stat().st_size == 0
    assert paths[0].with_name(paths[0].name + ".shipped").stat().st_mtime_ns == first
    assert not gone.with_name(gone.name + ".shipped").exists()  # never a marker without its value
    with pytest.raises(StoreError):
        store.mark_shipped_many([root / "streams" / "x.bamlvalue"])
    store.resync_usage()
    assert_ledger_matches_disk(root)


def test_pending_cas_in_lists_one_directory_by_name(store: ProfileStore) -> None:
    a = store.put_cas(encode_cas_object(1, b"a"))
    bucket = a.parent.name
    (a.parent / "not-a-cas-file.txt").write_bytes(b"junk")
    assert bucket in store.cas_buckets()
    assert [f.path for f in store.pending_cas_in(bucket)] == [a]
    assert store.pending_cas_in(bucket)[0].size_bytes == a.stat().st_size
    store.mark_shipped(a)
    assert store.pending_cas_in(bucket) == []
    assert [f.path for f in store.shipped_cas()] == [a]
    assert store.pending_cas_in("zz") == []


def test_expire_shipped_says_when_the_oldest_kept_value_falls_due(store: ProfileStore) -> None:
    old = store.put_cas(encode_cas_object(1, b"old" * 10))
    young = store.put_cas(encode_cas_object(1, b"young" * 10))
    store.mark_shipped_many([old, young])
    age_marker(old, 7200)
    age_marker(young, 100)
    now = time.time()
    old_size = old.stat().st_size
    expiry = store.expire_shipped(now, 3600)
    assert expiry.freed == old_size
    assert not old.exists() and young.exists()
    young_marked = young.with_name(young.name + ".shipped").stat().st_mtime
    assert expiry.next_due == pytest.approx(young_marked + 3600)
    assert store.expire_shipped(now, 3600).freed == 0
    store.expire_shipped_values(now, 0, force=True)
    assert store.expire_shipped(now, 3600) == type(expiry)(0, None)


def test_ledger_signature_changes_on_every_commit_and_release_only(store: ProfileStore) -> None:
    with store.open_stream(EUID) as writer:
        writer.write_data(1, seg(1))
        first = store.ledger_signature()
        assert first is not None and first[0] == store.usage().ledger_bytes
        assert store.ledger_signature() == first  # reading changes nothing
        store.read_cursor(EUID)
        store.list_committed(EUID, Plane.DATA)
        assert store.ledger_signature() == first
        writer.write_data(2, seg(2))
        second = store.ledger_signature()
        assert second != first
        store.write_cursor(EUID, meta=0, data=2)
        third = store.ledger_signature()
        assert third != second
        store.release_segments(EUID, Plane.DATA, 2)
        assert store.ledger_signature() != third
    (store.root / "usage.state").write_bytes(b"garbage")
    assert store.ledger_signature() is None


def test_accounting_recreates_a_removed_layout(root: Path) -> None:
    store = ProfileStore(root)
    store.put_cas(encode_cas_object(1, b"x"))
    clean_profiles(root)
    path = store.put_cas(encode_cas_object(1, b"y"))  # same handle, root gone in between
    assert path.exists()
    assert_ledger_matches_disk(root)
