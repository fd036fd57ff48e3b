"""POST /v1/uploads/authorize against moto and Boundary: keys, per-object states, presigned PUTs."""

from __future__ import annotations

import datetime as dt
import threading
import time
import urllib.parse
from typing import Any

import httpx
from gateway_requests import (
    BUCKET,
    auth,
    blob,
    body,
    cas,
    new_cid,
    new_euid,
    new_flush_id,
    pack,
    segment,
    sha,
)

from api.gateway.routes import CONFIG_CACHE_CONTROL
from formats import object_keys as keys
from formats import upload_wire as uw


def _scope(tenancy: Any, environment_id: str | None = None) -> keys.Scope:
    b = tenancy.boot
    return keys.Scope(b.tenant_id, b.project_id, environment_id or b.environment_id)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


def _put(obj: dict[str, Any], data: bytes) -> httpx.Response:
    return httpx.put(obj["upload_url"], content=data, headers=obj["required_headers"])


def test_post_authorize_all_kinds_upload_required_then_put_then_stored(gateway: Any, tenancy: Any) -> None:
    euid, flush_id = new_euid(), new_flush_id()
    datas = [blob(300), blob(1200), blob(800), blob(5000), blob(900)]
    cids = [new_cid(), new_cid()]
    objects = [
        segment("meta_segment", 41, datas[0]),
        segment("data_segment", 120, datas[1]),
        pack(datas[2]),
        cas("value", datas[3], cids[0]),
        cas("table", datas[4], cids[1]),
    ]
    scope = _scope(tenancy)
    expected_keys = [
        keys.meta_segment_key(scope, euid, 41),
        keys.data_segment_key(scope, euid, 120),
        keys.value_pack_key(scope, euid, flush_id),
        keys.large_value_key(scope, cids[0]),
        keys.table_key(scope, cids[1]),
    ]
    with gateway() as (client, _runtime):
        before = dt.datetime.now(dt.UTC)
        resp = client.post(
            uw.AUTHORIZE_PATH,
            json=body(objects, euid=euid, flush_id=flush_id),
            headers=auth(tenancy.boot.publisher_token),
        )
        assert resp.status_code == 200, resp.text
        assert resp.headers["Cache-Control"] == "no-store"
        answer = uw.AuthorizeResponse.model_validate(resp.json())
        assert answer.flush_id == flush_id
        assert [o.key for o in answer.objects] == expected_keys
        assert [o.kind for o in answer.objects] == [o["kind"] for o in objects]
        assert answer.objects[0].sequence == 41 and answer.objects[1].sequence == 120
        assert answer.objects[3].cid == cids[0] and answer.objects[4].cid == cids[1]
        for obj, data, key in zip(resp.json()["objects"], datas, expected_keys, strict=True):
            assert obj["state"] == "upload_required"
            url = obj["upload_url"]
            split = urllib.parse.urlsplit(url)
            assert urllib.parse.unquote(split.path).endswith("/" + key)
            q = _query(url)
            signed = set(q["X-Amz-SignedHeaders"].split(";"))
            assert {"content-length", "host", "if-none-match", "x-amz-checksum-sha256"} <= signed
            assert "x-amz-sdk-checksum-algorithm" in signed
            assert q["X-Amz-Expires"] == "900"  # the environment's upload_url_ttl_seconds
            assert obj["required_headers"] == {
                "If-None-Match": "*",
                "x-amz-checksum-sha256": uw.checksum_header_value(sha(data)),
                "Content-Length": str(len(data)),
                "x-amz-sdk-checksum-algorithm": "SHA256",
            }
            expires = dt.datetime.fromisoformat(obj["expires_at"])
            assert dt.timedelta(seconds=898) <= expires - before <= dt.timedelta(seconds=902)
            assert _put(obj, data).status_code == 200
            assert _put(obj, data).status_code == 412  # create-only

        again = client.post(
            uw.AUTHORIZE_PATH,
            json=body(objects, euid=euid, flush_id=flush_id),
            headers=auth(tenancy.boot.publisher_token),
        )
        assert again.status_code == 200
        assert [o["state"] for o in again.json()["objects"]] == ["stored"] * 5
        for obj in again.json()["objects"]:
            assert not {"upload_url", "required_headers", "expires_at"} & set(obj)


