"""inspect on a synthetic corpus equals the ground truth the synthesizer recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from formats.inspect import decode_file, inspect_path
from formats.profile_store import ProfileStore
from formats.synth import GroundTruth, SynthConfig, synthesize
from worker.cli import app

CONFIG = SynthConfig(
    seed=11,
    executions=120,
    processes=2,
    engines_per_process=2,
    rate_per_second=40.0,
    unfinished_per_process=1,
    p_failed=0.1,
    p_cancelled=0.05,
    p_panicked=0.03,
    p_long=0.1,
    p_large_value=0.02,
    p_too_large_value=0.02,
    single_value_bytes=64 * 1024,
    segment_target_bytes=64 * 1024,
    value_pool_size=24,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GroundTruth]:
    root = tmp_path_factory.mktemp("corpus") / "profiles-v1"
    truth = synthesize(root, CONFIG, truth_path=root.parent / "truth.jsonl")
    return root, truth


def _copy(corpus: tuple[Path, GroundTruth], tmp_path: Path) -> Path:
    root = tmp_path / "profiles-v1"
    shutil.copytree(corpus[0], root)
    return root


def _expected(truth: GroundTruth) -> dict[str, dict]:
    return {e.execution_id: e.to_json() for e in truth.executions}


def test_inspect_equals_ground_truth(corpus: tuple[Path, GroundTruth]) -> None:
    root, truth = corpus
    report = inspect_path(root, values=True)
    assert report.bad_files == []
    got = {e["execution_id"]: e for e in report.executions}
    assert got == _expected(truth)
    statuses = {e["status"] for e in report.executions}
    assert {"succeeded", "failed", "cancelled", "panicked", "abandoned"} <= statuses
    states = {v["state"] for e in report.executions for s in e["spans"] for v in s["values"]}
    assert "lost:value_too_large" in states
    assert any(e["data_first_seq"] != e["data_last_seq"] for e in report.executions if e["data_first_seq"])


def test_truth_jsonl_matches_memory(corpus: tuple[Path, GroundTruth]) -> None:
    root, truth = corpus
    lines = (root.parent / "truth.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [e.to_json() for e in truth.sorted_executions()]


def test_flipped_byte_marks_affected_executions_corrupt(
    corpus: tuple[Path, GroundTruth], tmp_path: Path
) -> None:
    root = _copy(corpus, tmp_path)
    truth = corpus[1]
    stream = truth.streams[0]
    victim = root / "streams" / stream / "data" / f"{2:020d}.bamldata"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x40
    victim.write_bytes(bytes(data))
    report = inspect_path(root)
    assert [b["bad_file"] for b in report.bad_files] == [str(victim)]
    assert report.bad_files[0]["reason"] == "checksum_mismatch"
    expected = _expected(truth)
    for e in report.executions:
        want = expected[e["execution_id"]]
        touches = want["data_first_seq"] is not None and want["data_first_seq"] <= 2 <= want["data_last_seq"]
        if e["stream"] == stream and touches and want["index_state"] == "complete":
            assert e["index_state"] == "index_corrupt"
        else:
            assert e["index_state"] == want["index_state"]
            assert e["spans"] == [
                dict(s, values=[{k: v for k, v in x.items() if k != "json"} for x in s["values"]])
                for s in want["spans"]
            ]


def test_deleted_interior_segment_is_a_gap(corpus: tuple[Path, GroundTruth], tmp_path: Path) -> None:
    root = _copy(corpus, tmp_path)
    stream = corpus[1].streams[1]
    gone = root / "streams" / stream / "data" / f"{2:020d}.bamldata"
    gone.unlink()
    report = inspect_path(root)
    assert [(b["bad_file"], b["reason"]) for b in report.bad_files] == [(str(gone), "missing_sequence")]
    hit = [
        e
        for e in report.executions
        if e["stream"] == stream
        and e["data_first_seq"]
        and e["data_first_seq"] <= 2 <= e["data_last_seq"]
        and e["status"] != "abandoned"
    ]
    assert hit and all(e["index_state"] == "index_corrupt" for e in hit)


def test_abandoned_or_running_follows_stream_lock(corpus: tuple[Path, GroundTruth], tmp_path: Path) -> None:
    root = _copy(corpus, tmp_path)
    stream = corpus[1].streams[0]
    unfinished = [
        e
        for e in inspect_path(root).executions
        if e["stream"] == stream and e["index_state"] == "no_root_ended"
    ]
    assert unfinished and all(e["status"] == "abandoned" for e in unfinished)
    with ProfileStore(root).open_stream(stream):  # a live process holds stream.lock
        running = [
            e
            for e in inspect_path(root).executions
            if e["stream"] == stream and e["index_state"] == "no_root_ended"
        ]
    assert running and all(e["status"] == "running" for e in running)


def test_inspect_one_stream_and_one_file(corpus: tuple[Path, GroundTruth]) -> None:
    root, truth = corpus
    stream = truth.streams[0]
    report = inspect_path(root / "streams" / stream, values=True)
    assert {e["execution_id"] for e in report.executions} == {
        e.execution_id for e in truth.executions if e.stream == stream
    }
    meta = decode_file(root / "streams" / stream / "meta" / f"{1:020d}.bamlmeta")
    assert meta["kind"] == "meta_segment" and meta["records"][0]["type"] == "StreamStarted"
    data = decode_file(root / "streams" / stream / "data" / f"{1:020d}.bamldata")
    assert data["kind"] == "data_segment" and data["groups"]


def test_cli_inspect_json_lines(corpus: tuple[Path, GroundTruth], tmp_path: Path) -> None:
    root = _copy(corpus, tmp_path)
    victim = root / "streams" / corpus[1].streams[0] / "data" / f"{1:020d}.bamldata"
    victim.write_bytes(victim.read_bytes()[:-5])
    result = CliRunner().invoke(app, ["inspect", str(root), "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    bad = [line for line in lines if "bad_file" in line]
    assert len(bad) == 1 and bad[0]["bad_file"] == str(victim)
    assert len([line for line in lines if "execution_id" in line]) == len(corpus[1].executions)
    summary = CliRunner().invoke(app, ["inspect", str(root)])
    assert summary.exit_code == 0 and "executions" in summary.stdout
