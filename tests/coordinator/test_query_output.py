"""The NDJSON output format: writer and the reader that refuses incomplete streams."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import query_output as qo


def outcome(rows: int, status: qo.OutcomeStatus = "complete") -> qo.QueryOutcome:
    line = qo.BudgetLine(limit=10)
    return qo.QueryOutcome(
        status=status,
        rows=rows,
        budget=qo.BudgetReport(wall_ms=line, rows=line, bytes=line, private_bytes=line),
    )


def stream(rows: list[dict], n: int | None = None) -> bytes:
    body = b"".join(qo.row_line(r) for r in rows)
    return body + qo.outcome_line(outcome(len(rows) if n is None else n))


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(), st.floats())
_keys = st.text(min_size=1).filter(lambda k: k != qo.OUTCOME_KEY)
rows_strategy = st.lists(st.dictionaries(_keys, json_scalars, max_size=4), max_size=8)


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_round_trip(rows: list[dict]) -> None:
    result = qo.read_query_bytes(stream(rows))
    assert len(result.rows) == len(rows) and result.outcome.rows == len(rows)
    for got, want in zip(result.rows, rows, strict=True):
        assert got == json.loads(json.dumps(qo.json_value(want)))


def test_rows_are_unwrapped_and_outcome_is_last() -> None:
    data = stream([{"a": 1}, {"b": "x"}])
    lines = data.decode().splitlines()
    assert json.loads(lines[0]) == {"a": 1}
    assert list(json.loads(lines[-1])) == ["queryOutcome"]
    assert set(json.loads(lines[-1])["queryOutcome"]) >= {
        "status", "snapshot", "rows", "bytes", "private_bytes_read", "elapsed_ms", "pending", "unavailable",
        "budget", "error",
    }  # fmt: skip


def test_big_integers_stay_exact() -> None:
    result = qo.read_query_bytes(stream([{"t": 1_796_079_604_695_851_123}]))
    assert result.rows[0]["t"] == 1_796_079_604_695_851_123


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"".join(qo.row_line({"a": i}) for i in range(3)), "without its queryOutcome"),
        (b"", "without its queryOutcome"),
        (stream([{"a": 1}]) + qo.row_line({"a": 2}), "follows the queryOutcome"),
        (stream([{"a": 1}], n=2), "reports 2 rows"),
        (stream([{"a": 1}])[:-20], "not JSON"),
        (qo.row_line({"a": 1}) + b'{"queryOutcome": {"status": "complete"}}\n', "malformed queryOutcome"),
    ],
)
def test_incomplete_streams_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(qo.IncompleteResultError) as info:
        qo.read_query_bytes(data, source="test")
    assert why in str(info.value) and info.value.reason == "incomplete_result"


def test_iterating_reader_raises_at_the_end() -> None:
    s = qo.iter_query_stream(b"".join(qo.row_line({"a": i}) for i in range(2)).split(b"\n"))
    seen = []
    with pytest.raises(qo.IncompleteResultError):
        for row in s:
            seen.append(row)
    assert len(seen) == 2  # rows were usable, but the result is marked incomplete


def test_a_row_cannot_impersonate_the_outcome() -> None:
    with pytest.raises(ValueError):
        qo.row_line({"queryOutcome": 1})
    assert qo.json_value(float("nan")) == {"$float": "NaN"}


def test_decimal_cells_are_exact_json_integers() -> None:
    from decimal import Decimal

    line = qo.row_line({"a": Decimal(2**70), "b": Decimal("-9223372036854775808.0"), "c": Decimal("1.5")})
    assert line == b'{"a":1180591620717411303424,"b":-9223372036854775808,"c":1.5}\n'
