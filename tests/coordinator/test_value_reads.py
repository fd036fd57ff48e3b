"""Whole values read by CID: values_v1, the CAS prefix for large values, and the disposable disk cache.

Expected values come from the synthetic profiler's ground truth or from values built here, never
from the coordinator's own output.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from coordinator_world import BoundaryServer, Corpus
from fastapi.testclient import TestClient
from moto.server import ThreadedMotoServer

from api.coordinator.value_cache import DiskValueCache
from api.coordinator.value_reader import RENDERINGS, S3Objects, ValueReader
from formats import cas, value_codec, value_json, zstd_frame
from formats import query_output as qo
from formats.object_keys import Scope, large_value_key
from formats.synth import GroundTruth

LARGE = 32 * 1024


def _truth_values(truth: GroundTruth) -> dict[tuple[str, str], list[Any]]:
    """(execution_id, role) -> every available value of that role in the execution (JSON)."""
    role = {"input": "args", "output": "output", "error": "error"}
    out: dict[tuple[str, str], list[Any]] = {}
    for e in truth.executions:
        for s in e.spans:
            for v in s.values:
                if v.state == "available":
                    out.setdefault((e.execution_id, role[v.role]), []).append(v.json)
    return out


def _large_calls(corpus: Corpus, scope: Scope) -> list[tuple[str, str, str]]:
    """(execution_id, call_id, role) of indexed calls whose value is a large value."""
    ds = corpus.lance.open(scope, "values_v1")
    assert ds is not None
    t = ds.to_table(columns=["cid", "size_bytes", "locator"])
    pairs = zip(t["size_bytes"].to_pylist(), t["locator"].to_pylist(), strict=True)
    sizes = dict(zip(t["cid"].to_pylist(), pairs, strict=True))
    found = []
    for p in corpus.projected.projections:
        if p.execution_id in corpus.projected.pending:
            continue
        for row in p.public["calls_v1"]:
            for role in ("args", "output"):
                cid = row[f"{role}_cid"]
                if cid is not None and sizes.get(cid, (0, ""))[0] >= LARGE:
                    assert "/cas/values/" in sizes[cid][1]
                    found.append((p.execution_id, str(row["call_id"]), role))
    return found


def _query(api: TestClient, headers: dict[str, str], sql: str) -> qo.QueryResult:
    resp = api.post("/v1/query", json={"sql": sql}, headers=headers)
    assert resp.status_code == 200, resp.text
    result = qo.read_query_bytes(resp.content)
    assert result.outcome.error is None, result.outcome.error
    return result


def _values_sql(execution_ids: list[str]) -> str:
    ids = ", ".join(f"'{e}'" for e in sorted(set(execution_ids)))
    return (
        f"SELECT execution_id, call_id, args, output FROM calls_v1 WHERE execution_id IN ({ids}) "
        "ORDER BY execution_id, call_id"
    )


@pytest.fixture(scope="module")
def probe_ids(corpus: Corpus, boundary: BoundaryServer) -> list[str]:
    large = {e for e, _, _ in _large_calls(corpus, boundary.scope)}
    small = [
        p.execution_id for p in corpus.projected.projections if p.execution_id not in corpus.projected.pending
    ]
    return sorted(large | set(small[:15]))


def test_large_values_come_whole_from_the_cas_prefix(
    api: TestClient, user_headers: dict[str, str], corpus: Corpus, boundary: BoundaryServer
) -> None:
    large = _large_calls(corpus, boundary.scope)
    assert large, "the corpus holds large values"
    truth = _truth_values(corpus.truth)
    got = _query(api, user_headers, _values_sql([e for e, _, _ in large]))
    rows = {(r["execution_id"], r["call_id"]): r for r in got.rows}
    for execution_id, call_id, role in large:
        value = rows[(execution_id, call_id)][role]
        assert value in truth[(execution_id, role)]
        assert len(json.dumps(value)) >= LARGE // 2


def _all_values(api: TestClient, headers: dict[str, str], ids: list[str]) -> list[dict[str, Any]]:
    return _query(api, headers, _values_sql(ids)).rows


def test_values_match_ground_truth(
    api: TestClient, user_headers: dict[str, str], corpus: Corpus, probe_ids: list[str]
) -> None:
    truth = _truth_values(corpus.truth)
    rows = _all_values(api, user_headers, probe_ids)
    checked = 0
    for r in rows:
        for role in ("args", "output"):
            if r[role] is not None:
                assert r[role] in truth[(r["execution_id"], role)]
                checked += 1
    assert checked > 20


def test_losing_the_cache_changes_latency_not_results(
    api: TestClient, user_headers: dict[str, str], runtime: Any, probe_ids: list[str]
) -> None:
    cache: DiskValueCache = runtime.value_cache
    RENDERINGS.clear()  # the in-memory renderings would hide the disk cache
    first = _all_values(api, user_headers, probe_ids)
    assert len(cache) > 0
    shutil.rmtree(cache.directory)
    RENDERINGS.clear()
    assert _all_values(api, user_headers, probe_ids) == first
    assert len(cache) > 0 and any(cache.directory.rglob("*.val"))  # refilled


def test_a_corrupt_cache_is_never_served(
    api: TestClient, user_headers: dict[str, str], runtime: Any, probe_ids: list[str]
) -> None:
    cache: DiskValueCache = runtime.value_cache
    RENDERINGS.clear()
    first = _all_values(api, user_headers, probe_ids)
    files = sorted(cache.directory.rglob("*.val"))
    assert files
    for i, f in enumerate(files):
        data = bytearray(f.read_bytes())
        if i % 3 == 0:
            f.write_bytes(bytes(data[: len(data) // 2]))  # cut
        elif i % 3 == 1:
            data[-1] ^= 0xFF  # flipped
            f.write_bytes(bytes(data))
        else:
            f.write_bytes(b"")  # emptied
    rejected = cache.rejected
    RENDERINGS.clear()
    assert _all_values(api, user_headers, probe_ids) == first
    assert cache.rejected - rejected == len(files)


def test_cache_is_bounded_and_evicts_least_recently_used(tmp_path: Path) -> None:
    bodies = {}
    for i in range(10):
        body = value_codec.encode_value(value_codec.String("x" * 1000 + str(i)))
        bodies[cas.value_cid(cas.CODEC_VALUE, body).hex()] = body
    cids = list(bodies)
    cache = DiskValueCache(tmp_path / "c", max_bytes=5 * 1010)
    for cid in cids[:4]:
        cache.put(cid, cas.CODEC_VALUE, bodies[cid])
    assert cache.get(cids[0]) == (cas.CODEC_VALUE, bodies[cids[0]])  # now most recent
    for cid in cids[4:6]:
        cache.put(cid, cas.CODEC_VALUE, bodies[cid])
    assert cache.total_bytes <= 5 * 1010
    assert cache.get(cids[1]) is None and cache.get(cids[0]) is not None
    # A new process finds the entries already on disk.
    again = DiskValueCache(tmp_path / "c", max_bytes=5 * 1010)
    assert len(again) == len(cache) and again.get(cids[5]) == (cas.CODEC_VALUE, bodies[cids[5]])


@pytest.fixture(scope="module")
def s3_bucket() -> Iterator[tuple[Any, str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket="values")
    try:
        yield client, "values"
    finally:
        server.stop()


def test_a_value_near_the_16_mib_limit_comes_back_whole(s3_bucket: tuple[Any, str], tmp_path: Path) -> None:
    client, bucket = s3_bucket
    scope = Scope("ten", "proj", "env")
    text = "".join(chr(0x41 + (i * 7919) % 26) for i in range(4096)) * 4000 + "終"  # ~16 MB, not repetitive
    value = value_codec.Map((("doc", value_codec.String(text)), ("n", value_codec.Int(7))))
    body = value_codec.encode_value(value)
    assert 15 << 20 < len(body) < 16 << 20
    cid = cas.value_cid(cas.CODEC_VALUE, body).hex()
    key = large_value_key(scope, cid)
    client.put_object(Bucket=bucket, Key=key, Body=zstd_frame.compress_object(cas.encode_cas_object(1, body)))
    cache = DiskValueCache(tmp_path / "cache", max_bytes=64 << 20)
    reader = ValueReader(scope, None, cache=cache, objects=S3Objects(client, bucket))
    got = reader.bodies([cid])
    assert got == {cid: (cas.CODEC_VALUE, body)} and reader.sources["cas"] == 1
    rendered = json.loads(value_json.to_json_text(value_codec.decode_value(got[cid][1])))
    assert rendered == {"doc": text, "n": 7} and len(rendered["doc"]) == len(text)
    # The second read is the cache's, verified and identical.
    again = ValueReader(scope, None, cache=cache, objects=None)
    assert again.bodies([cid]) == {cid: (cas.CODEC_VALUE, body)} and again.sources["cache"] == 1


def test_a_cas_object_of_another_cid_is_refused(s3_bucket: tuple[Any, str]) -> None:
    client, bucket = s3_bucket
    scope = Scope("ten", "proj", "env2")
    body = value_codec.encode_value(value_codec.String("real"))
    other = value_codec.encode_value(value_codec.String("swapped"))
    cid = cas.value_cid(1, body).hex()
    client.put_object(
        Bucket=bucket,
        Key=large_value_key(scope, cid),
        Body=zstd_frame.compress_object(cas.encode_cas_object(1, other)),
    )
    reader = ValueReader(scope, None, cache=None, objects=S3Objects(client, bucket))
    assert reader.bodies([cid]) == {} and reader.sources["missing"] == 1
