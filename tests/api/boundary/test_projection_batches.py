# ruff: noqa: F811  (the fact_world fixture is imported by name, then requested by tests)
"""PUT /projection-batches/{batch_id}: identity, digest, schema, scope, generation, idempotency."""

from __future__ import annotations

import hashlib

import pyarrow as pa
from boundary_fixtures import World, bearer, workload_client
from facts_fixtures import Facts, batch_id_for, execution_facts, fact_world, make_batch, read_arrow  # noqa: F401

from formats import catalog


def _calls(world: World, which: str = "a", idx: int = 0, gen: int = 1) -> tuple[list[dict], str]:  # type: ignore[type-arg]
    t = getattr(world, which)
    rows = execution_facts(t.tenant_id, t.project_id, t.environment_id, gen, idx)["calls_v1"]
    return rows, rows[0]["execution_id"]


def test_put_projection_batch_visible_then_idempotent(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    bid = batch_id_for("calls_v1", root)
    first = fa.put(bid, body, hdr)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "batch_id": bid, "state": "visible", "rows": 3, "generation": 1,
        "relation": "calls_v1", "content_digest": hdr.content_digest,
    }  # fmt: skip
    again = fa.put(bid, body, hdr)
    assert again.status_code == 200 and again.json() == first.json()
    got = read_arrow(fa.query("SELECT call_id, function_name FROM calls_v1 ORDER BY call_id"))
    assert got.column("call_id").to_pylist() == ["c0", "c1", "c2"]
    # Physically the rows were inserted once (the replay did not insert), and FINAL collapses anyway.
    store = fact_world.runtime.facts
    assert store is not None
    raw = store.client.query(
        f"SELECT count() FROM {store.database}.calls_v1 WHERE tenant_id = {{t:String}}",
        parameters={"t": fa.t.tenant_id},
    ).result_rows[0][0]
    assert raw == 3


