"""Each damage mode leaves the expected files on disk, and the truth follows the reader rules on them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from synth_disk import DiskStream, read_stream

from formats import meta_segment as ms
from formats.data_segment import decode_data_segment
from formats.errors import ChecksumMismatchError
from formats.inspect import inspect_path
from formats.profile_store import layout
from formats.segment_names import Plane
from formats.synth import GroundTruth, LiveSynth, SynthConfig, SynthConfigError, synthesize
from formats.synth.config import (
    CORRUPT_DATA,
    DAMAGE_MODES,
    LOST_ADMITTED_BATCH,
    LOST_ROOT_STARTED,
    MISSING_DATA,
    MISSING_META,
    NO_FUNCTION_TABLE,
)
from formats.synth.truth import TruthExecution

# Short publish intervals and small segments: many cycles, executions spanning several segments,
# calls that start in one segment and end in the next.
CONFIG = SynthConfig(
    seed=5,
    executions=160,
    processes=2,
    rate_per_second=20.0,
    publish_interval_ns=250_000_000,
    unfinished_per_process=1,
    p_long=0.15,
    p_failed=0.1,
    segment_target_bytes=16 * 1024,
    single_value_bytes=64 * 1024,
    p_large_value=0.03,
    value_pool_size=16,
)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GroundTruth]:
    root = tmp_path_factory.mktemp("clean") / "profiles-v1"
    return root, synthesize(root, CONFIG)


Run = Callable[..., tuple[Path, GroundTruth]]
_RUNS: dict[tuple[str, ...], tuple[Path, GroundTruth]] = {}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    def run(*modes: str) -> tuple[Path, GroundTruth]:
        if modes not in _RUNS:
            root = tmp_path_factory.mktemp("-".join(modes)) / "profiles-v1"
            _RUNS[modes] = (root, synthesize(root, CONFIG.replace(damage=modes)))
        return _RUNS[modes]

    return run


def _stream(truth: GroundTruth, stream: str) -> dict[str, TruthExecution]:
    return {e.execution_id: e for e in truth.executions if e.stream == stream}


def _report(truth: GroundTruth, mode: str) -> dict[str, Any]:
    (found,) = [d for d in truth.damage if d["mode"] == mode]
    return found


def _assert_follows_reader_rules(disk: DiskStream, truth: GroundTruth, stream: str) -> None:
    """The truth of every execution is what the reader rules give on the files as they are now."""
    mine = _stream(truth, stream)
    assert set(mine) == disk.listed()
    zero = disk.meta[1].records[0].zero_unix_ns  # type: ignore[union-attr]
    for eid, e in mine.items():
        assert e.index_state == disk.index_state(eid), eid
        assert e.data_issues == disk.data_issues(eid), eid
        start, end = disk.started.get(eid), disk.ended.get(eid)
        assert e.started_unix_ns == (zero + start[1].started_ns if start else None)
        assert e.status == (end[1].status.name.lower() if end else "abandoned")


@pytest.mark.parametrize("mode", DAMAGE_MODES)
def test_damage_hits_process_zero_only_and_truth_follows_reader_rules(
    mode: str, damaged: Run, clean: tuple[Path, GroundTruth]
) -> None:
    root, truth = damaged(mode)
    s0, s1 = truth.streams
    _assert_follows_reader_rules(read_stream(root, s0), truth, s0)
    # The other process's stream is untouched: same truth as an undamaged run.
    clean_truth = clean[1]
    assert [e.to_json() for e in truth.sorted_executions() if e.stream == s1] == [
        e.to_json() for e in clean_truth.sorted_executions() if e.stream == s1
    ]
    assert {d["mode"] for d in truth.damage} == {mode}
    assert all(d["stream"] == s0 for d in truth.damage)


def test_missing_interior_meta_object(damaged: Run, clean: tuple[Path, GroundTruth]) -> None:
    root, truth = damaged(MISSING_META)
    s0 = truth.streams[0]
    report = _report(truth, MISSING_META)
    gap = report["meta_seq"]
    disk = read_stream(root, s0)
    assert gap not in disk.meta and 1 < gap < disk.meta_max
    assert set(disk.meta) == set(range(1, disk.meta_max + 1)) - {gap}
    assert disk.gaps == [gap]
    mine = _stream(truth, s0)
    clean_disk = read_stream(clean[0], s0)
    # Its RootEnded records are gone: those executions have no RootEnded and a gap after their start.
    for eid in report["roots"]:
        assert (mine[eid].status, mine[eid].index_state) == ("abandoned", "index_corrupt")
        assert mine[eid].ended_unix_ns is None
    # RootStarted before the gap, RootEnded after it: the gap shadows the execution.
    straddlers = [eid for eid, (seq, _) in clean_disk.ended.items() if clean_disk.started[eid][0] < gap < seq]
    assert straddlers
    for eid in straddlers:
        assert mine[eid].index_state == "index_corrupt" and mine[eid].status != "abandoned"
    # Executions wholly before the gap are untouched.
    before = [eid for eid, (seq, _) in clean_disk.ended.items() if seq < gap]
    assert before and all(mine[eid].index_state == "complete" for eid in before)
    # No data was lost: every listed execution keeps all its spans.
    clean_spans = {e.execution_id: e.to_json()["spans"] for e in clean[1].executions}
    assert all(e.to_json()["spans"] == clean_spans[eid] for eid, e in mine.items())


def test_lost_admitted_batch(damaged: Run, clean: tuple[Path, GroundTruth]) -> None:
    root, truth = damaged(LOST_ADMITTED_BATCH)
    s0 = truth.streams[0]
    roots = _report(truth, LOST_ADMITTED_BATCH)["roots"]
    disk = read_stream(root, s0)
    assert set(disk.meta) == set(range(1, disk.meta_max + 1)), "a Lost batch consumes no sequence"
    assert disk.gaps == []
    assert len(disk.meta) == len(read_stream(clean[0], s0).meta) - 1
    mine = _stream(truth, s0)
    assert roots
    for eid in roots:
        assert eid not in disk.started
        _, end = disk.ended[eid]
        assert end.flags & ms.ROOT_ENDED_FLAG_ROOT_STARTED_LOST
        assert mine[eid].index_state == "root_started_lost"
        assert mine[eid].started_unix_ns is None and mine[eid].ended_unix_ns is not None
    others = [e for eid, e in mine.items() if eid not in roots]
    assert all(disk.ended[e.execution_id][1].flags == 0 for e in others if e.execution_id in disk.ended)
    assert all(e.index_state in ("complete", "no_root_ended") for e in others)


def test_root_ended_whose_root_started_object_was_lost(damaged: Run) -> None:
    root, truth = damaged(LOST_ROOT_STARTED)
    s0 = truth.streams[0]
    report = _report(truth, LOST_ROOT_STARTED)
    gap = report["meta_seq"]
    disk = read_stream(root, s0)
    assert gap not in disk.meta and disk.gaps == [gap]
    mine = _stream(truth, s0)
    ended_roots = [eid for eid in report["roots"] if eid in disk.ended]
    assert ended_roots
    for eid in ended_roots:
        assert eid not in disk.started
        assert disk.ended[eid][1].flags == 0, "flag bit 0 clear: the writer thought the batch committed"
        assert mine[eid].index_state == "index_corrupt" and mine[eid].started_unix_ns is None
        assert mine[eid].status == disk.ended[eid][1].status.name.lower()


def _data_mode_checks(mode: str, damaged: Run, clean: tuple[Path, GroundTruth]) -> tuple[int, DiskStream]:
    root, truth = damaged(mode)
    s0 = truth.streams[0]
    seq = _report(truth, mode)["data_seq"]
    disk = read_stream(root, s0)
    issue = f"{'missing' if mode == MISSING_DATA else 'corrupt'}_data_segment {seq}"
    mine = _stream(truth, s0)
    in_range = [
        eid
        for eid, (_, end) in disk.ended.items()
        if end.data_segment_count and end.data_first_seq <= seq <= end.data_last_seq
    ]
    assert in_range and any(
        disk.ended[eid][1].data_first_seq < disk.ended[eid][1].data_last_seq for eid in in_range
    ), "the segment lies inside an execution spanning several segments"
    for eid in in_range:
        assert mine[eid].index_state == "index_corrupt"
        assert mine[eid].data_issues == [issue]
    # Spans: what the readable segments hold. Executions outside the damage keep every span;
    # damaged ones keep a subset, and a span whose SpanStart was lost keeps its end.
    clean_by_id = {e.execution_id: e for e in clean[1].executions}
    starts_lost = 0
    for eid, e in mine.items():
        want = clean_by_id[eid]
        if not e.data_issues:
            assert e.to_json() == want.to_json()
            continue
        want_spans = {s.call_id: s for s in want.spans}
        assert {s.call_id for s in e.spans} <= set(want_spans)
        for s in e.spans:
            w = want_spans[s.call_id]
            if s.started_ns is None:
                starts_lost += 1
                assert (s.function, s.parent_call_id) == (None, None)
                assert (s.status, s.ended_ns) == (w.status, w.ended_ns)
            else:
                assert (s.function, s.parent_call_id, s.started_ns) == (
                    w.function,
                    w.parent_call_id,
                    w.started_ns,
                )
            assert {v.role for v in s.values} <= {v.role for v in w.values}
    assert starts_lost >= 1
    return seq, disk


def test_missing_data_segment_inside_a_range(damaged: Run, clean: tuple[Path, GroundTruth]) -> None:
    seq, disk = _data_mode_checks(MISSING_DATA, damaged, clean)
    assert seq not in disk.data_files and seq < disk.data_max


def test_corrupt_data_segment_inside_a_range(damaged: Run, clean: tuple[Path, GroundTruth]) -> None:
    seq, disk = _data_mode_checks(CORRUPT_DATA, damaged, clean)
    root = _RUNS[(CORRUPT_DATA,)][0]
    path = layout.segment_path(root, disk.euid, Plane.DATA, seq)
    clean_path = layout.segment_path(clean[0], disk.euid, Plane.DATA, seq)
    assert path.stat().st_size == clean_path.stat().st_size
    assert sum(a != b for a, b in zip(path.read_bytes(), clean_path.read_bytes(), strict=True)) == 1
    with pytest.raises(ChecksumMismatchError):
        decode_data_segment(path.read_bytes(), expected_euid=disk.euid)


def test_engine_without_function_table(damaged: Run) -> None:
    root, truth = damaged(NO_FUNCTION_TABLE)
    s0, s1 = truth.streams
    (engine,) = _report(truth, NO_FUNCTION_TABLE)["engines"]
    disk0, disk1 = read_stream(root, s0), read_stream(root, s1)
    assert [(e.engine_id, e.function_table_cid) for _, e in disk0.engines] == [(engine, None)]
    assert all(e.function_table_cid is not None for _, e in disk1.engines)
    spans0 = [s for e in truth.executions if e.stream == s0 for s in e.spans]
    assert spans0 and all(s.function is None for s in spans0)
    assert all(s.function is not None for e in truth.executions if e.stream == s1 for s in e.spans)


def test_all_modes_at_once(damaged: Run) -> None:
    root, truth = damaged(*DAMAGE_MODES)
    s0 = truth.streams[0]
    disk = read_stream(root, s0)
    _assert_follows_reader_rules(disk, truth, s0)
    assert {d["mode"] for d in truth.damage} == set(DAMAGE_MODES)
    assert len(disk.gaps) == 2
    assert {s.function for e in truth.executions if e.stream == s0 for s in e.spans} == {None}


def test_truth_jsonl_carries_data_issues_when_damaged(tmp_path: Path) -> None:
    config = CONFIG.replace(processes=1, executions=80, unfinished_per_process=0, damage=(MISSING_DATA,))
    truth = synthesize(tmp_path / "p", config, truth_path=tmp_path / "truth.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    assert lines == [e.to_json(issues=True) for e in truth.sorted_executions()]
    assert any(line["data_issues"] for line in lines)


def test_damage_is_bulk_only_and_named() -> None:
    with pytest.raises(SynthConfigError, match="damage"):
        SynthConfig(damage=("flood",))
    with pytest.raises(SynthConfigError, match="bulk"):
        LiveSynth("/nonexistent", CONFIG.replace(damage=(MISSING_META,)))


@pytest.mark.parametrize("modes", [(MISSING_DATA,), (LOST_ADMITTED_BATCH,), DAMAGE_MODES], ids="-".join)
def test_inspect_prints_the_truth_of_a_damaged_run(modes: tuple[str, ...], damaged: Run) -> None:
    root, truth = damaged(*modes)
    report = inspect_path(root, values=True)
    assert {e["execution_id"]: e for e in report.executions} == {
        e.execution_id: e.to_json() for e in truth.executions
    }
