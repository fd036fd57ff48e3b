"""The publisher guide's conformance checklist, one test per item, against real servers.

moto serves S3 over HTTP, the real gateway app (api.gateway) authorizes and presigns, and a real
HTTP proxy (publisher_harness.FaultProxy) injects network faults. Only Boundary's token check and
config lookup are replaced by publisher_harness.GatewayControl.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from publisher_harness import (
    EUID,
    SCOPE,
    TOKEN,
    corrupt,
    data_bytes,
    meta_bytes,
    value_file,
    write_stream,
)

from formats import cas
from formats import object_keys as ok
from formats.integrity import verify_trailer
from formats.profile_store import DiskBudget, Plane, ProfileStore
from formats.profile_store.ledger import read_usage_state
from formats.upload_wire import PACK_MAX_ENTRIES, PublisherConfig
from formats.value_pack import read_pack
from formats.zstd_frame import compress_object, decompress_object
from publisher import Publisher
from publisher.collect import Collector
from publisher.lambda_extension import LambdaExtension
from publisher.plan import PlaneBlocks


def _puts(proxy_seen: list[tuple[str, str, int | None]]) -> list[str]:
    return [path for method, path, status in proxy_seen if method == "PUT" and status == 200]


def _seg(path: str) -> tuple[str, int] | None:
    for plane in ("meta", "data"):
        marker = f"/{plane}/"
        if marker in path and path.endswith(f".baml{plane}.zst"):
            return plane, int(path.rsplit("/", 1)[1].split(".")[0])
    return None


def _wait(cond, timeout: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_item_01_segments_ship_ascending_data_before_meta(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=5, meta=4)
    report = env.publisher().run_once(30)
    assert report is not None and report.ok
    segs = [s for s in (_seg(p) for p in _puts(env.s3_proxy.seen)) if s]
    # Data PUTs of one flush overlap (dispatched ascending, they may complete in any order); every
    # data segment is in before the first meta, and meta segments go one by one, ascending.
    assert sorted(segs[:5]) == [("data", i) for i in range(1, 6)]
    assert segs[5:] == [("meta", i) for i in range(1, 5)]
    assert ProfileStore(env.root).read_cursor(EUID).meta == 4
    assert ProfileStore(env.root).read_cursor(EUID).data == 5


def test_item_02_bad_checksum_blocks_plane_then_skipped_and_reported(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=4, meta=1)
    corrupt(ProfileStore(env.root).segment_path(EUID, "data", 2))
    pub = env.publisher(checksum_block_seconds=0.5)
    first = pub.run_once(30)
    assert first is not None
    assert ("bad_checksum_blocking", f"data_segment:{EUID}:2") in first.skipped
    assert ProfileStore(env.root).read_cursor(EUID).data == 1  # later sequences wait
    assert not any(s == ("data", 3) for s in map(_seg, _puts(env.s3_proxy.seen)))
    time.sleep(0.6)
    second = pub.run_once(30)
    assert second is not None
    assert ("bad_checksum_skipped", f"data_segment:{EUID}:2") in second.skipped
    assert ProfileStore(env.root).read_cursor(EUID).data == 4
    shipped = [s for s in map(_seg, _puts(env.s3_proxy.seen)) if s and s[0] == "data"]
    # The first flush shipped 1 alone; the second 3 and 4, whose PUTs overlap (see item 1).
    assert shipped[0] == ("data", 1) and sorted(shipped[1:]) == [("data", 3), ("data", 4)]
    assert pub.stats()["skipped"]["bad_checksum_skipped"] == 1


def test_item_03_crash_between_put_and_cursor_reships_as_stored(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=3, meta=2, values=[value_file(b"L" * 40_000)])
    child = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("crash_child.py")),
            env.gw_proxy.url,
            TOKEN,
            str(env.root),
        ],
        capture_output=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert child.returncode == 17, child.stderr.decode()[-2000:]
    store = ProfileStore(env.root)
    assert store.read_cursor(EUID) == type(store.read_cursor(EUID))(0, 0)  # the crash left the cursor
    landed = env.bucket_keys()
    assert len([k for k in landed if _seg(k)]) == 5
    pub = env.publisher()
    report = pub.run_once(30)
    assert report is not None and report.ok
    outcomes = pub.stats()["authorize_outcomes"]
    assert outcomes.get("data_segment/stored") == 3 and outcomes.get("meta_segment/stored") == 2
    assert outcomes.get("value/stored") == 1
    assert store.read_cursor(EUID).meta == 2 and store.read_cursor(EUID).data == 3


def test_item_04_412_reauthorizes_and_gets_stored(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=2, meta=1)
    env.s3_proxy.add("PUT", "/data/00000000000000000001", "twice")  # S3 itself answers 412
    pub = env.publisher()
    report = pub.run_once(30)
    assert report is not None and report.ok
    stats = pub.stats()
    assert stats["put_412"] == {"data_segment": 1}
    assert stats["authorize_outcomes"]["data_segment/stored"] == 1
    assert ProfileStore(env.root).read_cursor(EUID).data == 2


def test_item_05_401_stops_keeps_files_reloads_and_resumes(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=2, meta=2)
    env.gateway.control.revoked = True
    pub = env.publisher(config_refresh_seconds=0.2).start()
    try:
        assert _wait(lambda: pub.stopped_reason == "unauthorized")
        time.sleep(0.5)
        assert env.bucket_keys() == []
        assert ProfileStore(env.root).list_committed(EUID, "data") == [1, 2]  # files kept
        calls_before = env.gateway.control.config_calls
        env.gateway.control.revoked = False
        assert _wait(lambda: ProfileStore(env.root).read_cursor(EUID).meta == 2)
        assert env.gateway.control.config_calls > calls_before  # config reloaded
        assert pub.stopped_reason is None
    finally:
        assert pub.flush_and_join(5)


def _write_cas_direct(root: Path, files: list[bytes]) -> None:
    """Put CAS files in place without the store's fsyncs (fast for 100,001 files)."""
    for raw in files:
        cid = cas.read_cas_header(raw).cid
        path = root / "cas" / "sha256" / cid.hex()[:2] / f"{cid.hex()}.bamlvalue"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)


