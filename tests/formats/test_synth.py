"""The synthetic profiler: deterministic bytes and the real write cycle's rules."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from formats import meta_segment as ms
from formats.data_segment import decode_data_segment
from formats.inspect import inspect_path
from formats.synth import LiveSynth, SynthConfig, SynthConfigError, synthesize

CONFIG = SynthConfig(
    seed=5,
    executions=80,
    processes=2,
    engines_per_process=2,
    rate_per_second=30.0,
    unfinished_per_process=1,
    p_long=0.15,
    p_failed=0.1,
    segment_target_bytes=16 * 1024,
    single_value_bytes=64 * 1024,
    p_large_value=0.03,
    value_pool_size=16,
)


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".bamlmeta", ".bamldata", ".bamlvalue")
    }


def test_same_seed_gives_identical_bytes(tmp_path: Path) -> None:
    a = synthesize(tmp_path / "a", CONFIG)
    b = synthesize(tmp_path / "b", CONFIG)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert [e.to_json() for e in a.executions] == [e.to_json() for e in b.executions]
    synthesize(tmp_path / "c", CONFIG.replace(seed=6))
    assert _files(tmp_path / "a") != _files(tmp_path / "c")


def test_write_cycle_rules(tmp_path: Path) -> None:
    root = tmp_path / "p"
    truth = synthesize(root, CONFIG)
    assert truth.calls > truth.spans > 0
    for stream in truth.streams:
        sdir = root / "streams" / stream
        meta_seqs = sorted(int(p.stem) for p in (sdir / "meta").iterdir())
        data_seqs = sorted(int(p.stem) for p in (sdir / "data").iterdir())
        assert meta_seqs == list(range(1, len(meta_seqs) + 1)), "dense meta sequences"
        assert data_seqs == list(range(1, len(data_seqs) + 1)), "dense data sequences"
        euid = bytes.fromhex(stream)
        roots_in_data: dict[int, set[bytes]] = {}
        for seq in data_seqs:
            seg = decode_data_segment(
                (sdir / "data" / f"{seq:020d}.bamldata").read_bytes(), expected_euid=euid
            )
            roots_in_data[seq] = {g.root.to_bytes() for g in seg.groups}
            payload = sum(65 + len(g.cct) + len(g.evidence) for g in seg.groups)
            assert payload <= CONFIG.segment_target_bytes or len(seg.groups) == 1, "segment within target"
        engines_seen: set[int] = set()
        started_roots: set[bytes] = set()
        high_water = 0
        for seq in meta_seqs:
            seg = ms.decode_meta_segment(
                (sdir / "meta" / f"{seq:020d}.bamlmeta").read_bytes(), expected_euid=euid
            )
            assert seg.data_high_water >= high_water
            high_water = seg.data_high_water
            for i, record in enumerate(seg.records):
                if isinstance(record, ms.StreamStarted):
                    assert (seq, i) == (1, 0)
                elif isinstance(record, ms.EngineStarted):
                    engines_seen.add(record.engine_id)
                elif isinstance(record, ms.RootStarted):
                    assert record.root.engine_id in engines_seen, "EngineStarted before its roots"
                    started_roots.add(record.root.to_bytes())
                elif isinstance(record, ms.RootEnded):
                    key = record.root.to_bytes()
                    assert key in started_roots
                    # RootEnded only after its groups: the whole range was on disk when this file was written.
                    assert 1 <= record.data_first_seq <= record.data_last_seq <= seg.data_high_water
                    holding = [
                        s
                        for s in range(record.data_first_seq, record.data_last_seq + 1)
                        if key in roots_in_data[s]
                    ]
                    assert holding[0] == record.data_first_seq and holding[-1] == record.data_last_seq
                    assert len(holding) == record.data_segment_count
                    assert not any(key in roots_in_data[s] for s in data_seqs if s > record.data_last_seq)


def test_config_rejects_impossible_values() -> None:
    with pytest.raises(SynthConfigError, match="processes"):
        SynthConfig(processes=0)
    with pytest.raises(SynthConfigError, match="p_failed"):
        SynthConfig(p_failed=0.9, p_cancelled=0.2)
    with pytest.raises(SynthConfigError, match="llm_calls"):
        SynthConfig(llm_calls=(3, 1))


def test_live_mode_writes_at_rate_and_matches_truth(tmp_path: Path) -> None:
    root = tmp_path / "live"
    config = CONFIG.replace(
        rate_per_second=40.0, publish_interval_ns=200_000_000, unfinished_per_process=0, processes=1
    )
    with LiveSynth(root, config, truth_path=tmp_path / "truth.jsonl") as synth:
        time.sleep(1.2)
        during = inspect_path(root)
        # stream.lock is held: an execution without RootEnded is running, never abandoned.
        assert during.executions and all(e["status"] != "abandoned" for e in during.executions)
    truth = synth.truth
    assert len(truth.executions) >= 20
    report = inspect_path(root, values=True)
    assert report.bad_files == []
    assert {e["execution_id"]: e for e in report.executions} == {
        e.execution_id: e.to_json() for e in truth.executions
    }
    assert (tmp_path / "truth.jsonl").exists()
