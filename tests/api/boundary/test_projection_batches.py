# ruff: noqa: F811  (the fact_world fixture is imported by name, then requested by tests)
"""PUT /projection-batches/{batch_id} and POST /projection-batch-sets: identity, digest, schema, scope,
generation, idempotency."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pyarrow as pa
from boundary_fixtures import World, bearer, workload_client
from facts_fixtures import Facts, batch_id_for, execution_facts, fact_world, make_batch, read_arrow  # noqa: F401

from formats import boundary_wire as w
from formats import catalog
from formats.batch_set_body import encode_batch_set


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
    assert _physical_calls_rows(fact_world, fa.t.tenant_id) == 3


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


# --- POST /projection-batch-sets: many batches, each with the PUT's semantics -------------------


def _item(bid: str, body: bytes, hdr: w.ProjectionBatchHeaders, **override: object) -> dict:  # type: ignore[type-arg]
    encoded = base64.b64encode(body).decode()
    return {**hdr.model_dump(exclude_none=True), "batch_id": bid, "body": encoded, **override}


def _post_set(fa: Facts, items: list[dict]) -> Any:  # type: ignore[type-arg]
    return fa.client.post("/projection-batch-sets", json={"batches": items}, headers=fa.h)


def _physical_calls_rows(world: World, tenant_id: str) -> int:
    """calls_v1 rows as stored, before FINAL collapses replays: what an ingest really inserted."""
    store = world.runtime.facts
    assert store is not None
    return int(
        store.client.query(
            f"SELECT count() FROM {store.database}.calls_v1 WHERE tenant_id = {{t:String}}",
            parameters={"t": tenant_id},
        ).result_rows[0][0]
    )


def _active_parts(world: World, table: str) -> int:
    store = world.runtime.facts
    assert store is not None
    return int(
        store.client.query(
            "SELECT count() FROM system.parts WHERE database = {db:String} AND table = {t:String} AND active",
            parameters={"db": store.database, "t": table},
        ).result_rows[0][0]
    )


def test_batch_set_makes_each_batch_visible_with_one_insert_per_relation(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    items, roots = [], []
    for idx in range(4):
        facts = execution_facts(fa.t.tenant_id, fa.t.project_id, fa.t.environment_id, 1, 100 + idx)
        root = facts["calls_v1"][0]["execution_id"]
        roots.append(root)
        for rel in ("calls_v1", "threads_v1"):
            body, hdr = make_batch(rel, facts[rel], fa.t.environment_id, 1, root)
            items.append(_item(batch_id_for(rel, root), body, hdr))
    parts_before = {t: _active_parts(fact_world, t) for t in ("calls_v1", "threads_v1")}
    resp = _post_set(fa, items)
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert got["visible"] == 8 and got["rejected"] == 0
    assert [r["batch_id"] for r in got["results"]] == [i["batch_id"] for i in items]
    assert all(r["status"] == 200 and r["state"]["state"] == "visible" for r in got["results"])
    assert [r["state"]["content_digest"] for r in got["results"]] == [i["content_digest"] for i in items]
    # Eight batches, two relations: one new part per relation (background merges only reduce it).
    for table, before in parts_before.items():
        assert _active_parts(fact_world, table) - before <= 1
    calls = read_arrow(fa.query("SELECT execution_id FROM calls_v1"))
    assert sorted(set(calls["execution_id"].to_pylist())) == sorted(roots) and calls.num_rows == 12
    # The same set again: every batch answers its recorded state and nothing is inserted.
    again = _post_set(fa, items)
    assert again.status_code == 200 and again.json()["results"] == got["results"]
    assert _physical_calls_rows(fact_world, fa.t.tenant_id) == 12


def test_batch_set_answers_each_batch_like_the_put(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world, idx=7)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    bid = batch_id_for("calls_v1", root)
    put = fa.put(bid, body, hdr)
    assert put.status_code == 200
    body2, hdr2 = make_batch("calls_v1", rows[:2], fa.t.environment_id, 1, root)
    trows, troot = _calls(fact_world, idx=8)
    tbody, thdr = make_batch("calls_v1", trows, fa.t.environment_id, 1, troot)
    brows, broot = _calls(fact_world, "b", idx=9)
    bbody, bhdr = make_batch("calls_v1", brows, fact_world.b.environment_id, 1, broot)
    xrows, xschema = _with_extra_column(trows, "args", pa.string())
    xbody, xhdr = make_batch("calls_v1", xrows, fa.t.environment_id, 1, troot, schema=xschema)
    items = [
        _item(bid, body, hdr),  # already visible, same digest: the PUT's state
        _item(bid, body2, hdr2),  # same id, other digest: conflict
        _item("t-ok", tbody, thdr),  # new
        _item("t-ok", body2, hdr2),  # a repeat inside the set with another digest: conflict
        _item("t-bad-digest", tbody, thdr, content_digest="sha256:" + "0" * 64),
        _item("t-bad-header", tbody, thdr, content_digest="md5:abc"),
        _item("t-other-env", bbody, bhdr),
        _item("t-private", xbody, xhdr),
        _item("t-rows", tbody, thdr, row_count=99),
    ]
    resp = _post_set(fa, items)
    assert resp.status_code == 200, resp.text
    res = resp.json()["results"]
    assert [(r["batch_id"], r["status"]) for r in res] == [
        (bid, 200), (bid, 409), ("t-ok", 200), ("t-ok", 409), ("t-bad-digest", 400),
        ("t-bad-header", 400), ("t-other-env", 404), ("t-private", 400), ("t-rows", 400),
    ]  # fmt: skip
    assert res[0]["state"] == put.json()
    codes = [r["problem"]["code"] if r["problem"] else None for r in res]
    assert codes == [
        None, "batch_digest_conflict", None, "batch_digest_conflict", "content_digest_mismatch",
        "batch_headers_invalid", "environment_not_found", "private_column", "row_count_mismatch",
    ]  # fmt: skip
    assert resp.json()["visible"] == 2 and resp.json()["rejected"] == 7
    got = read_arrow(fa.query("SELECT execution_id, count() AS n FROM calls_v1 GROUP BY execution_id"))
    assert dict(zip(got["execution_id"].to_pylist(), got["n"].to_pylist(), strict=True)) == {
        root: 3,
        troot: 3,
    }


def test_batch_set_envelope_and_size_are_checked(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    resp = fa.client.post("/projection-batch-sets", json={"batches": []}, headers=fa.h)
    assert resp.status_code == 400 and resp.json()["code"] == "batch_set_invalid"
    resp = fa.client.post("/projection-batch-sets", content=b"not json", headers=fa.h)
    assert resp.status_code == 400 and resp.json()["code"] == "batch_set_invalid"
    limit = fact_world.runtime.settings.projection_batch_max_bytes
    resp = fa.client.post("/projection-batch-sets", content=b" " * (limit + 1), headers=fa.h)
    assert resp.status_code == 413 and resp.json()["code"] == "batch_too_large"
    no_jwt = workload_client(fact_world.runtime, fact_world.a.pki.client_cert)
    assert no_jwt.post("/projection-batch-sets", json={"batches": []}).status_code == 401


# --- the binary encoding (formats.batch_set_body): one Arrow stream per relation -------------------


def _post_binary(fa: Facts, batches: list[tuple[str, bytes, w.ProjectionBatchHeaders]]) -> list[dict]:  # type: ignore[type-arg]
    """POST the batches as one binary set; the answers back in the batches' order."""
    enc = encode_batch_set([(bid, hdr, body) for bid, body, hdr in batches])
    resp = fa.client.post(
        "/projection-batch-sets",
        content=enc.body,
        headers={**fa.h, "Content-Type": w.BATCH_SET_MEDIA_TYPE},
    )
    assert resp.status_code == 200, resp.text
    got = resp.json()
    assert got["visible"] + got["rejected"] == len(batches)
    out: list[dict] = [{}] * len(batches)  # type: ignore[type-arg]
    for result, i in zip(got["results"], enc.order, strict=True):
        out[i] = result
    return out


