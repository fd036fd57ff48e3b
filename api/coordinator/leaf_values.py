"""One typed Arrow column per private leaf path, keeping numbers exact (docs/query.md "Exact numbers").

The leaf dataset stores every numeric leaf three ways (activities/projection/private_rows.py):
``number`` (its nearest double), ``integer`` (exact, when the leaf is an integer within int64)
and ``bigint`` (canonical decimal text of an integer beyond int64). The executor takes those
parts for the rows of one query (a struct column per path, :data:`PARTS`) and this module picks
the narrowest Arrow type that holds every value of the path exactly:

* integers within int64 only -> ``int64``;
* integers, some beyond int64 -> ``decimal128(38, 0)``, ``decimal256(76, 0)`` past 38 digits;
* floats, with integers (if any) within +/-2**53 -> ``float64`` (every such integer is a double);
* floats with wider integers -> a decimal with the floats' scale, each float by its shortest
  round-trip decimal (integral floats by their exact value), so order and equality with the
  integers are exact.

Only where no decimal of 76 digits can hold the values (integers past 76 digits, NaN or
infinite floats next to wide integers, extreme float exponents) does the path fall back to
``float64``. Booleans alone stay ``bool``; any other mix is text, with integers written exactly.

Pure code over Arrow arrays: no I/O.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

PARTS: dict[str, pa.DataType] = {
    "string": pa.large_string(),
    "number": pa.float64(),
    "integer": pa.int64(),
    "bigint": pa.string(),
    "bool": pa.bool_(),
}
PARTS_TYPE = pa.struct([pa.field(name, kind) for name, kind in PARTS.items()])
SAFE_INT = 2**53
DECIMAL128_DIGITS = 38
DECIMAL256_DIGITS = 76


def _present(array: pa.Array) -> int:
    return len(array) - array.null_count


def decimal_type(digits: int, scale: int = 0) -> pa.DataType | None:
    """The narrowest of decimal128(38, s) and decimal256(76, s) holding ``digits`` integer digits."""
    if digits + scale <= DECIMAL128_DIGITS:
        return pa.decimal128(DECIMAL128_DIGITS, scale)
    if digits + scale <= DECIMAL256_DIGITS:
        return pa.decimal256(DECIMAL256_DIGITS, scale)
    return None


def typed_column(parts: pa.StructArray) -> pa.Array:
    """The one typed column of a leaf path from its taken parts (see the module docstring)."""
    strings = parts.field("string")
    numbers = parts.field("number")
    integers = parts.field("integer")
    bigints = parts.field("bigint")
    flags = parts.field("bool")
    n_num, n_str, n_bool = _present(numbers), _present(strings), _present(flags)
    if n_bool and not n_str and not n_num:
        return flags
    if not n_num or n_str or n_bool:
        return _text(strings, numbers, integers, bigints, flags)
    n_floats = n_num - _present(integers) - _present(bigints)
    if not n_floats:
        if not _present(bigints):
            return integers
        width = max(len(t.lstrip("-")) for t in bigints.to_pylist() if t is not None)
        kind = decimal_type(width)
        if kind is None:
            return numbers
        return pc.coalesce(pc.cast(integers, kind), pc.cast(bigints, kind))
    if not _present(bigints):
        within = pc.less_equal(pc.abs(integers), SAFE_INT) if _present(integers) else None
        if within is None or pc.all(within).as_py() is not False:
            return numbers
    return _mixed(numbers, integers, bigints)


def _float_decimal(value: float) -> Decimal:
    # Integral floats (all floats beyond 2**53 are) by their exact value; others by the shortest
    # text that reads back as the same double, which orders exactly against every integer.
    return Decimal(int(value)) if value.is_integer() else Decimal(repr(value))


def _mixed(numbers: pa.Array, integers: pa.Array, bigints: pa.Array) -> pa.Array:
    """Floats next to integers beyond 2**53: one decimal column, or float64 when none fits."""
    values: list[Decimal | None] = []
    for number, integer, bigint in zip(
        numbers.to_pylist(), integers.to_pylist(), bigints.to_pylist(), strict=True
    ):
        if integer is not None:
            values.append(Decimal(integer))
        elif bigint is not None:
            values.append(Decimal(bigint))
        elif number is None:
            values.append(None)
        elif not math.isfinite(number):
            return numbers
        else:
            values.append(_float_decimal(number))
    scale = 0
    digits = 0
    for d in values:
        if d is None:
            continue
        _, figures, exponent = d.as_tuple()
        assert isinstance(exponent, int)
        scale = max(scale, -exponent)
        digits = max(digits, len(figures) + exponent)
    kind = decimal_type(digits, scale)
    if kind is None:
        return numbers
    return pa.array(values, kind)


def _text(
    strings: pa.Array, numbers: pa.Array, integers: pa.Array, bigints: pa.Array, flags: pa.Array
) -> pa.Array:
    """A path mixing kinds reads as text; integers as their exact digits, not a double's."""
    return pc.coalesce(
        strings.cast(pa.large_string()),
        pc.cast(integers, pa.large_string()),
        pc.cast(bigints, pa.large_string()),
        pc.cast(numbers, pa.large_string()),
        pc.cast(flags, pa.large_string()),
    )


def is_exact_numeric(kind: pa.DataType) -> bool:
    """Columns compared with exact decimal literals (``typed_sql``); floats keep double literals."""
    return pa.types.is_integer(kind) or pa.types.is_decimal(kind)
