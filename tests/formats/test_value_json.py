"""The JSON rendering: every variant, exact numbers, lossless round trips, leaves and path text."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import value_codec as vc
from formats import value_json as vj

try:
    from value_strategies import values
except ImportError:  # tests collected as a package
    from tests.formats.value_strategies import values

INVOICE = vc.Class(
    "billing.Invoice",
    (
        ("id", vc.String("INV-1042")),
        ("total", vc.Float.of(12.5)),
        ("status", vc.Enum("billing.Status", "PAID")),
        ("items", vc.List((vc.Class("billing.Item", (("sku", vc.String("A-1")), ("qty", vc.Int(2)))),))),
    ),
)


def test_class_reads_naturally() -> None:
    obj = vj.to_json_obj(vc.Map((("invoice", INVOICE),)))
    assert obj["invoice"]["id"] == "INV-1042"
    assert obj["invoice"]["status"] == "PAID"  # an enum compares equal to its variant name
    assert obj["invoice"]["items"][0]["sku"] == "A-1"
    assert vj.to_json_text(INVOICE) == (
        '{"id":"INV-1042","total":12.5,"status":"PAID","items":[{"sku":"A-1","qty":2}]}'
    )


# (value, natural rendering, lossless rendering) for every variant.
TABLE = [
    (vc.Null(), None, None),
    (vc.String("é"), "é", "é"),
    (vc.Bool(False), False, False),
    (vc.Int(2**53 - 1), 2**53 - 1, 2**53 - 1),
    (vc.Int(-(2**53) + 1), -(2**53) + 1, -(2**53) + 1),
    (vc.Int(2**53), {"$int": "9007199254740992"}, {"$int": "9007199254740992"}),
    (vc.Int(-(2**63)), {"$int": "-9223372036854775808"}, {"$int": "-9223372036854775808"}),
    (vc.Float.of(0.1), 0.1, 0.1),
    (vc.Float.of(float("inf")), {"$float": "Infinity"}, {"$float": "Infinity"}),
    (vc.Float.of(float("-inf")), {"$float": "-Infinity"}, {"$float": "-Infinity"}),
    (vc.Float(0x7FF8000000000000), {"$float": "NaN"}, {"$float": "NaN"}),
    (vc.Float(0xFFF8000000000001), {"$float": "NaN", "bits": "fff8000000000001"}, None),
    (vc.BigInt("ff"), {"$bigint": "255"}, {"$bigint": "255"}),
    (vc.BigInt("-1" + "0" * 40), {"$bigint": str(-(16**40))}, None),
    (vc.BigInt("00ff"), {"$bigint_hex": "00ff"}, {"$bigint_hex": "00ff"}),
    (vc.BigInt("oops"), {"$bigint_hex": "oops"}, None),
    (vc.Bytes(b"\x00\xff"), {"$bytes": "AP8="}, None),
    (vc.Enum("E", "A", True), "A", {"$enum": "E", "value": "A", "dynamic": True}),
    (vc.Enum("E", "A"), "A", {"$enum": "E", "value": "A"}),
    (vc.List((vc.Int(1), vc.Null())), [1, None], [1, None]),
    (vc.Map((("a", vc.Int(1)), ("$ref", vc.Int(2)))), {"a": 1, "$$ref": 2}, {"a": 1, "$$ref": 2}),
    (vc.Map((("k", vc.Int(1)), ("k", vc.Int(2)))), {"k": 2}, {"$map": [["k", 1], ["k", 2]]}),
    (vc.Class("C", (("x", vc.Int(1)),)), {"x": 1}, {"$class": "C", "x": 1}),
    (vc.Class("G", (), (b"\x01",)), {}, {"$class": "G", "$type_args": ["AQ=="]}),
    (
        vc.Class("C", (("x", vc.Int(1)), ("x", vc.Int(2)))),
        {"x": 2},
        {"$class": "C", "$fields": [["x", 1], ["x", 2]]},
    ),
    (
        vc.Media(1, "image/png", "url", "https://x/y.png"),
        {"$media": {"kind": "image", "mime_type": "image/png", "url": "https://x/y.png"}},
        None,
    ),
    (vc.Media(9, None, "base64", "aGk="), {"$media": {"kind": "kind_9", "base64": "aGk="}}, None),
    (vc.Media(3, None, None), {"$media": {"kind": "pdf"}}, None),
    (
        vc.Omitted("hostOwnedValue", "host-owned callable"),
        {"$omitted": "hostOwnedValue", "message": "host-owned callable"},
        None,
    ),
    (vc.Unknown(), {"$unknown": True}, None),
]


@pytest.mark.parametrize(("value", "natural", "lossless"), TABLE, ids=[repr(v)[:40] for v, _, _ in TABLE])
def test_every_variant(value: vc.Value, natural: object, lossless: object) -> None:
    assert vj.to_json_obj(value) == natural
    expected = natural if lossless is None else lossless
    assert vj.to_json_obj(value, lossless=True) == expected
    assert vj.from_json_obj(json.loads(vj.to_json_text(value, lossless=True))) == value


def test_big_ints_are_exact_in_text() -> None:
    assert vj.to_json_text(vc.Int(2**63 - 1)) == '{"$int":"9223372036854775807"}'
    assert vj.to_json_text(vc.BigInt.from_int(10**30)) == '{"$bigint":"1000000000000000000000000000000"}'


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_are_exact_json_numbers(x: float) -> None:
    text = vj.to_json_text(vc.Float.of(x))
    assert vc.Float.of(json.loads(text)) == vc.Float.of(x)  # -0.0 included


@settings(max_examples=300, deadline=None)
@given(values)
def test_lossless_rendering_round_trips_through_text(value: vc.Value) -> None:
    text = vj.to_json_text(value, lossless=True)
    assert vj.from_json_obj(json.loads(text)) == value


@settings(max_examples=200, deadline=None)
@given(values)
def test_natural_text_is_strict_json(value: vc.Value) -> None:
    text = vj.to_json_text(value)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))


@settings(max_examples=200, deadline=None)
@given(values)
def test_leaves_address_the_natural_rendering(value: vc.Value) -> None:
    obj = vj.to_json_obj(value)
    for leaf in vj.leaves(value):
        node = obj
        for element in leaf.path:
            node = node[element]
        assert vj.parse_path_text(leaf.path_text) == leaf.path
        if leaf.kind == "string" and isinstance(node, str):
            assert node == leaf.scalar
        elif leaf.kind == "bool":
            assert node is leaf.scalar
        elif leaf.kind == "null":
            assert node is None
        elif leaf.kind == "number" and isinstance(node, (int, float)) and not isinstance(node, bool):
            assert node == leaf.scalar or (math.isnan(node) and math.isnan(leaf.scalar))  # type: ignore[arg-type]


def test_leaves_of_an_invoice() -> None:
    got = [(leaf.path_text, leaf.kind, leaf.scalar) for leaf in vj.leaves(vc.Map((("invoice", INVOICE),)))]
    assert got == [
        ("invoice.id", "string", "INV-1042"),
        ("invoice.total", "number", 12.5),
        ("invoice.status", "string", "PAID"),
        ("invoice.items[0].sku", "string", "A-1"),
        ("invoice.items[0].qty", "number", 2),
    ]


def test_leaves_of_special_values() -> None:
    value = vc.List(
        (
            vc.List(()),
            vc.Map(()),
            vc.Bytes(b"hi"),
            vc.Media(1, None, "url", "u"),
            vc.Media(1, None, "base64", "aGk="),
            vc.Omitted("hostOwnedValue", "m"),
            vc.Unknown(),
            vc.BigInt("-ff"),
            vc.BigInt("zz"),
            vc.Int(2**62),
        )
    )
    assert [(leaf.path_text, leaf.kind, leaf.scalar) for leaf in vj.leaves(value)] == [
        ("[0]", "array", None),
        ("[1]", "object", None),
        ("[2]", "bytes", "aGk="),
        ("[3]", "media", "u"),
        ("[4]", "media", None),
        ("[5]", "omitted", "hostOwnedValue"),
        ("[6]", "omitted", "unknownVariant"),
        ("[7]", "number", -255),
        ("[8]", "string", "zz"),
        ("[9]", "number", 2**62),
    ]
    assert [(leaf.path, leaf.kind) for leaf in vj.leaves(vc.String("x"))] == [((), "string")]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ((), ""),
        (("invoice", "id"), "invoice.id"),
        (("items", 0, "sku"), "items[0].sku"),
        ((3,), "[3]"),
        (("a b", "c"), '["a b"].c'),
        (("$$ref",), '["$$ref"]'),
        (("x", 'q"', 1), 'x["q\\""][1]'),
        (("_ok9",), "_ok9"),
        (("9lives",), '["9lives"]'),
        (("",), '[""]'),
    ],
)
def test_path_text(path: tuple[vj.PathElement, ...], text: str) -> None:
    assert vj.path_text(path) == text
    assert vj.parse_path_text(text) == path


@pytest.mark.parametrize(
    "text", [".a", "a..b", "a.", "a[01]", "a[-1]", "a b", '["a"', "[x]", 'a["b"]', "a b.c"]
)
def test_bad_path_text(text: str) -> None:
    with pytest.raises(ValueError):
        vj.parse_path_text(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=6) | st.integers(0, 1000), max_size=6).map(tuple))
def test_path_text_round_trips(path: tuple[vj.PathElement, ...]) -> None:
    assert vj.parse_path_text(vj.path_text(path)) == path


@pytest.mark.parametrize(
    "bad", [{"$int": "x"}, {"$bytes": "!!"}, {"$nope": 1}, {"$media": {}}, {"$float": "nan"}]
)
def test_from_json_rejects_bad_tagged_objects(bad: object) -> None:
    with pytest.raises(vj.ValueJsonError):
        vj.from_json_obj(bad)


def test_deep_values_do_not_exhaust_recursion_in_leaves() -> None:
    value: vc.Value = vc.Int(1)
    for _ in range(5000):
        value = vc.List((value,))
    assert [leaf.scalar for leaf in vj.leaves(value)] == [1]