def test_put_projection_batch_other_digest_conflicts(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    bid = batch_id_for("calls_v1", root)
    assert fa.put(bid, body, hdr).status_code == 200
    body2, hdr2 = make_batch("calls_v1", rows[:2], fa.t.environment_id, 1, root)
    resp = fa.put(bid, body2, hdr2)
    assert resp.status_code == 409 and resp.json()["code"] == "batch_digest_conflict"
    assert resp.headers["content-type"].startswith("application/problem+json")


def test_put_projection_batch_digest_must_match_body(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    resp = fa.put(batch_id_for("calls_v1", root), body + b"\0", hdr)
    assert resp.status_code == 400 and resp.json()["code"] == "content_digest_mismatch"


def _with_extra_column(rows: list[dict], name: str, typ: pa.DataType) -> tuple[list[dict], pa.Schema]:  # type: ignore[type-arg]
    schema = catalog.public_schema("calls_v1").append(pa.field(name, typ, nullable=True))
    return [{**r, name: "x"} for r in rows], schema


def test_put_projection_batch_private_column_rejected_by_name(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    rows2, schema = _with_extra_column(rows, "args", pa.large_string())
    body, hdr = make_batch("calls_v1", rows2, fa.t.environment_id, 1, root, schema=schema)
    resp = fa.put(batch_id_for("calls_v1", root), body, hdr)
    assert resp.status_code == 400
    assert resp.json()["code"] == "private_column" and "args" in resp.json()["detail"]


def test_put_projection_batch_unknown_missing_and_mistyped_columns(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    bid = batch_id_for("calls_v1", root)
    rows2, schema = _with_extra_column(rows, "notes", pa.string())
    resp = fa.put(bid, *make_batch("calls_v1", rows2, fa.t.environment_id, 1, root, schema=schema))
    assert resp.json()["code"] == "unknown_column" and "notes" in resp.json()["detail"]
    schema = catalog.public_schema("calls_v1").remove(
        catalog.public_schema("calls_v1").get_field_index("status")
    )
    resp = fa.put(bid, *make_batch("calls_v1", [{k: v for k, v in r.items() if k != "status"} for r in rows], fa.t.environment_id, 1, root, schema=schema))  # fmt: skip  # noqa: E501
    assert resp.json()["code"] == "missing_column" and "status" in resp.json()["detail"]
    base = catalog.public_schema("calls_v1")
    i = base.get_field_index("duration_ns")
    schema = base.set(i, pa.field("duration_ns", pa.float64(), nullable=True))
    resp = fa.put(bid, *make_batch("calls_v1", [{**r, "duration_ns": 1.5} for r in rows], fa.t.environment_id, 1, root, schema=schema))  # fmt: skip  # noqa: E501
    assert resp.json()["code"] == "column_type_mismatch" and "duration_ns" in resp.json()["detail"]


def test_put_projection_batch_private_relation_rejected(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    resp = fa.put(batch_id_for("calls_v1", root), body, hdr, **{"X-Baml-Relation": "values_v1"})
    assert resp.status_code == 400 and resp.json()["code"] == "relation_not_public"


def test_put_projection_batch_rows_of_another_tenant_rejected(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world, "b")  # tenant b's scope columns, sent by tenant a for its own env
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    resp = fa.put(batch_id_for("calls_v1", root), body, hdr)
    assert resp.status_code == 403 and resp.json()["code"] == "scope_mismatch"


def test_put_projection_batch_environment_of_another_tenant_is_404(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world, "b")
    body, hdr = make_batch("calls_v1", rows, fact_world.b.environment_id, 1, root)
    resp = fa.put(batch_id_for("calls_v1", root), body, hdr)
    assert resp.status_code == 404 and resp.json()["code"] == "environment_not_found"


def test_put_projection_batch_generation_active_or_next_only(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    for gen, status in ((3, 409), (2, 200)):
        rows, root = _calls(fact_world, gen=gen)
        body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, gen, root)
        resp = fa.put(batch_id_for("calls_v1", root) + str(gen), body, hdr)
        assert resp.status_code == status, resp.text
    assert resp.json()["generation"] == 2
    rows, root = _calls(fact_world, gen=1)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    resp = fa.put("g-mismatch", body, hdr, **{"X-Baml-Generation": "2"})
    assert resp.status_code == 400 and resp.json()["code"] == "generation_mismatch"


def test_put_projection_batch_root_and_row_count_checked(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    resp = fa.put("x1", body, hdr, **{"X-Baml-Root-Id": "0" * 32})
    assert resp.json()["code"] == "root_mismatch"
    resp = fa.put("x2", body, hdr, **{"X-Baml-Row-Count": "7"})
    assert resp.json()["code"] == "row_count_mismatch"
    resp = fa.put(
        "x3",
        b"not arrow",
        hdr,
        **{"X-Baml-Content-Digest": "sha256:" + hashlib.sha256(b"not arrow").hexdigest()},
    )
    assert resp.json()["code"] == "arrow_stream_invalid"
    resp = fa.put("x4", body, hdr, **{"X-Baml-Content-Digest": "md5:abc"})
    assert resp.status_code == 400 and resp.json()["code"] == "batch_headers_invalid"


def test_put_projection_batch_needs_certificate_and_jwt(fact_world: World) -> None:
    rows, root = _calls(fact_world)
    body, hdr = make_batch("calls_v1", rows, fact_world.a.environment_id, 1, root)
    no_cert = workload_client(fact_world.runtime, None)
    resp = no_cert.put("/projection-batches/b1", content=body, headers=hdr.http_headers())
    assert resp.status_code == 401
    with_cert = workload_client(fact_world.runtime, fact_world.a.pki.client_cert)
    resp = with_cert.put("/projection-batches/b1", content=body, headers=hdr.http_headers())
    assert resp.status_code == 401 and resp.json()["code"] == "workload_token_missing"
    resp = with_cert.put(
        "/projection-batches/b1", content=body, headers={**hdr.http_headers(), **bearer("x.y.z")}
    )
    assert resp.status_code == 401