def test_item_06_pack_split_by_bytes_and_by_entries(env) -> None:  # type: ignore[no-untyped-def]
    # 8 MiB plus one byte of small values, shipped for real: two packs in the bucket.
    files = [value_file(i.to_bytes(4, "big") + b"v" * (32_000 - 84 - 4)) for i in range(262)]
    files.append(value_file(b"w" * (8 * 1024 * 1024 + 1 - 262 * 32_000 - 84)))
    assert sum(map(len, files)) == 8 * 1024 * 1024 + 1
    write_stream(env.root, EUID, data=1, meta=1, values=files)
    report = env.publisher().run_once(60)
    assert report is not None and report.ok
    assert len([k for k in env.bucket_keys() if k.endswith(".bamlpack.zst")]) == 2
    # 100,001 small values: the collector builds two packs (100,000 + 1 entries).
    root2 = env.root.parent / "many"
    write_stream(root2, EUID, data=1, meta=0)
    _write_cas_direct(root2, [value_file(i.to_bytes(4, "big")) for i in range(PACK_MAX_ENTRIES + 1)])
    collected = Collector(ProfileStore(root2), PlaneBlocks(), max_flush_bytes=1 << 30).collect(
        "01J9ZK3Q4X5Y6Z7A8B9C0D1E2F", PublisherConfig(pack_max_entry_bytes=64 * 1024 * 1024)
    )  # a byte cap above 100,001 x 88 bytes, so the entry cap is what splits
    packs = [o for o in collected.cas_objects if o.kind == "value_pack"]
    assert [p.entry_count for p in packs] == [PACK_MAX_ENTRIES, 1]


def test_item_07_pack_manifest_canonical_and_entries_verify(env) -> None:  # type: ignore[no-untyped-def]
    files = [value_file(f"value {i}".encode()) for i in range(5)]
    write_stream(env.root, EUID, data=1, meta=1, values=files)
    assert env.publisher().run_once(30) is not None
    (key,) = [k for k in env.bucket_keys() if k.endswith(".bamlpack.zst")]
    raw = decompress_object(env.moto.get(env.bucket, key))
    manifest_len = int.from_bytes(raw[10:14], "big")
    manifest = raw[14 : 14 + manifest_len]
    doc = json.loads(manifest)
    assert manifest == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    entries_region = raw[14 + manifest_len :]
    pack = read_pack(raw)
    assert len(pack.entries) == len(doc["entries"]) == 5
    for entry in doc["entries"]:
        blob = entries_region[entry["offset"] : entry["offset"] + entry["length"]]
        assert entry["size"] == entry["length"] == len(blob)
        verify_trailer(blob)
        assert blob in files  # unchanged value file
        assert cas.cid_to_string(cas.read_cas_header(blob).cid) == entry["cid"]


