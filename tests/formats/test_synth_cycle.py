"""The publish cycle as the real writer runs it (meta-pre, data, meta-post), and the long mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_disk import read_stream

from formats import meta_segment as ms
from formats.synth import SynthConfig, SynthConfigError, synthesize

CONFIG = SynthConfig(
    seed=11,
    executions=60,
    processes=1,
    rate_per_second=10.0,
    publish_interval_ns=500_000_000,
    segment_target_bytes=16 * 1024,
    value_pool_size=16,
)


def test_cycle_is_meta_pre_then_data_then_meta_post(tmp_path: Path) -> None:
    root = tmp_path / "p"
    truth = synthesize(root, CONFIG)
    disk = read_stream(root, truth.streams[0])
    kinds = {}
    for seq, seg in disk.meta.items():
        types = {type(r) for r in seg.records}
        # Each meta object is one batch: admitted records (meta-pre) or RootEnded records (meta-post).
        assert types <= {ms.StreamStarted, ms.EngineStarted, ms.RootStarted} or types == {ms.RootEnded}, seq
        kinds[seq] = "post" if types == {ms.RootEnded} else "pre"
    assert "pre" in kinds.values() and "post" in kinds.values()
    same_cycle = 0
    for eid, (end_seq, end) in disk.ended.items():
        start_seq, _ = disk.started[eid]
        pre, post = disk.meta[start_seq], disk.meta[end_seq]
        # Every group of the execution is written after its meta-pre and before its meta-post.
        assert pre.data_high_water < end.data_first_seq <= end.data_last_seq <= post.data_high_water
        if end_seq == start_seq + 1:
            # Started and ended in one cycle: meta-pre seq k, its data, meta-post seq k+1.
            same_cycle += 1
            assert (kinds[start_seq], kinds[end_seq]) == ("pre", "post")
            assert post.data_high_water > pre.data_high_water
            written = [s for s in range(pre.data_high_water + 1, post.data_high_water + 1)]
            assert set(range(end.data_first_seq, end.data_last_seq + 1)) <= set(written)
    assert same_cycle > 0
    # A cycle with both kinds writes two meta objects: meta-pre directly followed by meta-post.
    pairs = [s for s in kinds if kinds[s] == "pre" and kinds.get(s + 1) == "post"]
    assert pairs
    # StreamStarted is record 1 of meta object 1, the EngineStarted follows it.
    first = disk.meta[1].records
    assert isinstance(first[0], ms.StreamStarted) and isinstance(first[1], ms.EngineStarted)


def test_long_mode_starts_each_engine_once_and_the_second_late(tmp_path: Path) -> None:
    config = SynthConfig.long_run(300, seed=4)
    assert (config.processes, config.engines_per_process, config.late_engine_after_meta) == (1, 2, 150)
    root = tmp_path / "p"
    truth = synthesize(root, config)
    assert len(truth.streams) == 1
    disk = read_stream(root, truth.streams[0])
    assert len(disk.meta) >= 300 and set(disk.meta) == set(range(1, len(disk.meta) + 1))
    engine_seqs: dict[int, list[int]] = {}
    for seq, e in disk.engines:
        engine_seqs.setdefault(e.engine_id, []).append(seq)
    assert sorted(engine_seqs) == [1, 2]
    assert all(len(seqs) == 1 for seqs in engine_seqs.values()), "EngineStarted exactly once per engine"
    assert engine_seqs[1] == [1]
    late = engine_seqs[2][0]
    assert late > 150, "the second engine starts far into the stream"
    # No root of engine 2 is admitted before its EngineStarted; it runs roots once started.
    engine2_starts = [seq for _, (seq, r) in disk.started.items() if r.root.engine_id == 2]
    assert engine2_starts and min(engine2_starts) == late
    first_of_2 = disk.meta[late].records
    kinds = [type(r) for r in first_of_2 if not isinstance(r, ms.RootStarted) or r.root.engine_id == 2]
    assert kinds.index(ms.EngineStarted) < kinds.index(ms.RootStarted)
    assert all(e.index_state == "complete" for e in truth.executions)


def test_long_and_late_engine_options_are_checked() -> None:
    with pytest.raises(SynthConfigError, match="late_engine_after_meta"):
        SynthConfig(late_engine_after_meta=10, engines_per_process=1)
    with pytest.raises(SynthConfigError, match="min_meta_objects"):
        SynthConfig(min_meta_objects=-1)
    assert SynthConfig().min_meta_objects == 0 and SynthConfig().builds == 1
