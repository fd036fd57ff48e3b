"""inspect on damaged stores: index gaps, lost RootStarted, lost or corrupt data segments.

Each test copies one synthetic corpus and damages it the way the upstream reader's rules care
about (formats/reader_rules.py): a missing interior meta object, a meta object that held a
RootStarted, RootEnded flag bit 0, a missing or corrupt data segment, a torn meta tail.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from formats import evidence
from formats import meta_segment as ms
from formats.data_segment import decode_data_segment
from formats.ids import CallRef
from formats.inspect import inspect_path
from formats.profile_store import ProfileStore
from formats.synth import GroundTruth, SynthConfig, synthesize

CONFIG = SynthConfig(
    seed=23,
    executions=60,
    processes=1,
    rate_per_second=20.0,
    unfinished_per_process=2,
    p_failed=0.2,
    p_long=0.4,
    segment_target_bytes=8 * 1024,
    value_pool_size=16,
)


@dataclass
class Layout:
    """Where one stream's records are: meta sequences per root, facts per data sequence per root."""

    started: dict[str, int] = field(default_factory=dict)
    ended: dict[str, int] = field(default_factory=dict)
    facts: dict[str, dict[int, list[Any]]] = field(default_factory=dict)


def _meta_path(stream_dir: Path, seq: int) -> Path:
    return stream_dir / "meta" / f"{seq:020d}.bamlmeta"


def _data_path(stream_dir: Path, seq: int) -> Path:
    return stream_dir / "data" / f"{seq:020d}.bamldata"


def _layout(stream_dir: Path) -> Layout:
    out = Layout()
    for path in sorted((stream_dir / "meta").iterdir()):
        seg = ms.decode_meta_segment(path.read_bytes())
        for record in seg.records:
            if isinstance(record, ms.RootStarted):
                out.started[record.root.execution_id] = seg.sequence
            elif isinstance(record, ms.RootEnded):
                out.ended[record.root.execution_id] = seg.sequence
    for path in sorted((stream_dir / "data").iterdir()):
        seg_d = decode_data_segment(path.read_bytes(), deep=True)
        for group in seg_d.groups:
            by_seq = out.facts.setdefault(group.root.execution_id, {})
            by_seq.setdefault(seg_d.sequence, []).extend(group.evidence_facts())
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GroundTruth]:
    root = tmp_path_factory.mktemp("damage") / "profiles-v1"
    return root, synthesize(root, CONFIG)


@pytest.fixture
def store(corpus: tuple[Path, GroundTruth], tmp_path: Path) -> tuple[Path, Path, GroundTruth, Layout]:
    root = tmp_path / "profiles-v1"
    shutil.copytree(corpus[0], root)
    stream_dir = root / "streams" / corpus[1].streams[0]
    return root, stream_dir, corpus[1], _layout(stream_dir)


def _executions(root: Path) -> dict[str, dict[str, Any]]:
    return {e["execution_id"]: e for e in inspect_path(root, issues=True).executions}


def _truth(truth: GroundTruth) -> dict[str, dict[str, Any]]:
    return {e.execution_id: e.to_json(values=False) for e in truth.executions}