def test_post_authorize_conflict_on_different_bytes(gateway: Any, tenancy: Any, s3: Any) -> None:
    euid = new_euid()
    data = blob(400)
    first = segment("meta_segment", 1, data)
    with gateway() as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body([first], euid=euid), headers=auth(tenancy.boot.publisher_token)
        )
        assert _put(resp.json()["objects"][0], data).status_code == 200
        same_size = segment("meta_segment", 1, blob(400))
        other_size = segment("meta_segment", 1, blob(401))
        states = []
        for entry in (same_size, first, other_size):
            resp = client.post(
                uw.AUTHORIZE_PATH, json=body([entry], euid=euid), headers=auth(tenancy.boot.publisher_token)
            )
            assert resp.status_code == 200, resp.text
            states.append(resp.json()["objects"][0]["state"])
        assert states == ["conflict", "stored", "conflict"]
        # One request naming one object twice with different bytes is malformed.
        resp = client.post(
            uw.AUTHORIZE_PATH,
            json=body([first, same_size], euid=euid),
            headers=auth(tenancy.boot.publisher_token),
        )
        assert resp.status_code == 400
        assert resp.json()["code"] == "duplicate_object"


def test_post_authorize_preserves_request_order(gateway: Any, tenancy: Any) -> None:
    euid = new_euid()
    stored_data = {seq: blob(100 + seq) for seq in (2, 5, 9)}
    with gateway() as (client, _):
        first = client.post(
            uw.AUTHORIZE_PATH,
            json=body([segment("data_segment", s, d) for s, d in stored_data.items()], euid=euid),
            headers=auth(tenancy.boot.publisher_token),
        )
        for obj, data in zip(first.json()["objects"], stored_data.values(), strict=True):
            assert _put(obj, data).status_code == 200
        order = [7, 2, 11, 9, 1, 5, 3]
        objects = [segment("data_segment", s, stored_data.get(s, blob(50))) for s in order]
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body(objects, euid=euid), headers=auth(tenancy.boot.publisher_token)
        )
        got = resp.json()["objects"]
        assert [o["sequence"] for o in got] == order
        assert [o["state"] for o in got] == [
            "stored" if s in stored_data else "upload_required" for s in order
        ]


def test_post_authorize_heads_run_concurrently_one_per_distinct_key(gateway: Any, tenancy: Any) -> None:
    in_flight = 0
    peak = 0
    heads = 0
    lock = threading.Lock()

    def slow_head(**_: Any) -> None:
        nonlocal in_flight, peak, heads
        with lock:
            in_flight += 1
            heads += 1
            peak = max(peak, in_flight)
        time.sleep(0.05)  # widen the window so overlapping requests are observable
        with lock:
            in_flight -= 1

    cid = new_cid()
    value = blob(70)
    # Values: segment ranges are listed instead (next test).
    objects = [cas("value", blob(60), new_cid()) for _ in range(30)]
    objects += [cas("value", value, cid), cas("value", value, cid)]  # one key twice: one HEAD
    with gateway(head_concurrency=6) as (client, runtime):
        runtime.store.s3.meta.events.register("before-send.s3.HeadObject", slow_head)
        resp = client.post(uw.AUTHORIZE_PATH, json=body(objects), headers=auth(tenancy.boot.publisher_token))
    assert resp.status_code == 200, resp.text
    assert heads == 31
    assert 1 < peak <= 6


def test_post_authorize_lists_a_segment_range_once_and_heads_only_the_keys_present(
    gateway: Any, tenancy: Any
) -> None:
    """A backlog of segments costs one LIST per plane and request, not one HEAD per segment."""
    calls: dict[str, int] = {"HeadObject": 0, "ListObjectsV2": 0}

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[1]] += 1

    euid = new_euid()
    present = {seq: blob(100 + seq) for seq in (3, 40)}
    with gateway() as (client, runtime):
        first = client.post(
            uw.AUTHORIZE_PATH,
            json=body([segment("meta_segment", s, d) for s, d in present.items()], euid=euid),
            headers=auth(tenancy.boot.publisher_token),
        )
        for obj, data in zip(first.json()["objects"], present.values(), strict=True):
            assert _put(obj, data).status_code == 200
        for op in calls:
            runtime.store.s3.meta.events.register(f"before-send.s3.{op}", count)
        objects = [segment("meta_segment", s, present.get(s, blob(60))) for s in range(1, 51)]
        objects[39] = segment("meta_segment", 40, blob(140))  # different bytes under a present key
        objects += [segment("data_segment", s, blob(70)) for s in range(1, 3)]  # below the threshold
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body(objects, euid=euid), headers=auth(tenancy.boot.publisher_token)
        )
    assert resp.status_code == 200, resp.text
    states = [o["state"] for o in resp.json()["objects"]]
    expected = ["upload_required"] * 52
    expected[2], expected[39] = "stored", "conflict"
    assert states == expected
    assert all(o["upload_url"] for o in resp.json()["objects"] if o["state"] == "upload_required")
    # One listing of meta 1..50; HEADs for the two meta keys it showed and the two data keys.
    assert calls == {"ListObjectsV2": 1, "HeadObject": 4}


