"""Roots written by the synthetic profiler (bulk and live) ship completely: every segment, table,
large value and small value lands under its key with the profiler's bytes."""

from __future__ import annotations

import time

from publisher_harness import SCOPE
from synth_check import RootSnapshot, assert_all_shipped, snapshot

from formats.synth import LiveSynth, SynthConfig, synthesize
from publisher import FlushHooks, Publisher


def _ship_until_done(pub: Publisher, rounds: int = 10) -> None:
    for _ in range(rounds):
        report = pub.run_once(60)
        assert report is not None, pub.stopped_reason
        assert report.ok and not report.failed, report
        if not report.more and report.shipped == 0:
            return
    raise AssertionError("the publisher kept finding work")


def test_bulk_synth_root_ships_everything(env) -> None:  # type: ignore[no-untyped-def]
    synthesize(
        env.root,
        SynthConfig(seed=11, executions=300, processes=2, p_large_value=0.02, segment_target_bytes=64 * 1024),
        keep_truth=False,
    )
    snap = snapshot(env.root)
    assert len(snap.segments) > 4 and snap.cas_files
    _ship_until_done(env.publisher())
    counts = assert_all_shipped(snap, env.bucket_keys(), lambda k: env.moto.get(env.bucket, k), SCOPE)
    assert {"meta_segment", "data_segment", "value", "table", "value_pack"} <= set(counts)


def test_live_synth_root_ships_while_written_and_after_stop(env) -> None:  # type: ignore[no-untyped-def]
    synth = LiveSynth(
        env.root,
        SynthConfig(seed=12, rate_per_second=100.0, executions=10**9, p_large_value=0.02),
        tick_s=0.02,
    ).start()
    seen = RootSnapshot()
    # Just before the cursor moves, every file the flush shipped is still on disk: record it, since
    # the release step deletes it right after.
    pub = Publisher(env.settings(), hooks=FlushHooks(before_cursor=lambda: seen.merge(snapshot(env.root))))
    try:
        time.sleep(1.5)
        first = pub.run_once(60)  # while the stream is live (stream.lock held)
        assert first is not None and first.ok and first.shipped > 0, first
    finally:
        synth.stop()
    seen.merge(snapshot(env.root))
    _ship_until_done(pub)
    counts = assert_all_shipped(seen, env.bucket_keys(), lambda k: env.moto.get(env.bucket, k), SCOPE)
    assert counts.get("meta_segment") and counts.get("data_segment") and counts.get("table")