def _mixed_set(world: World, gen: int) -> list[tuple[str, bytes, w.ProjectionBatchHeaders]]:
    """One of each outcome, most of them inside one calls_v1 group (same schema message)."""
    t = world.a
    env = t.environment_id

    def calls(idx: int, which: str = "a") -> tuple[list[dict], str]:  # type: ignore[type-arg]
        return _calls(world, which, idx, gen)

    ok_rows, ok_root = calls(20)
    ok2_rows, ok2_root = calls(21)
    stats = execution_facts(t.tenant_id, t.project_id, env, gen, 21)["call_path_stats_v1"]
    nul_rows, nul_root = calls(22)
    nul_rows = [{**r, "function_name": None} if i == 1 else r for i, r in enumerate(nul_rows)]
    other_rows, other_root = calls(23, "b")  # tenant b's scope columns, in tenant a's environment
    dup_rows, dup_root = calls(24)
    dup_rows = [dup_rows[0], {**dup_rows[1], "row_id": dup_rows[0]["row_id"]}, dup_rows[2]]
    wrong_root_rows, _ = calls(25)
    x_rows, x_schema = _with_extra_column(ok_rows, "args", pa.string())
    b_rows, b_root = calls(26, "b")
    out = [
        ("ok", *make_batch("calls_v1", ok_rows, env, gen, ok_root)),
        ("ok-stats", *make_batch("call_path_stats_v1", stats, env, gen, ok2_root)),
        ("ok2", *make_batch("calls_v1", ok2_rows, env, gen, ok2_root)),
        ("ok", *make_batch("calls_v1", ok_rows[:2], env, gen, ok_root)),  # a repeat, other digest
        ("nulls", *make_batch("calls_v1", nul_rows, env, gen, nul_root)),
        ("scope", *make_batch("calls_v1", other_rows, env, gen, other_root)),
        ("dup-row-id", *make_batch("calls_v1", dup_rows, env, gen, dup_root)),
        ("root", *make_batch("calls_v1", wrong_root_rows, env, gen, ok_root)),
        ("private", *make_batch("calls_v1", x_rows, env, gen, ok_root, schema=x_schema)),
        ("other-env", *make_batch("calls_v1", b_rows, world.b.environment_id, gen, b_root)),
    ]
    body, hdr = make_batch("calls_v1", ok2_rows[:1], env, gen, ok2_root)
    out.append(("bad-digest", body, hdr.model_copy(update={"content_digest": "sha256:" + "1" * 64})))
    out.append(("rows", body, hdr.model_copy(update={"row_count": 7})))
    return out