def test_item_08_marker_written_value_not_reshipped_nor_rewritten(env) -> None:  # type: ignore[no-untyped-def]
    big = value_file(b"B" * 40_000)
    (path,) = write_stream(env.root, EUID, data=1, meta=1, values=[big])
    pub = env.publisher()
    assert pub.run_once(30) is not None
    marker = path.with_name(path.name + ".shipped")
    assert marker.exists() and marker.stat().st_size == 0
    env.s3_proxy.clear()
    assert pub.run_once(30) is not None
    assert not any("/cas/values/" in p for p in _puts(env.s3_proxy.seen))
    before = path.stat().st_mtime_ns
    store = ProfileStore(env.root)
    store.put_cas(big)  # the profiler reuses the value while the marker exists
    assert path.stat().st_mtime_ns == before


def test_item_09_retention_removes_value_and_marker_through_store(env) -> None:  # type: ignore[no-untyped-def]
    env.gateway.control.config = PublisherConfig(shipped_value_retention_seconds=0.3)
    (path,) = write_stream(env.root, EUID, data=1, meta=1, values=[value_file(b"R" * 50_000)])
    pub = env.publisher()
    assert pub.run_once(30) is not None
    assert path.exists()
    usage_before = read_usage_state(env.root)
    size = path.stat().st_size
    time.sleep(0.4)
    assert pub.run_once(30) is not None
    assert not path.exists() and not path.with_name(path.name + ".shipped").exists()
    assert read_usage_state(env.root) == usage_before - size
    assert pub.stats()["bytes_freed"]["retention"] == size


def test_item_10_disk_pressure_frees_shipped_values_never_unshipped_segments(env) -> None:  # type: ignore[no-untyped-def]
    (path,) = write_stream(env.root, EUID, data=3, meta=1, values=[value_file(b"P" * 60_000)])
    corrupt(ProfileStore(env.root).segment_path(EUID, "data", 2))  # data 2 and 3 stay unshipped
    tight = ProfileStore(env.root, budget=DiskBudget(max_project_bytes=10_000, minimum_free_bytes=0))
    pub = Publisher(env.settings(), store=tight)
    assert pub.run_once(30) is not None
    assert not path.exists()  # shipped, then freed long before the 1 h window
    assert pub.stats()["bytes_freed"].get("pressure", 0) > 0
    assert tight.list_committed(EUID, Plane.DATA) == [2, 3]  # unshipped segments kept