def test_post_authorize_keys_follow_the_token_scope_not_the_body(gateway: Any, tenancy: Any) -> None:
    euid, flush_id = new_euid(), new_flush_id()
    objects = [segment("meta_segment", 3, blob(10)), pack(blob(20)), cas("table", blob(30))]
    req = body(objects, euid=euid, flush_id=flush_id)
    with gateway() as (client, _):
        a = client.post(uw.AUTHORIZE_PATH, json=req, headers=auth(tenancy.boot.publisher_token))
        b = client.post(uw.AUTHORIZE_PATH, json=req, headers=auth(tenancy.env2_token))
        assert a.status_code == b.status_code == 200
        prefix_a = keys.evidence_prefix(_scope(tenancy))
        prefix_b = keys.evidence_prefix(_scope(tenancy, tenancy.env2_id))
        assert all(o["key"].startswith(prefix_a) for o in a.json()["objects"])
        assert all(o["key"].startswith(prefix_b) for o in b.json()["objects"])
        for obj in a.json()["objects"]:
            assert keys.parse_evidence_key(obj["key"]).scope == _scope(tenancy)

        # The body cannot name a scope or a key: such fields are rejected, not honoured.
        for extra in ({"tenant_id": "other"}, {"environment_id": tenancy.env2_id}, {"key": "evidence/v1/x"}):
            resp = client.post(
                uw.AUTHORIZE_PATH, json=req | extra, headers=auth(tenancy.boot.publisher_token)
            )
            assert resp.status_code == 400, extra
        smuggled = [objects[0] | {"key": prefix_b + "streams/x"}]
        resp = client.post(uw.AUTHORIZE_PATH, json=body(smuggled), headers=auth(tenancy.boot.publisher_token))
        assert resp.status_code == 400

        # Another tenant's token is unknown to this deployment.
        resp = client.post(uw.AUTHORIZE_PATH, json=req, headers=auth(tenancy.other_tenant_token))
        assert resp.status_code == 401


def test_post_authorize_hashes_objects_stored_without_a_checksum(gateway: Any, tenancy: Any, s3: Any) -> None:
    """An object written without a SHA-256 (not through our URLs) is read and hashed to decide."""
    euid = new_euid()
    data = blob(500)
    key = keys.data_segment_key(_scope(tenancy), euid, 7)
    s3.put_object(Bucket=BUCKET, Key=key, Body=data)
    assert "ChecksumSHA256" not in s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    same = segment("data_segment", 7, data)
    different = segment("data_segment", 7, blob(500))
    with gateway() as (client, _):
        for entry, state in ((same, "stored"), (different, "conflict")):
            resp = client.post(
                uw.AUTHORIZE_PATH, json=body([entry], euid=euid), headers=auth(tenancy.boot.publisher_token)
            )
            assert [o["state"] for o in resp.json()["objects"]] == [state]
    with gateway(hash_fallback_max_bytes=100) as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body([same], euid=euid), headers=auth(tenancy.boot.publisher_token)
        )
        assert [o["state"] for o in resp.json()["objects"]] == ["conflict"]  # never stored without proof


def test_post_authorize_presign_ttl_follows_the_environment_config(gateway: Any, tenancy: Any) -> None:
    env_id, token = tenancy.new_environment("ttl", upload_url_ttl_seconds=120)
    with gateway() as (client, _):
        resp = client.post(uw.AUTHORIZE_PATH, json=body([pack(blob(10))]), headers=auth(token))
        assert resp.status_code == 200, resp.text
        assert _query(resp.json()["objects"][0]["upload_url"])["X-Amz-Expires"] == "120"
        assert resp.json()["objects"][0]["key"].startswith(keys.evidence_prefix(_scope(tenancy, env_id)))


def test_get_config_per_environment_with_cache_control(gateway: Any, tenancy: Any) -> None:
    _env_id, token = tenancy.new_environment("cfg", flush_interval_seconds=11, max_objects_per_authorize=7)
    with gateway() as (client, _):
        default = client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.publisher_token))
        changed = client.get(uw.CONFIG_PATH, headers=auth(token))
    assert default.status_code == changed.status_code == 200
    for resp in (default, changed):
        assert resp.headers["Cache-Control"].startswith("max-age=300")
        assert resp.headers["Cache-Control"] == CONFIG_CACHE_CONTROL
    assert uw.PublisherConfig.model_validate(default.json()) == uw.PublisherConfig()
    cfg = uw.PublisherConfig.model_validate(changed.json())
    assert (cfg.flush_interval_seconds, cfg.max_objects_per_authorize) == (11, 7)
    assert set(changed.json()) == set(uw.PublisherConfig.model_fields)
