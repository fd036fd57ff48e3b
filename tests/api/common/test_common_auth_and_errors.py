"""Shared primitives: token format, bearer parsing, problem+json rendering, request ids, digests."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from api.common.auth import (
    TokenKind,
    bearer_token,
    generate_token,
    hash_token,
    token_display_prefix,
    token_kind,
)
from api.common.errors import (
    PROBLEM_MEDIA_TYPE,
    BadRequest,
    Conflict,
    Unauthenticated,
    install_error_handlers,
)
from api.common.idempotency import request_digest, validate_key
from api.common.request_id import RequestIdMiddleware, valid_request_id


@pytest.mark.parametrize(
    "kind,prefix",
    [(TokenKind.PUBLISHER, "bst_pub_"), (TokenKind.USER, "bst_usr_"), (TokenKind.OPERATOR, "bst_op_")],
)
def test_generated_tokens_carry_their_kind(kind: TokenKind, prefix: str) -> None:
    tok = generate_token(kind)
    assert tok.startswith(prefix) and token_kind(tok) is kind
    assert generate_token(kind) != tok
    assert len(hash_token(tok)) == 64
    assert token_display_prefix(tok) == tok[: len(prefix) + 4]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_token_kind_rejects_arbitrary_text(text: str) -> None:
    assert token_kind(text) is None or text.startswith("bst_")


def test_bearer_token_errors_name_the_problem() -> None:
    with pytest.raises(Unauthenticated) as e:
        bearer_token(None)
    assert e.value.error_code == "token_missing"
    with pytest.raises(Unauthenticated) as e:
        bearer_token("Token abc")
    assert e.value.error_code == "token_malformed"
    with pytest.raises(Unauthenticated) as e:
        bearer_token("Bearer bst_usr_tooshort")
    assert e.value.error_code == "token_malformed"
    tok = generate_token(TokenKind.USER)
    assert bearer_token(f"Bearer {tok}") == tok
    assert bearer_token(f"bearer  {tok} ") == tok


class Body(BaseModel):
    n: int


def _app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(RequestIdMiddleware)
    install_error_handlers(app)

    @app.post("/conflict")
    def conflict() -> None:
        raise Conflict("already there", remedy="use another name")

    @app.post("/validate")
    def validate(body: Body) -> dict[str, int]:
        return {"n": body.n}

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret value INV-1042")

    return app


def test_problem_json_rendering() -> None:
    client = TestClient(_app(), raise_server_exceptions=False)
    resp = client.post("/conflict", headers={"X-Baml-Request-Id": "r1"})
    assert resp.status_code == 409 and resp.headers["content-type"] == PROBLEM_MEDIA_TYPE
    assert resp.json() == {
        "type": "https://docs.boundaryml.com/studio/problems/conflict",
        "title": "Conflict",
        "status": 409,
        "detail": "already there",
        "code": "conflict",
        "request_id": "r1",
        "retryable": False,
        "remedy": "use another name",
    }
    bad = client.post("/validate", json={"n": "not-a-number-SECRET"})
    assert bad.status_code == 422 and "body.n" in bad.json()["detail"] and "SECRET" not in bad.text
    missing = client.get("/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    boom = client.get("/boom")
    assert boom.status_code == 500 and boom.json()["code"] == "internal_error"
    assert "INV-1042" not in boom.text


def test_request_id_validation() -> None:
    assert valid_request_id("01JD4Z8Q6W3V6J5X9T2N8K7M4C")
    assert not valid_request_id("has space")
    assert not valid_request_id("x" * 129)
    assert not valid_request_id("")


def test_idempotency_digest_and_key() -> None:
    a = request_digest("post", "/v1/tenants", {"b": 1, "a": 2})
    b = request_digest("POST", "/v1/tenants", {"a": 2, "b": 1})
    assert a == b
    assert a != request_digest("POST", "/v1/tenants", {"a": 3, "b": 1})
    assert a != request_digest("POST", "/v1/other", {"a": 2, "b": 1})
    assert validate_key(None) is None and validate_key("01JD-key") == "01JD-key"
    with pytest.raises(BadRequest):
        validate_key("no spaces allowed")