class _ExtensionsApi:
    """A local Lambda Extensions API: register, then ``event/next`` blocks until shutdown()."""

    def __init__(self) -> None:
        self.shutdown_sent = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, body: dict[str, object], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send({}, {"Lambda-Extension-Identifier": "ext-1"})

            def do_GET(self) -> None:
                api.shutdown_sent.wait(30)
                deadline_ms = int((time.time() + 2.0) * 1000)
                self._send(
                    {"eventType": "SHUTDOWN", "shutdownReason": "spindown", "deadlineMs": deadline_ms}, {}
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"


def test_item_11_lambda_shutdown_flushes_within_two_seconds(env) -> None:  # type: ignore[no-untyped-def]
    env.gateway.control.config = PublisherConfig(flush_interval_seconds=60)  # only SHUTDOWN can ship
    api = _ExtensionsApi()
    pub = env.publisher(lambda_mode=True)
    ext = LambdaExtension(pub, runtime_api=api.address).start()
    try:
        assert pub.flush_interval == 1.0
        time.sleep(1.3)  # the first flush ran on an empty root
        write_stream(env.root, EUID, data=2, meta=2)
        api.shutdown_sent.set()
        started = time.monotonic()
        assert ext.done.wait(2.5)
        assert time.monotonic() - started < 2.0
        assert ext.shutdown_flushed is True
        assert ProfileStore(env.root).read_cursor(EUID).meta == 2
    finally:
        api.server.shutdown()


def test_item_12_no_meta_before_the_data_it_references(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=4, meta=4)  # meta i names data through i
    env.s3_proxy.add("PUT", "/data/00000000000000000003", "status:503", times=100)
    pub = env.publisher(max_attempts_per_object=2)
    first = pub.run_once(30)
    assert first is not None and not first.ok
    assert ProfileStore(env.root).read_cursor(EUID) == type(ProfileStore(env.root).read_cursor(EUID))(2, 2)
    env.s3_proxy.rules.clear()
    assert pub.run_once(30) is not None
    order = [s for s in map(_seg, _puts(env.s3_proxy.seen)) if s]
    position = {s: i for i, s in enumerate(order)}
    for i in range(1, 5):  # meta i's RootEnded may name data 1..i
        for d in range(1, i + 1):
            assert position[("data", d)] < position[("meta", i)]


def test_item_13_golden_objects_bytes_and_keys(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    golden = Path(__file__).parents[1] / "fixtures" / "profiles"
    shutil.copytree(golden / "raw", env.root)
    originals = {p.relative_to(env.root): p.read_bytes() for p in env.root.rglob("*") if p.is_file()}
    report = Publisher(env.settings()).run_once(60)
    assert report is not None and report.ok, report
    keys = env.bucket_keys()
    assert keys
    for key in keys:
        parsed = ok.parse_evidence_key(key)
        assert parsed.scope == SCOPE and parsed.to_key() == key
        body = env.moto.get(env.bucket, key)
        raw = decompress_object(body)
        if parsed.kind in ("meta_segment", "data_segment"):
            plane = "meta" if parsed.kind == "meta_segment" else "data"
            rel = Path("streams") / str(parsed.euid) / plane / f"{parsed.sequence:020d}.baml{plane}"
        elif parsed.kind in ("value", "table"):
            rel = Path("cas/sha256") / str(parsed.cid)[:2] / f"{parsed.cid}.bamlvalue"
            assert cas.read_cas_header(raw).codec == (1 if parsed.kind == "value" else 2)
        else:
            for entry in read_pack(raw).entries:
                h = entry.cid.removeprefix("bamlv_1_") if isinstance(entry.cid, str) else entry.cid.hex()
                assert Path("cas/sha256") / h[:2] / f"{h}.bamlvalue" in originals
            assert body == compress_object(raw)
            continue
        assert raw == originals[rel]
        assert body == (golden / "zst" / rel.with_name(rel.name + ".zst")).read_bytes()  # golden object


def test_item_14_config_overrides_defaults_and_capture_disabled_keeps_files(env) -> None:  # type: ignore[no-untyped-def]
    custom = PublisherConfig(
        flush_interval_seconds=0.7,
        max_objects_per_authorize=2,
        large_value_threshold_bytes=300,
        pack_max_entry_bytes=1000,
        shipped_value_retention_seconds=12,
        upload_url_ttl_seconds=120,
        max_object_bytes=10_000_000,
    )
    env.gateway.control.config = custom
    write_stream(env.root, EUID, data=3, meta=2, values=[value_file(b"m" * 400), value_file(b"s" * 10)])
    pub = env.publisher()
    assert pub.run_once(30) is not None
    assert pub.config == custom and pub.flush_interval == 0.7
    posts = [p for m, p, _ in env.gw_proxy.seen if m == "POST"]
    assert len(posts) >= 4  # 7 objects over calls of at most 2 (pack separate: own flush id)
    assert len([k for k in env.bucket_keys() if "/cas/values/" in k]) == 1  # 484 bytes >= 300: large
    # capture_enabled false: nothing ships and nothing is dropped.
    env.gateway.control.config = PublisherConfig(capture_enabled=False)
    store = ProfileStore(env.root)
    with store.open_stream("0192f0c1a2b34c5d8e9f00112233aacc") as w:
        w.write_data(1, data_bytes("0192f0c1a2b34c5d8e9f00112233aacc", 1))
        w.write_meta(1, meta_bytes("0192f0c1a2b34c5d8e9f00112233aacc", 1, 1))
    before = env.bucket_keys()
    assert pub.run_once(30) is None
    assert pub.stopped_reason == "capture_disabled"
    assert env.bucket_keys() == before
    assert store.list_committed("0192f0c1a2b34c5d8e9f00112233aacc", "data") == [1]


def test_item_15_conflict_segment_reported_value_treated_as_stored(env) -> None:  # type: ignore[no-untyped-def]
    big = value_file(b"C" * 40_000)
    write_stream(env.root, EUID, data=2, meta=1, values=[big])
    seg_key = ok.data_segment_key(SCOPE, EUID, 1)
    val_key = ok.large_value_key(SCOPE, cas.read_cas_header(big).cid)
    for key in (seg_key, val_key):
        env.moto.s3.put_object(
            Bucket=env.bucket, Key=key, Body=b"different bytes", ChecksumAlgorithm="SHA256"
        )
    pub = env.publisher()
    report = pub.run_once(30)
    assert report is not None
    assert f"data_segment:{EUID}:1" in report.conflicts
    assert env.moto.get(env.bucket, seg_key) == b"different bytes"  # never overwritten
    assert pub.stats()["errors"]["conflict_data_segment"] == 1
    assert pub.stats()["authorize_outcomes"]["value/conflict"] == 1
    cas_path = ProfileStore(env.root).root / "cas" / "sha256" / val_key.split("/")[-1][:2]
    assert any(p.name.endswith(".shipped") for p in cas_path.iterdir())  # value treated as stored


def test_timeouts_follow_the_guide() -> None:
    from publisher.transport import S3Putter

    putter = S3Putter()
    assert putter.body_timeout(1024) == 30.0
    assert putter.body_timeout(100 * 1024 * 1024) == pytest.approx(100.0)
    putter.close()
    _ = os