def test_binary_set_answers_each_batch_as_the_json_set_does(fact_world: World) -> None:
    """The same set in both encodings (generation 1 as JSON, 2 as binary, so both insert fresh):
    the same status and problem code per batch, and only the failing batches of a group refused."""
    fa = Facts(fact_world, "a")
    want = [
        ("ok", 200, None), ("ok-stats", 200, None), ("ok2", 200, None),
        ("ok", 409, "batch_digest_conflict"), ("nulls", 400, "null_in_required_column"),
        ("scope", 403, "scope_mismatch"), ("dup-row-id", 400, "row_id_duplicated"),
        ("root", 400, "root_mismatch"), ("private", 400, "private_column"),
        ("other-env", 404, "environment_not_found"), ("bad-digest", 400, "content_digest_mismatch"),
        ("rows", 400, "row_count_mismatch"),
    ]  # fmt: skip
    json_items = [_item(bid, body, hdr) for bid, body, hdr in _mixed_set(fact_world, 1)]
    resp = _post_set(fa, json_items)
    assert resp.status_code == 200, resp.text
    by_json = [
        (r["batch_id"], r["status"], r["problem"] and r["problem"]["code"]) for r in resp.json()["results"]
    ]
    binary = _post_binary(fa, _mixed_set(fact_world, 2))
    by_binary = [(r["batch_id"], r["status"], r.get("problem") and r["problem"]["code"]) for r in binary]
    assert by_json == want
    assert by_binary == want
    # Visible states carry the batch's own identity in its generation.
    assert binary[0]["state"]["generation"] == 2 and binary[0]["state"]["rows"] == 3
    got = read_arrow(
        fa.query("SELECT execution_id, count() AS n FROM calls_v1 GROUP BY execution_id", generation=2)
    )
    ok_root, ok2_root = _calls(fact_world, idx=20, gen=2)[1], _calls(fact_world, idx=21, gen=2)[1]
    assert dict(zip(got["execution_id"].to_pylist(), got["n"].to_pylist(), strict=True)) == {
        ok_root: 3,
        ok2_root: 3,
    }