def test_undamaged_store_has_no_gaps_and_only_no_root_ended_issues(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, _, truth, _ = store
    report = inspect_path(root, issues=True)
    assert [s["index_gaps"] for s in report.streams] == [[]]
    assert report.streams[0]["orphan_roots"] == []
    for e in report.executions:
        want = ["no_root_ended"] if e["index_state"] == "no_root_ended" else []
        assert e["data_issues"] == want
    assert {e["execution_id"] for e in report.executions} == set(_truth(truth))


def test_execution_straddling_a_missing_interior_meta_object_is_index_corrupt(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, stream_dir, truth, layout = store
    straddlers = [r for r, s in layout.started.items() if r in layout.ended and layout.ended[r] - s >= 2]
    assert straddlers
    victim = straddlers[0]
    gone = layout.started[victim] + 1
    _meta_path(stream_dir, gone).unlink()
    report = inspect_path(root, issues=True)
    assert report.streams[0]["index_gaps"] == [gone]
    got = {e["execution_id"]: e for e in report.executions}
    for root_id, e in got.items():
        started, ended = layout.started.get(root_id), layout.ended.get(root_id)
        if started is not None and started < gone and (ended is None or ended > gone):
            assert e["index_state"] == "index_corrupt", root_id
    assert got[victim]["index_state"] == "index_corrupt"
    # The meta plane is what broke: the data of the straddler is whole, so are its spans.
    assert got[victim]["spans"] == _truth(truth)[victim]["spans"]
    assert got[victim]["status"] == _truth(truth)[victim]["status"]


def test_root_started_in_a_lost_meta_object_is_index_corrupt(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, stream_dir, truth, layout = store
    ended = [r for r in layout.ended if r in layout.started]
    victim = ended[len(ended) // 2]
    lost = layout.started[victim]
    _meta_path(stream_dir, lost).unlink()
    got = _executions(root)
    assert got[victim]["index_state"] == "index_corrupt"
    assert got[victim]["started_unix_ns"] is None
    assert got[victim]["status"] == _truth(truth)[victim]["status"]
    # Every root whose only record was in the lost object is gone from the listing.
    only_there = {r for r, s in layout.started.items() if s == lost and r not in layout.ended}
    assert not only_there & set(got)


def test_root_ended_flag_bit_0_without_root_started_is_root_started_lost(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, stream_dir, truth, layout = store
    ended = [r for r in layout.ended if r in layout.started]
    victim = ended[len(ended) // 3]
    # Drop its RootStarted from the meta-pre object and set flag bit 0 on its RootEnded, as a
    # writer does when the RootStarted never made it to disk: no file goes missing.
    for seq, edit in ((layout.started[victim], "drop"), (layout.ended[victim], "flag")):
        path = _meta_path(stream_dir, seq)
        seg = ms.decode_meta_segment(path.read_bytes())
        records: list[ms.MetaRecord] = []
        for record in seg.records:
            is_victim = (
                isinstance(record, ms.RootStarted | ms.RootEnded) and record.root.execution_id == victim
            )
            if is_victim and edit == "drop":
                continue
            if is_victim and isinstance(record, ms.RootEnded):
                record = dataclasses.replace(
                    record, flags=record.flags | ms.ROOT_ENDED_FLAG_ROOT_STARTED_LOST
                )
            records.append(record)
        path.write_bytes(ms.encode_meta_segment(dataclasses.replace(seg, records=tuple(records))))
    report = inspect_path(root, issues=True)
    assert report.bad_files == [] and report.streams[0]["index_gaps"] == []
    got = {e["execution_id"]: e for e in report.executions}
    assert got[victim]["index_state"] == "root_started_lost"
    assert got[victim]["started_unix_ns"] is None
    assert got[victim]["spans"] == _truth(truth)[victim]["spans"]
    assert got[victim]["data_issues"] == []


def _multi_segment(layout: Layout) -> list[str]:
    return [r for r in layout.ended if len(layout.facts.get(r, {})) >= 2]


def _surviving_spans(layout: Layout, root_id: str, lost: int) -> dict[int, set[str]]:
    """call_id -> kinds of facts about it outside the lost segment."""
    out: dict[int, set[str]] = {}
    for seq, facts in layout.facts[root_id].items():
        if seq == lost:
            continue
        for fact in facts:
            call_ref = getattr(fact, "call_ref", None)
            if call_ref is not None:
                out.setdefault(call_ref.call_id, set()).add(type(fact).__name__)
    return out


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_lost_data_segment_keeps_readable_spans(
    store: tuple[Path, Path, GroundTruth, Layout], damage: str
) -> None:
    root, stream_dir, truth, layout = store
    victim = _multi_segment(layout)[0]
    lost = min(layout.facts[victim])
    path = _data_path(stream_dir, lost)
    if damage == "missing":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40  # the trailer's checksum no longer matches
        path.write_bytes(bytes(data))
    report = inspect_path(root, issues=True)
    assert [b["bad_file"] for b in report.bad_files] == [str(path)]
    assert report.streams[0]["index_gaps"] == []  # the data plane does not make index gaps
    got = {e["execution_id"]: e for e in report.executions}
    e = got[victim]
    assert e["index_state"] == "index_corrupt"
    issue = f"{damage}_data_segment {lost}"
    assert issue in e["data_issues"]
    n = len(layout.facts[victim])
    count = f"group_count_mismatch expected={n} found={n - 1}"
    assert count in e["data_issues"]
    survivors = _surviving_spans(layout, victim, lost)
    assert survivors and {s["call_id"] for s in e["spans"]} == set(survivors)
    want = {s["call_id"]: s for s in _truth(truth)[victim]["spans"]}
    for span in e["spans"]:
        kinds = survivors[span["call_id"]]
        if "SpanStart" in kinds:
            assert span["function"] == want[span["call_id"]]["function"]
            assert span["started_ns"] == want[span["call_id"]]["started_ns"]
        else:
            assert span["function"] is None and span["started_ns"] is None
        if "SpanEnd" in kinds:
            assert (span["status"], span["ended_ns"]) == (
                want[span["call_id"]]["status"],
                want[span["call_id"]]["ended_ns"],
            )
    # Every other execution whose range holds the lost segment is index_corrupt too; the rest are as written.
    for root_id, other in got.items():
        if root_id != victim and lost in layout.facts.get(root_id, {}) and root_id in layout.ended:
            assert other["index_state"] == "index_corrupt"
            assert issue in other["data_issues"]


def test_span_whose_span_start_was_lost_is_still_listed(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, stream_dir, truth, layout = store
    # A segment with a SpanStart whose SpanEnd lies in a later segment of the same execution.
    found: tuple[str, int, CallRef] | None = None
    for root_id in _multi_segment(layout):
        by_seq = layout.facts[root_id]
        for seq, facts in sorted(by_seq.items()):
            later_ends = {
                f.call_ref
                for s, fs in by_seq.items()
                if s > seq
                for f in fs
                if isinstance(f, evidence.SpanEnd)
            }
            starts = [
                f.call_ref for f in facts if isinstance(f, evidence.SpanStart) and f.call_ref in later_ends
            ]
            if starts:
                found = (root_id, seq, starts[0])
                break
        if found:
            break
    assert found is not None
    victim, lost, call_ref = found
    _data_path(stream_dir, lost).unlink()
    e = _executions(root)[victim]
    span = next(s for s in e["spans"] if s["call_id"] == call_ref.call_id)
    want = next(s for s in _truth(truth)[victim]["spans"] if s["call_id"] == call_ref.call_id)
    assert span["function"] is None and span["started_ns"] is None and span["parent_call_id"] is None
    assert (span["status"], span["ended_ns"]) == (want["status"], want["ended_ns"])
    assert f"unresolved_dependency span_start {call_ref.encode_string()}" in e["data_issues"]
    assert f"missing_data_segment {lost}" in e["data_issues"]


def _tear_tail(stream_dir: Path) -> int:
    newest = max(int(p.name.split(".")[0]) for p in (stream_dir / "meta").iterdir())
    path = _meta_path(stream_dir, newest)
    path.write_bytes(path.read_bytes()[:-7])
    return newest


def test_torn_tail_of_a_live_stream_is_not_a_gap(store: tuple[Path, Path, GroundTruth, Layout]) -> None:
    root, stream_dir, _, layout = store
    with ProfileStore(root).open_stream(stream_dir.name):  # a live process holds stream.lock
        newest = _tear_tail(stream_dir)
        live = inspect_path(root, issues=True)
    cut = {r for r, seq in layout.ended.items() if seq == newest}
    assert cut
    assert live.streams[0]["alive"] and live.streams[0]["index_gaps"] == []
    assert len(live.bad_files) == 1  # the torn file is still reported
    for e in live.executions:
        assert e["index_state"] != "index_corrupt"
        if e["execution_id"] in cut:
            assert (e["status"], e["index_state"]) == ("running", "no_root_ended")
    # The same bytes once the process is gone: the torn tail is a gap.
    dead = inspect_path(root, issues=True)
    assert not dead.streams[0]["alive"] and dead.streams[0]["index_gaps"] == [newest]
    got = {e["execution_id"]: e for e in dead.executions}
    assert all((got[r]["status"], got[r]["index_state"]) == ("abandoned", "index_corrupt") for r in cut)


def test_root_only_in_data_groups_is_an_orphan_not_an_execution(
    store: tuple[Path, Path, GroundTruth, Layout],
) -> None:
    root, stream_dir, _, layout = store
    unfinished = [r for r in layout.started if r not in layout.ended]
    assert unfinished
    victim = unfinished[0]
    _meta_path(stream_dir, layout.started[victim]).unlink()
    report = inspect_path(root, issues=True)
    assert victim not in {e["execution_id"] for e in report.executions}
    assert victim in report.streams[0]["orphan_roots"]
