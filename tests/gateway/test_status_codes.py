"""Every status code of the guide's authorize table (and the config endpoint's), against real servers."""

from __future__ import annotations

import datetime as dt
import logging
import socket
from typing import Any

import pytest
from gateway_requests import BUCKET, auth, blob, body, cas, new_cid, pack, segment

from api.common.auth import TokenKind, generate_token
from api.common.errors import PROBLEM_MEDIA_TYPE
from formats import upload_wire as uw


def closed_port_url(scheme: str) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"{scheme}://127.0.0.1:{port}"  # nothing listens there once the socket is closed


def assert_problem(resp: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith(PROBLEM_MEDIA_TYPE)
    problem: dict[str, Any] = resp.json()
    assert {"type", "title", "status", "detail", "code", "request_id", "retryable"} <= set(problem)
    assert problem["status"] == status
    assert problem["request_id"] == resp.headers["X-Baml-Request-Id"]
    if code is not None:
        assert problem["code"] == code
    return problem


def _ok_objects() -> list[dict[str, Any]]:
    return [segment("meta_segment", 1, blob(10))]


BAD_CHECKSUM = "Q" * 64
MALFORMED: list[tuple[str, Any]] = [
    ("euid upper case", body(_ok_objects(), euid="A" * 32)),
    ("euid short", body(_ok_objects(), euid="a" * 31)),
    ("flush_id not a ULID", body(_ok_objects(), flush_id="not-a-ulid")),
    ("sequence 0", body([segment("data_segment", 0, b"x")])),
    ("sequence above u64", body([segment("data_segment", 2**64, b"x")])),
    ("checksum not hex", body([{**segment("meta_segment", 1, b"x"), "checksum_sha256": BAD_CHECKSUM}])),
    ("size 0", body([{**segment("meta_segment", 1, b"x"), "size_bytes": 0}])),
    ("cid malformed", body([{**cas("value", b"x"), "cid": "bamlv_2_" + "0" * 64}])),
    ("value with codec 2", body([{**cas("value", b"x"), "codec": 2}])),
    ("table with codec 1", body([{**cas("table", b"x"), "codec": 1}])),
    ("unknown kind", body([{**segment("meta_segment", 1, b"x"), "kind": "manifest"}])),
    ("no objects", body([])),
    ("two packs", body([pack(b"a"), pack(b"b")])),
    ("pack without entry_count", body([{k: v for k, v in pack(b"a").items() if k != "entry_count"}])),
    ("objects missing", {"process_euid": "a" * 32, "flush_id": "01J9ZK3Q4X5Y6Z7A8B9C0D1E2F"}),
]


@pytest.mark.parametrize(("case", "payload"), MALFORMED, ids=[c for c, _ in MALFORMED])
def test_post_authorize_malformed_400(gateway: Any, tenancy: Any, case: str, payload: Any) -> None:
    with gateway() as (client, _):
        resp = client.post(uw.AUTHORIZE_PATH, json=payload, headers=auth(tenancy.boot.publisher_token))
    problem = assert_problem(resp, 400, "malformed_request")
    assert BAD_CHECKSUM not in problem["detail"]  # names fields, never echoes input


def test_post_authorize_invalid_json_400(gateway: Any, tenancy: Any) -> None:
    with gateway() as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH,
            content=b"{not json",
            headers={**auth(tenancy.boot.publisher_token), "Content-Type": "application/json"},
        )
    assert_problem(resp, 400)


def _unauthenticated_headers(tenancy: Any) -> list[tuple[str, dict[str, str]]]:
    _expired_id, expired = tenancy.issue_publisher(
        expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    )
    revoked_id, revoked = tenancy.issue_publisher()
    tenancy.revoke(revoked_id)
    return [
        ("no header", {}),
        ("not bearer", {"Authorization": "Basic dXNlcjpwYXNz"}),
        ("not a token", auth("hello")),
        ("unknown token", auth(generate_token(TokenKind.PUBLISHER))),
        ("expired", auth(expired)),
        ("revoked", auth(revoked)),
        ("other tenant", auth(tenancy.other_tenant_token)),
    ]


def test_both_endpoints_401_for_missing_bad_expired_revoked_or_foreign_tokens(
    gateway: Any, tenancy: Any
) -> None:
    with gateway() as (client, _):
        for case, headers in _unauthenticated_headers(tenancy):
            a = client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=headers)
            c = client.get(uw.CONFIG_PATH, headers=headers)
            for resp in (a, c):
                assert_problem(resp, 401)
                assert resp.headers["WWW-Authenticate"].startswith("Bearer"), case


def test_post_authorize_401_once_a_used_token_is_revoked(gateway: Any, tenancy: Any) -> None:
    token_id, token = tenancy.issue_publisher()
    with gateway(token_cache_seconds=0) as (client, _):
        assert (
            client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(token)).status_code == 200
        )
        tenancy.revoke(token_id)
        resp = client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(token))
    assert_problem(resp, 401, "token_inactive")


def test_both_endpoints_403_for_a_user_token(gateway: Any, tenancy: Any) -> None:
    with gateway() as (client, _):
        a = client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.user_token))
        c = client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.user_token))
    assert_problem(a, 403, "token_not_for_publishing")
    assert_problem(c, 403, "token_not_for_publishing")


