"""The typed column of a leaf path (api/coordinator/leaf_values.py): exact for every value read."""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa

from activities.projection.private_rows import number_columns
from api.coordinator.leaf_values import PARTS_TYPE, typed_column

MAX, MIN = 2**63 - 1, -(2**63)


def _parts(*values: object) -> pa.StructArray:
    """Leaf parts as the projector writes them (number_columns for numbers)."""
    rows = []
    for v in values:
        row: dict[str, object] = {
            "string": None,
            "number": None,
            "integer": None,
            "bigint": None,
            "bool": None,
        }
        if isinstance(v, bool):
            row["bool"] = v
        elif isinstance(v, int | float):
            row["number"], row["integer"], row["bigint"] = number_columns(v)
        elif isinstance(v, str):
            row["string"] = v
        rows.append(row)
    return pa.array(rows, PARTS_TYPE)


def test_integers_within_int64_are_int64() -> None:
    col = typed_column(_parts(MAX, MIN, 2**53 + 1, None))
    assert col.type == pa.int64() and col.to_pylist() == [MAX, MIN, 2**53 + 1, None]


def test_wider_integers_are_decimals_of_the_needed_width() -> None:
    col = typed_column(_parts(2**70, -(2**70), MAX, 0))
    assert col.type == pa.decimal128(38, 0)
    assert col.to_pylist() == [Decimal(2**70), Decimal(-(2**70)), Decimal(MAX), Decimal(0)]
    wide = typed_column(_parts(2**200, 1))
    assert wide.type == pa.decimal256(76, 0) and wide.to_pylist()[0] == Decimal(2**200)


def test_floats_with_safe_integers_are_doubles() -> None:
    col = typed_column(_parts(0.5, 1, -(2**53), math.inf))
    assert col.type == pa.float64() and col.to_pylist() == [0.5, 1.0, -(2.0**53), math.inf]


def test_floats_with_wide_integers_are_one_exact_decimal() -> None:
    col = typed_column(_parts(1.5, 2**53 + 1, MAX, 2.0**64, 0.1))
    assert pa.types.is_decimal(col.type) and col.type.scale == 1
    assert col.to_pylist() == [
        Decimal("1.5"),
        Decimal(2**53 + 1),
        Decimal(MAX),
        Decimal(2**64),  # an integral float by its exact value, not its shortest text
        Decimal("0.1"),
    ]


def test_no_decimal_fits_falls_back_to_doubles() -> None:
    assert typed_column(_parts(math.nan, 2**60)).type == pa.float64()
    assert typed_column(_parts(10**80, 1)).type == pa.float64()
    assert typed_column(_parts(1e-300, 2**60)).type == pa.float64()


def test_mixed_kinds_are_text_with_exact_integers() -> None:
    col = typed_column(_parts("x", MAX, 2**70, True))
    assert col.to_pylist() == ["x", str(MAX), str(2**70), "true"]
    assert typed_column(_parts(True, False)).to_pylist() == [True, False]
