"""A backlog ships in bounded flushes: the cursor moves every flush, and a restart resumes there.

Against real servers (moto over HTTP, the real gateway app, the recording proxy of
publisher_harness), as in test_conformance.py. Issue 12: one flush of a 3,600-segment backlog was
still running after 500 s with the cursor unmoved, so a restart would have started over.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

from publisher_harness import EUID, TOKEN, write_stream

from formats.profile_store import ProfileStore
from formats.profile_store.cursor import Cursor
from publisher import FlushHooks, Publisher

DATA, META, PER_FLUSH = 60, 120, 30


def _segment_puts(seen: list[tuple[str, str, int | None]]) -> list[tuple[str, int]]:
    out = []
    for method, path, status in seen:
        if method != "PUT" or status != 200:
            continue
        for plane in ("meta", "data"):
            if f"/{plane}/" in path and path.endswith(f".baml{plane}.zst"):
                out.append((plane, int(path.rsplit("/", 1)[1].split(".")[0])))
    return out


def _ship_all(pub: Publisher) -> int:
    flushes = 0
    while True:
        report = pub.run_once(60)
        assert report is not None and report.ok, report
        flushes += 1
        if not report.more:
            return flushes


def test_backlog_ships_in_bounded_flushes_and_the_cursor_advances_between_them(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=DATA, meta=META)
    store = ProfileStore(env.root)
    cursors: list[Cursor] = []  # the cursor on disk each time a flush is about to write its own
    hooks = FlushHooks(before_cursor=lambda: cursors.append(store.read_cursor(EUID)))
    pub = Publisher(env.settings(max_flush_objects=PER_FLUSH), hooks=hooks)
    pub.start()
    deadline = time.monotonic() + 60
    while store.read_cursor(EUID) != Cursor(META, DATA) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pub.flush_and_join(10)
    assert store.read_cursor(EUID) == Cursor(META, DATA)
    # (META + DATA) / PER_FLUSH flushes at least, each writing the cursor once, each further on.
    assert len(cursors) >= (META + DATA) // PER_FLUSH
    assert cursors[0] == Cursor(0, 0)
    for a, b in itertools.pairwise(cursors):
        assert a.meta <= b.meta and a.data <= b.data and a.meta + a.data < b.meta + b.data, cursors
    # Pipelined flushes keep the upload order: each meta after every data segment it names
    # (meta i names data through min(i, DATA)) and metas one at a time, ascending.
    puts = _segment_puts(env.s3_proxy.seen)
    metas = [seq for plane, seq in puts if plane == "meta"]
    assert metas == list(range(1, META + 1))
    for index, (plane, seq) in enumerate(puts):
        if plane == "meta":
            landed = {s for p, s in puts[:index] if p == "data"}
            assert set(range(1, min(seq, DATA) + 1)) <= landed, seq
    assert sorted(s for p, s in puts if p == "data") == list(range(1, DATA + 1))


def test_restart_mid_backlog_resumes_at_the_cursor_without_reshipping_what_it_covers(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=DATA, meta=META)
    child = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("backlog_crash_child.py")),
            env.gw_proxy.url,
            TOKEN,
            str(env.root),
            "4",  # dies just before the 4th cursor write: three bounded flushes are under the cursor
            str(PER_FLUSH),
        ],
        capture_output=True,
        timeout=90,
        cwd=Path(__file__).parents[2],
    )
    assert child.returncode == 17, child.stderr.decode()[-2000:]
    store = ProfileStore(env.root)
    at_crash = store.read_cursor(EUID)
    assert 0 < at_crash.meta < META and 0 < at_crash.data < DATA  # the cursor moved mid-backlog
    before = _segment_puts(env.s3_proxy.seen)
    env.s3_proxy.clear()

    pub = env.publisher(max_flush_objects=PER_FLUSH)
    _ship_all(pub)
    assert store.read_cursor(EUID) == Cursor(META, DATA)
    after = _segment_puts(env.s3_proxy.seen)
    # Nothing the cursor covered is authorized or PUT again: the restart starts at the cursor.
    assert all(seq > (at_crash.meta if plane == "meta" else at_crash.data) for plane, seq in after)
    outcomes = pub.stats()["authorize_outcomes"]
    authorized = sum(outcomes.values())
    assert authorized == (META - at_crash.meta) + (DATA - at_crash.data)
    # Objects that landed above the cursor before the crash come back as duplicates: harmless,
    # answered stored and counted, never PUT twice.
    duplicates = outcomes.get("meta_segment/stored", 0) + outcomes.get("data_segment/stored", 0)
    assert duplicates == authorized - len(after)
    assert not set(before) & set(after)
    # Across the crash every meta reached the bucket once, in ascending order.
    metas = [seq for plane, seq in before + after if plane == "meta"]
    assert metas == sorted(metas) and len(set(metas)) == len(metas)
    keys = env.bucket_keys()
    assert sum(k.endswith(".bamlmeta.zst") for k in keys) == META
    assert sum(k.endswith(".bamldata.zst") for k in keys) == DATA
