"""Exact private numbers through ``POST /v1/query`` over a real Lance leaf dataset (issue 11, item 8).

Eight LLM calls output ``{v, i, b, f}`` with chosen numbers: int64's extremes, 2**53 and 2**53+1
(equal as doubles), int64 max and max-1 (equal as doubles), +/-2**70 and 2**70+1 (beyond int64),
and floats. Expected answers are computed here from those Python numbers, exactly; a float
comparison would merge the neighbours and fail.

* ``v``: integers of every width and one float (the path becomes an exact decimal);
* ``i``: integers within int64 (int64);
* ``b``: integers beyond int64 and within (decimal, scale 0);
* ``f``: floats and small integers (float64, exact for each of them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import lance
import pytest
from coordinator_world import BoundaryServer, Corpus
from exact_values_world import LLM_FUNCTION, Number, NumbersWorld, build_numbers_world
from fastapi.testclient import TestClient

from formats import query_output as qo

MAX, MIN = 2**63 - 1, -(2**63)
S53 = 2**53
BIG = 2**70
OUTPUTS: list[dict[str, Number]] = [
    {"v": MAX, "i": MAX, "b": BIG, "f": 0.5},
    {"v": MIN, "i": MAX - 1, "b": BIG + 1, "f": 1},
    {"v": S53 + 1, "i": MIN, "b": -BIG, "f": 2.5},
    {"v": S53, "i": S53 + 1, "b": MAX, "f": -3},
    {"v": BIG, "i": S53, "b": MIN, "f": 0.5},
    {"v": -BIG, "i": S53 + 1, "b": S53 + 1, "f": 1},
    {"v": 1.5, "i": 7, "b": BIG + 1, "f": 2.5},
    {"v": 7, "i": 7, "b": 0, "f": -3},
]
WHERE = f"function_name = '{LLM_FUNCTION}'"


@pytest.fixture(scope="module")
def world(boundary: BoundaryServer, corpus: Corpus) -> NumbersWorld:
    return build_numbers_world(boundary, corpus.lance, OUTPUTS, "exact-numbers")


@pytest.fixture(scope="module")
def call_index(world: NumbersWorld) -> dict[str, int]:
    """call_id -> index into OUTPUTS (the LLM calls start in OUTPUTS order)."""
    calls = [r for r in world.projection.public["calls_v1"] if r["function_name"] == LLM_FUNCTION]
    calls.sort(key=lambda r: r["started_at_ns"])
    assert len(calls) == len(OUTPUTS)
    return {str(r["call_id"]): i for i, r in enumerate(calls)}


def _query(api: TestClient, world: NumbersWorld, sql: str) -> tuple[bytes, qo.QueryResult]:
    resp = api.post("/v1/query", json={"sql": sql}, headers=world.user_headers)
    assert resp.status_code == 200, resp.text
    result = qo.read_query_bytes(resp.content)
    assert result.outcome.error is None, result.outcome.error
    return resp.content, result


def _matching(api: TestClient, world: NumbersWorld, index: dict[str, int], cond: str) -> set[int]:
    _, result = _query(api, world, f"SELECT call_id FROM calls_v1 WHERE {WHERE} AND {cond}")
    return {index[r["call_id"]] for r in result.rows}


def _exact(x: Any) -> tuple[type, Any]:
    # 1 == 1.0 in Python: compare the JSON kind too where the column is exact.
    return (int if isinstance(x, int) else float, x)


def test_select_returns_exact_json_integers(
    api: TestClient, world: NumbersWorld, call_index: dict[str, int]
) -> None:
    raw, result = _query(
        api,
        world,
        f"SELECT call_id, output['v'] AS v, output['i'] AS i, output['b'] AS b, output['f'] AS f "
        f"FROM calls_v1 WHERE {WHERE}",
    )
    assert len(result.rows) == len(OUTPUTS)
    for token in (b'"i":9223372036854775807', b'"i":-9223372036854775808', b'"v":9007199254740993'):
        assert token in raw
    assert b'"b":1180591620717411303425' in raw and b'"v":-1180591620717411303424' in raw
    assert b"e+18" not in raw and b"e+21" not in raw
    for row in result.rows:
        want = OUTPUTS[call_index[row["call_id"]]]
        for name in ("v", "i", "b"):
            assert _exact(row[name]) == _exact(want[name]), (name, row[name], want[name])
        assert row["f"] == want["f"]  # a float path: every value exactly, as a double


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("output['i'] = 9223372036854775807", {0}),
        ("output['i'] = 9223372036854775806", {1}),
        ("output['i'] = -9223372036854775808", {2}),
        ("output['v'] = 9007199254740993", {2}),
        ("output['v'] = 9007199254740992", {3}),
        ("output['v'] = 9223372036854775807", {0}),
        ("output['b'] = 1180591620717411303425", {1, 6}),
        ("output['b'] = -1180591620717411303424", {2}),
        ("output['v'] = 1.5", {6}),
        ("output['f'] = 1", {1, 5}),
        ("output['i'] > 9223372036854775806", {0}),
        ("output['i'] < -9223372036854775807", {2}),
        ("output['i'] > 9007199254740992", {0, 1, 3, 5}),
        ("output['b'] > 1180591620717411303424", {1, 6}),
        ("output['b'] < -9223372036854775808", {2}),
        ("output['v'] < -9223372036854775808", {5}),
        ("output['v'] > 9007199254740992.5", {0, 2, 4}),
        ("output['v'] > 1 AND output['v'] < 2", {6}),
        ("output['v'] > 1.4", {0, 2, 3, 4, 6, 7}),
        ("output['i'] < 9223372036854775807.5", set(range(8))),
        ("output['i'] >= 9223372036854775807.0", {0}),
        ("output['f'] > 0.7", {1, 2, 5, 6}),
    ],
)
def test_filters_compare_exactly(
    api: TestClient, world: NumbersWorld, call_index: dict[str, int], cond: str, expected: set[int]
) -> None:
    assert _matching(api, world, call_index, cond) == expected


def _exact_key(x: Number) -> tuple[int, int]:
    # Exact order of ints and floats alike: (floor, whether a fraction follows).
    if isinstance(x, float):
        whole = int(x // 1)
        return whole, int(x != whole)
    return x, 0


@pytest.mark.parametrize("name", ["v", "i", "b"])
def test_order_by_is_exact(api: TestClient, world: NumbersWorld, name: str) -> None:
    _, result = _query(
        api, world, f"SELECT output['{name}'] AS x FROM calls_v1 WHERE {WHERE} ORDER BY x DESC"
    )
    got = [r["x"] for r in result.rows]
    assert got == sorted((o[name] for o in OUTPUTS), key=_exact_key, reverse=True)
    assert all(isinstance(x, int) for x in got if x != 1.5)  # integers come back as integers


@pytest.mark.parametrize("name", ["v", "i", "b"])
def test_group_by_keeps_neighbours_apart(api: TestClient, world: NumbersWorld, name: str) -> None:
    _, result = _query(
        api,
        world,
        f"SELECT output['{name}'] AS x, count() AS n FROM calls_v1 WHERE {WHERE} GROUP BY x ORDER BY x",
    )
    got = [(r["x"], r["n"]) for r in result.rows]
    counts = Counter(o[name] for o in OUTPUTS)
    assert got == sorted(counts.items(), key=lambda kv: _exact_key(kv[0]))


def test_aggregates_are_exact(api: TestClient, world: NumbersWorld) -> None:
    _, result = _query(
        api,
        world,
        f"SELECT max(output['b']) AS top, min(output['i']) AS low, max(output['v']) AS v "
        f"FROM calls_v1 WHERE {WHERE}",
    )
    assert result.rows == [{"top": BIG + 1, "low": MIN, "v": BIG}]


def test_a_leaf_dataset_without_exact_columns_is_refused(
    api: TestClient, boundary: BoundaryServer, corpus: Corpus
) -> None:
    """An old-layout leaf dataset (number only) is never read as if its integers were exact."""
    old = build_numbers_world(boundary, corpus.lance, OUTPUTS[:2], "exact-numbers-old-layout")
    uri = corpus.lance.uri(old.scope, "value_leaves_v1")
    before = lance.dataset(uri).to_table().drop_columns(["integer", "bigint"])
    lance.write_dataset(before, uri, mode="overwrite", schema=before.schema)
    resp = api.post(
        "/v1/query",
        json={"sql": f"SELECT call_id, output['v'] AS v FROM calls_v1 WHERE {WHERE}"},
        headers=old.user_headers,
    )
    assert resp.status_code == 200, resp.text
    result = qo.read_query_bytes(resp.content)
    assert result.rows == []
    assert result.outcome.error is not None
    assert result.outcome.error.code == "private_layout_outdated"
    assert result.outcome.error.remedy and "rebuild" in result.outcome.error.remedy
