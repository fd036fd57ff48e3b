"""The committed golden stream set decodes to the exact expected facts, and the encoders still produce it."""

from __future__ import annotations

import collections
import importlib.util
import json
from pathlib import Path

import pytest

from formats.inspect import decode_file, inspect_path, read_profile_file
from formats.zstd_frame import compress_object

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROFILES = FIXTURES / "profiles"
RAW = PROFILES / "raw"


def _regenerate_module():  # tests/fixtures is not a package: load the script by path
    spec = importlib.util.spec_from_file_location("golden_regenerate", FIXTURES / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RAW_FILES = sorted(p for p in RAW.rglob("*") if p.is_file())


def test_fixture_set_is_present() -> None:
    assert len(RAW_FILES) == 38
    assert len(list((PROFILES / "zst").rglob("*.zst"))) == len(RAW_FILES)


@pytest.mark.parametrize("path", RAW_FILES, ids=lambda p: p.relative_to(RAW).as_posix()[-40:])
def test_each_file_decodes_raw_and_compressed(path: Path) -> None:
    raw = path.read_bytes()
    zst = PROFILES / "zst" / f"{path.relative_to(RAW).as_posix()}.zst"
    assert read_profile_file(zst) == raw
    assert compress_object(raw) == zst.read_bytes(), "reference zstd settings drifted"
    decoded = decode_file(path)
    assert decoded == decode_file(zst)
    assert decoded["kind"] in {"meta_segment", "data_segment", "cas_object"}


def test_golden_executions_exact_facts() -> None:
    report = inspect_path(RAW, values=True)
    assert report.bad_files == []
    truth = [json.loads(line) for line in (PROFILES / "truth.jsonl").read_text().splitlines()]
    assert sorted(report.executions, key=lambda e: (e["stream"], e["execution_id"])) == truth
    counts = collections.Counter((e["status"], e["index_state"]) for e in report.executions)
    assert counts == {
        ("succeeded", "complete"): 4,
        ("failed", "complete"): 4,
        ("abandoned", "no_root_ended"): 2,
    }
    spans = [s for e in report.executions for s in e["spans"]]
    assert len(spans) == 28
    errors = [v for s in spans for v in s["values"] if v["role"] == "error"]
    assert len(errors) == 8 and all(v["state"] == "available" for v in errors)
    assert {"message": "Request timed out after 30000 ms", "code": 500} in [v["json"] for v in errors]
    lost = [v for s in spans for v in s["values"] if v["state"].startswith("lost:")]
    assert [v["state"] for v in lost] == ["lost:value_too_large"] * 2 and all(v["cid"] is None for v in lost)
    spanning = [
        e
        for e in report.executions
        if e["status"] != "abandoned" and e["data_last_seq"] > e["data_first_seq"]
    ]
    assert len(spanning) == 6
    large = [p for p in RAW.glob("cas/sha256/*/*.bamlvalue") if p.stat().st_size > 32 * 1024]
    assert len(large) >= 1
    for e in report.executions:  # wall time = StreamStarted.zero_unix_ns + the root's started_ns
        assert e["started_unix_ns"] == 1_796_083_200_000_000_000 + e["spans"][0]["started_ns"]
        assert e["execution_id"][:32] == e["stream"]


def test_same_seed_reproduces_committed_bytes(tmp_path: Path) -> None:
    files, _ = _regenerate_module().build(tmp_path)
    committed = {p.relative_to(RAW).as_posix(): p.read_bytes() for p in RAW_FILES}
    assert files.keys() == committed.keys()
    drifted = [name for name in files if files[name] != committed[name]]
    assert drifted == [], (
        f"format drift in {drifted[:5]} (run tests/fixtures/regenerate.py --write only on purpose)"
    )
