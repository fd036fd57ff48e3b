"""The committed OpenAPI document matches the code; operation ids are stable and unique."""

from __future__ import annotations

import json

from api.boundary.openapi_export import DEFAULT_PATH, build_document, render


def test_committed_openapi_matches_code() -> None:
    committed = DEFAULT_PATH.read_text()
    assert committed == render(), (
        "docs/openapi-boundary.json drifted: run python -m api.boundary.openapi_export"
    )


def test_document_shape() -> None:
    doc = build_document()
    assert doc["info"]["version"] == "0.3.0-proposal"
    ops = [
        op
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    ]
    ids = [op["operationId"] for op in ops]
    assert len(ids) == len(set(ids))
    for name in (
        "getProjectionSchema",
        "createQuerySnapshot",
        "introspectToken",
        "workloadGetActiveGeneration",
        "createWorkloadToken",
        "issueToken",
        "rotateToken",
        "revokeToken",
        "createTenant",
        "setActiveGeneration",
        "updatePublisherConfig",
        "listCatalogVersions",
    ):
        assert name in ids
    for op in ops:
        if op["operationId"] != "controlHealthz":
            assert any(p["name"] == "X-Baml-Request-Id" for p in op["parameters"])
            assert op.get("security")
    assert "Problem" in doc["components"]["schemas"]
    body = doc["paths"]["/v1/tokens"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/TokenIssue")
    assert doc["components"]["schemas"]["TokenIssue"]["examples"]
    json.dumps(doc)