def test_binary_set_is_idempotent_with_one_insert_per_relation(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    batches = []
    for idx in range(5):
        facts = execution_facts(fa.t.tenant_id, fa.t.project_id, fa.t.environment_id, 1, 300 + idx)
        root = facts["calls_v1"][0]["execution_id"]
        for rel in ("calls_v1", "threads_v1", "health_v1"):
            batches.append(
                (batch_id_for(rel, root), *make_batch(rel, facts[rel], fa.t.environment_id, 1, root))
            )
    parts_before = {t: _active_parts(fact_world, t) for t in ("calls_v1", "threads_v1", "health_v1")}
    first = _post_binary(fa, batches)
    assert all(r["status"] == 200 for r in first)
    assert [r["state"]["content_digest"] for r in first] == [h.content_digest for _, _, h in batches]
    for table, before in parts_before.items():
        assert _active_parts(fact_world, table) - before <= 1
    assert _physical_calls_rows(fact_world, fa.t.tenant_id) == 15
    # Replayed: the recorded states, nothing inserted; and the PUT agrees on a batch of the set.
    assert _post_binary(fa, batches) == first
    assert _physical_calls_rows(fact_world, fa.t.tenant_id) == 15
    bid, body, hdr = batches[0]
    assert fa.put(bid, body, hdr).json() == first[0]["state"]


def test_binary_set_framing_errors_refuse_the_request(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    rows, root = _calls(fact_world, idx=40)
    body, hdr = make_batch("calls_v1", rows, fa.t.environment_id, 1, root)
    good = encode_batch_set([("b40", hdr, body)]).body
    binary = {**fa.h, "Content-Type": w.BATCH_SET_MEDIA_TYPE}
    for bad in (good[:-1], b"BAMLPCK1" + good[8:], good + b"\x00", b""):
        resp = fa.client.post("/projection-batch-sets", content=bad, headers=binary)
        assert resp.status_code == 400 and resp.json()["code"] == "batch_set_invalid", resp.text
    # Damaged bytes inside a group: that batch's digest no longer matches, the request is answered.
    mangled = bytearray(good)
    start = len(good) - len(body)  # the group stream is the body itself (one batch)
    mangled[start + 8 : start + 16] = b"\x00" * 8
    resp = fa.client.post("/projection-batch-sets", content=bytes(mangled), headers=binary)
    assert resp.status_code == 200
    assert resp.json()["results"][0]["problem"]["code"] == "content_digest_mismatch"
    # Framed like a stream, digest right, but no Arrow schema inside: unreadable, as by the PUT.
    junk = b"\xff\xff\xff\xff\x08\x00\x00\x00" + b"\x01" * 8 + b"\xff\xff\xff\xff\x00\x00\x00\x00"
    jhdr = hdr.model_copy(update={"content_digest": "sha256:" + hashlib.sha256(junk).hexdigest()})
    got = _post_binary(fa, [("b41", junk, jhdr)])
    assert got[0]["status"] == 400 and got[0]["problem"]["code"] == "arrow_stream_invalid"
    assert fa.put("b41", junk, jhdr).json()["code"] == "arrow_stream_invalid"