def test_post_authorize_409_when_the_environment_has_no_bucket(gateway: Any, tenancy: Any) -> None:
    env = tenancy.boot.environment_id
    with gateway(bucket="") as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
        assert_problem(resp, 409, "no_evidence_prefix")
        # The other environment is not listed either.
        other = client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.env2_token))
        assert_problem(other, 409, "no_evidence_prefix")
    with gateway(bucket="", environment_buckets={env: BUCKET}) as (client, _):
        ok = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
        assert ok.status_code == 200, ok.text
        other = client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.env2_token))
        assert_problem(other, 409, "no_evidence_prefix")


def test_post_authorize_409_when_the_bucket_does_not_exist(gateway: Any, tenancy: Any) -> None:
    with gateway(bucket="no-such-bucket") as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
    assert_problem(resp, 409, "no_evidence_prefix")


def test_post_authorize_413_for_too_many_objects(gateway: Any, tenancy: Any) -> None:
    _env, token = tenancy.new_environment("few", max_objects_per_authorize=3)
    objects = [segment("data_segment", s, blob(5)) for s in range(1, 5)]
    with gateway() as (client, _):
        assert client.post(uw.AUTHORIZE_PATH, json=body(objects[:3]), headers=auth(token)).status_code == 200
        resp = client.post(uw.AUTHORIZE_PATH, json=body(objects), headers=auth(token))
    assert_problem(resp, 413, "too_many_objects")


def test_post_authorize_413_for_an_oversize_object(gateway: Any, tenancy: Any) -> None:
    _env, token = tenancy.new_environment("small", max_object_bytes=2 * 1024 * 1024)
    at_limit = {**cas("value", b"x"), "size_bytes": 2 * 1024 * 1024}
    over = {**cas("value", b"x", new_cid()), "size_bytes": 2 * 1024 * 1024 + 1}
    with gateway() as (client, _):
        assert client.post(uw.AUTHORIZE_PATH, json=body([at_limit]), headers=auth(token)).status_code == 200
        resp = client.post(uw.AUTHORIZE_PATH, json=body([at_limit, over]), headers=auth(token))
        default = client.post(
            uw.AUTHORIZE_PATH,
            json=body([{**over, "size_bytes": 256 * 1024 * 1024 + 1}]),
            headers=auth(tenancy.boot.publisher_token),
        )
    assert "objects[1]" in assert_problem(resp, 413, "object_too_large")["detail"]
    assert_problem(default, 413, "object_too_large")


def test_post_authorize_413_for_an_oversize_body(gateway: Any, tenancy: Any) -> None:
    objects = [segment("data_segment", s, blob(5)) for s in range(1, 40)]
    with gateway(max_request_bytes=2048) as (client, _):
        resp = client.post(uw.AUTHORIZE_PATH, json=body(objects), headers=auth(tenancy.boot.publisher_token))
    assert_problem(resp, 413, "request_too_large")


def test_429_after_the_rate_limit_per_token(gateway: Any, tenancy: Any) -> None:
    with gateway(rate_limit_burst=3, rate_limit_per_second=0.01) as (client, _):
        codes = [
            client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.publisher_token)).status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 200]
        limited = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
        problem = assert_problem(limited, 429, "rate_limited")
        assert problem["retryable"] is True
        assert int(limited.headers["Retry-After"]) >= 1
        # The limit is per token: another token still gets through.
        assert client.get(uw.CONFIG_PATH, headers=auth(tenancy.env2_token)).status_code == 200


def test_503_when_boundary_is_unreachable(gateway: Any, tenancy: Any) -> None:
    with gateway(boundary_workload_url=closed_port_url("https")) as (client, _):
        a = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
        c = client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.publisher_token))
    for resp in (a, c):
        assert assert_problem(resp, 503, "boundary_unavailable")["retryable"] is True
        assert resp.headers["Retry-After"]


def test_503_when_s3_is_unreachable(gateway: Any, tenancy: Any) -> None:
    with gateway(s3_endpoint_url=closed_port_url("http"), s3_connect_timeout_seconds=1) as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.boot.publisher_token)
        )
        assert_problem(resp, 503, "evidence_store_unavailable")
        # The config endpoint needs no S3.
        assert client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.publisher_token)).status_code == 200


def test_logs_carry_no_presigned_url_or_token(gateway: Any, tenancy: Any, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="api")
    with gateway() as (client, _):
        resp = client.post(
            uw.AUTHORIZE_PATH,
            json=body([segment("meta_segment", 1, blob(10)), pack(blob(20))]),
            headers=auth(tenancy.boot.publisher_token),
        )
        client.post(uw.AUTHORIZE_PATH, json=body(_ok_objects()), headers=auth(tenancy.other_tenant_token))
    assert resp.status_code == 200
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("api.")]
    assert any("authorized flush=" in m for m in ours)
    for message in ours:
        assert "X-Amz-Signature" not in message and "X-Amz-Credential" not in message
        assert tenancy.boot.publisher_token not in message and tenancy.other_tenant_token not in message


def test_503_when_the_gateway_has_no_workload_identity_yet(gateway: Any, tenancy: Any, tmp_path: Any) -> None:
    with gateway(tls_dir=tmp_path, deployment_id=None) as (client, _):
        resp = client.get(uw.CONFIG_PATH, headers=auth(tenancy.boot.publisher_token))
    assert_problem(resp, 503, "boundary_unavailable")
