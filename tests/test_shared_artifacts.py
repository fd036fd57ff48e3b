"""The contract's shared integration artifacts (tests/fixtures/, written by regenerate_shared.py)
are present, current and mean what their names say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from formats import boundary_wire, catalog, upload_wire
from formats import meta_segment as ms
from formats.errors import ChecksumMismatchError
from formats.integrity import verify_trailer
from formats.object_keys import parse_evidence_key
from formats.value_pack import read_pack
from formats.zstd_frame import decompress_object
from worker.bridge.messages import REPLAY_EVENT_NAME, parse_message
from worker.bridge.routing import route

FIX = Path(__file__).parent / "fixtures"


def test_regenerating_gives_the_same_bytes(tmp_path: Path) -> None:
    before = {
        p.relative_to(FIX): p.read_bytes()
        for d in ("control", "arrow", "objects", "notifications")
        for p in (FIX / d).rglob("*")
        if p.is_file()
    }
    subprocess.run([sys.executable, str(FIX / "regenerate_shared.py")], check=True, timeout=120)
    after = {
        p.relative_to(FIX): p.read_bytes()
        for d in ("control", "arrow", "objects", "notifications")
        for p in (FIX / d).rglob("*")
        if p.is_file()
    }
    assert before == after


@pytest.mark.parametrize("path", sorted((FIX / "control").glob("*.json")), ids=lambda p: p.stem)
def test_control_fixture_validates_against_its_model(path: Path) -> None:
    module_name, model_name = path.stem.split(".")
    module = {"boundary_wire": boundary_wire, "upload_wire": upload_wire}[module_name]
    getattr(module, model_name).model_validate(json.loads(path.read_text()))


def test_authorize_fixture_has_all_five_object_kinds() -> None:
    doc = json.loads((FIX / "control" / "upload_wire.AuthorizeRequest.json").read_text())
    req = upload_wire.AuthorizeRequest.model_validate(doc)
    assert {o.kind for o in req.objects} == {"meta_segment", "data_segment", "value_pack", "value", "table"}


@pytest.mark.parametrize("rel", catalog.relations(1), ids=lambda r: r.name)
def test_arrow_fixture_per_relation_matches_the_catalog(rel: catalog.Relation) -> None:
    table = pa.ipc.open_file(pa.memory_map(str(FIX / "arrow" / f"{rel.name}.arrow"))).read_all()
    assert table.num_rows == 2
    assert [(f.name, f.type, f.nullable) for f in table.schema] == [
        (c.name, c.type, c.nullable) for c in rel.columns
    ]
    if rel.storage == "clickhouse":
        public = table.select(catalog.public_schema(rel.name).names)
        assert public.schema.equals(catalog.public_schema(rel.name), check_metadata=False)


def _manifest() -> dict:
    return json.loads((FIX / "objects" / "manifest.json").read_text())


def _meta(case: str, key: str) -> ms.MetaSegment:
    raw = decompress_object((FIX / "objects" / case / key).read_bytes(), file=key)
    return ms.decode_meta_segment(raw, file=key)


def test_valid_stream_decodes_and_ends_every_execution() -> None:
    case = _manifest()["cases"]["valid_stream"]
    ended = set()
    for key in case["keys"]:
        parse_evidence_key(key)
        data = decompress_object((FIX / "objects" / "valid_stream" / key).read_bytes(), file=key)
        if key.endswith(".bamlmeta.zst"):
            ended |= {
                r.root.execution_id for r in _meta("valid_stream", key).records if isinstance(r, ms.RootEnded)
            }
        elif key.endswith(".bamlpack.zst"):
            assert read_pack(data, file=key).entries
    assert ended == set(case["executions"])


def test_bad_trailing_checksum_is_rejected_with_its_reason() -> None:
    case = _manifest()["cases"]["bad_trailing_checksum"]
    (key,) = case["keys"]
    raw = decompress_object((FIX / "objects" / "bad_trailing_checksum" / key).read_bytes(), file=key)
    with pytest.raises(ChecksumMismatchError) as err:
        verify_trailer(raw, file=key)
    assert err.value.reason == case["reason"]
    good = decompress_object((FIX / "objects" / "valid_stream" / key).read_bytes(), file=key)
    assert len(good) == len(raw) and verify_trailer(good, file=key)


def test_pack_not_landed_withholds_every_pack_its_executions_need() -> None:
    case = _manifest()["cases"]["pack_not_landed"]
    assert case["withheld"] and not set(case["withheld"]) & set(case["keys"])
    assert all(k.endswith(".bamlpack.zst") for k in case["withheld"])
    assert all((FIX / "objects" / "valid_stream" / k).exists() for k in case["keys"] + case["withheld"])


def test_stream_without_root_ended_has_open_executions() -> None:
    case = _manifest()["cases"]["stream_without_root_ended"]
    started, ended = set(), set()
    for key in case["keys"]:
        if key.endswith(".bamlmeta.zst"):
            for r in _meta("stream_without_root_ended", key).records:
                if isinstance(r, ms.RootStarted):
                    started.add(r.root.execution_id)
                elif isinstance(r, ms.RootEnded):
                    ended.add(r.root.execution_id)
    assert started - ended == set(case["open_executions"]) != set()
    assert ended == set(case["ended_executions"])


def test_notifications_parse_and_route_for_both_suffixes() -> None:
    expected = json.loads((FIX / "notifications" / "expected.json").read_text())
    n = FIX / "notifications"
    meta = parse_message((n / "s3_meta_object_created.json").read_text())
    pack = parse_message((n / "s3_pack_object_created.json").read_text())
    assert [e.key for e in meta.events] == [expected["meta_key"]]
    assert [e.key for e in pack.events] == [expected["pack_key"]]
    assert (
        "%2F"
        in json.loads((n / "s3_meta_object_created.json").read_text())["Records"][0]["s3"]["object"]["key"]
    )
    assert parse_message((n / "s3_test_event.json").read_text()).test_event
    replay = parse_message((n / "replay_meta.json").read_text())
    assert replay.events[0].event_name == REPLAY_EVENT_NAME
    assert [e.key for e in replay.events] == [expected["meta_key"]]
    assert [e.key for e in parse_message((n / "replay_pack.json").read_text()).events] == [
        expected["pack_key"]
    ]
    r_meta, r_pack = route(expected["meta_key"], 1), route(expected["pack_key"])
    assert r_meta is not None and r_meta.kind == "meta"
    assert r_pack is not None and r_pack.kind == "pack"
