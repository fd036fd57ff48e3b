"""Lance-side rows: exact-match keys and typed leaves."""

from __future__ import annotations

import math

from projection_builders import ARGS, CHILD_OUTPUT, SECRET_ID, Lookup, execution_input

from activities.projection.assemble import assemble_execution
from activities.projection.model import ExecutionProjection
from activities.projection.private_rows import CALL_FACTS
from formats import catalog
from formats.leaf_key import KEY_MAX_VALUE_CHARS, exact_match_key, scalar_json


def test_exact_match_key_is_canonical_json() -> None:
    assert exact_match_key("invoice.id", "INV-1042") == 'invoice.id="INV-1042"'
    assert exact_match_key("total", 12.0) == exact_match_key("total", 12) == "total=12"
    assert exact_match_key("total", 12.5) == "total=12.5"
    assert exact_match_key("ok", True) == "ok=true"
    assert exact_match_key("x", None) == "x=null"
    assert exact_match_key("名前", "東京") == '名前="東京"'
    assert scalar_json(math.nan) == '{"$float": "NaN"}'
    assert exact_match_key("s", "7") != exact_match_key("s", 7)


def test_long_values_are_keyed_by_digest() -> None:
    key = exact_match_key("text", "x" * (KEY_MAX_VALUE_CHARS + 1))
    assert key.startswith("text=#sha256:") and len(key) == len("text=#sha256:") + 64


def test_leaves_have_typed_columns_and_keys() -> None:
    p = assemble_execution(execution_input(), Lookup())
    assert isinstance(p, ExecutionProjection)
    leaves = p.private["value_leaves_v1"]
    args = [r for r in leaves if r["role"] == "args" and r["path"].startswith("invoice")]
    by_path = {r["path"]: r for r in args}
    assert set(by_path) == {"invoice.id", "invoice.total"}
    assert (by_path["invoice.id"]["string"], by_path["invoice.id"]["number"]) == (SECRET_ID, None)
    assert (by_path["invoice.total"]["number"], by_path["invoice.total"]["string"]) == (12.5, None)
    # Q9: the planner's key finds exactly the leaf.
    hits = [r for r in leaves if r["key"] == exact_match_key("invoice.id", SECRET_ID)]
    assert len(hits) == 1 and hits[0]["call_id"] == args[0]["call_id"]
    listed = {r["path"]: r for r in leaves if r["role"] == "output" and r["path"].startswith("[")}
    assert listed["[1]"]["number"] == 42.0 and listed["[0]"]["string"] == "line one private"
    assert len({r["row_id"] for r in leaves}) == len(leaves)
    assert ARGS and CHILD_OUTPUT
    (root_private,) = [r for r in p.private["calls_v1"] if r["args"] and SECRET_ID in r["args"]]
    assert root_private["args"] == '{"invoice":{"id":"INV-1042-secret","total":12.5}}'


def test_leaf_row_ids_follow_the_catalog_rule() -> None:
    p = assemble_execution(execution_input(), Lookup())
    assert isinstance(p, ExecutionProjection)
    by_call: dict[tuple[str, str], list[dict[str, object]]] = {}
    for row in p.private["value_leaves_v1"]:
        by_call.setdefault((str(row["call_id"]), str(row["role"])), []).append(row)
    for (call_id, role), rows in by_call.items():
        for index, row in enumerate(rows):
            expected = catalog.deterministic_row_id("value_leaves_v1", p.execution_id, call_id, role, index)
            assert row["row_id"] == expected


def test_leaves_carry_their_calls_public_pruning_facts() -> None:
    p = assemble_execution(execution_input(), Lookup())
    assert isinstance(p, ExecutionProjection)
    calls = {r["call_id"]: r for r in p.public["calls_v1"]}
    leaves = p.private["value_leaves_v1"]
    assert leaves
    for leaf in leaves:
        call = calls[leaf["call_id"]]
        for name in CALL_FACTS:
            assert leaf[name] == call[name], name
    assert {leaf["function_name"] for leaf in leaves} == {
        calls[c]["function_name"] for c in {leaf["call_id"] for leaf in leaves}
    }
    leaf_columns = {c.name for c in catalog.relation("value_leaves_v1").columns}
    assert set(CALL_FACTS) <= leaf_columns
    # Copies of public facts only: each is public in calls_v1 and in the leaf relation.
    for rel in ("calls_v1", "value_leaves_v1"):
        vis = {c.name: c.visibility for c in catalog.relation(rel).columns}
        assert all(vis[name] == "public" for name in CALL_FACTS)


def test_numeric_leaves_keep_integers_exact() -> None:
    from activities.projection.private_rows import number_columns

    assert number_columns(2**63 - 1) == (float(2**63 - 1), 2**63 - 1, None)
    assert number_columns(-(2**63)) == (float(-(2**63)), -(2**63), None)
    assert number_columns(2**70) == (float(2**70), None, str(2**70))
    assert number_columns(-(2**70)) == (float(-(2**70)), None, str(-(2**70)))
    assert number_columns(3.0) == (3.0, None, None)  # a float stays a float, even integral
    assert number_columns(10**400)[0] == math.inf  # beyond a double: the exact text still holds it
    assert number_columns(10**400)[2] == str(10**400)
    # Integral floats key as their exact integer at any size, as they compare.
    assert exact_match_key("n", 1e20) == exact_match_key("n", 10**20) == "n=100000000000000000000"


def test_leaf_rows_carry_exact_integer_columns() -> None:
    from activities.projection.model import ResolvedValue
    from activities.projection.private_rows import RenderedValues
    from formats import value_codec as vc
    from formats.cas import CODEC_VALUE, value_cid

    value = vc.Class(
        "N",
        (
            ("max", vc.Int(2**63 - 1)),
            ("big", vc.BigInt.from_int(-(2**70))),
            ("f", vc.Float.of(1.5)),
        ),
    )
    body = vc.encode_value(value)
    cid = value_cid(CODEC_VALUE, body)
    rows = RenderedValues({cid: ResolvedValue(body, CODEC_VALUE)}).leaf_rows("e", "c", "output", cid)
    by_path = {r["path"]: r for r in rows}
    assert (by_path["max"]["integer"], by_path["max"]["bigint"]) == (2**63 - 1, None)
    assert (by_path["big"]["integer"], by_path["big"]["bigint"]) == (None, str(-(2**70)))
    assert (by_path["f"]["number"], by_path["f"]["integer"], by_path["f"]["bigint"]) == (1.5, None, None)
    assert by_path["max"]["key"] == "max=9223372036854775807"
    leaf_columns = [c.name for c in catalog.relation("value_leaves_v1").columns]
    assert {"integer", "bigint"} <= set(leaf_columns)
