"""Standard SQL spellings of what ClickHouse already has, rewritten before Boundary's guard (pure).

Queries arrive in the ClickHouse dialect, but agents and Studio users often write standard SQL
(PostgreSQL, Trino, Spark, DataFusion). :func:`to_clickhouse` rewrites the spellings listed in
``docs/query.md`` ("Standard SQL spellings") into the ClickHouse functions that compute the same
thing, so the resident query Boundary reparses holds only what its allow-list knows:

* ``percentile_cont(p) WITHIN GROUP (ORDER BY x)``: ``quantileExactInclusive(p)(x)`` (both
  interpolate linearly between the closest ranks: the R7 method; checked equal in chdb);
* ``percentile_disc(p) WITHIN GROUP (ORDER BY x)``: the first value whose cumulative share reaches
  ``p``, as PostgreSQL defines it (ClickHouse's ``quantileExactLow`` differs where ``p * n`` is an
  integer), so it is spelled out over the sorted values; NULL over no rows;
* ``approx_percentile_cont(p) WITHIN GROUP (ORDER BY x)``, ``approx_percentile_cont(x, p)``,
  ``approx_percentile(x, p)``, ``percentile_approx(x, p)``: ``quantile(p)(x)`` (ClickHouse's
  approximate quantile);
* ``agg(...) FILTER (WHERE c)``: ClickHouse's ``-If`` combinator (``countIf``, ``sumIf``, ...);
* ``x::T``: sqlglot already reads it as ``CAST(x AS T)``, which the guard allows.

Anything else in these shapes (an ordered-set function not listed, a FILTER on an aggregate with no
``-If`` form, several sort keys) is refused with the ClickHouse spelling as the remedy.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

DIALECT = "clickhouse"


class DialectError(ValueError):
    """A standard spelling with no ClickHouse translation; ``remedy`` names the spelling to use."""

    def __init__(self, message: str, remedy: str) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy


# Aggregates whose FILTER form is the -If combinator, by sqlglot class, with the ClickHouse name.
_IF_COMBINABLE: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.AnyValue: "any",
}
_APPROX_NAMES = frozenset({"approx_percentile_cont", "approx_percentile", "percentile_approx"})


def to_clickhouse(root: exp.Expression) -> exp.Expression:
    """``root`` with every listed standard spelling rewritten (in place; returned for chaining)."""
    # Innermost first, so a FILTER sees its aggregate already translated.
    for node in reversed(list(root.walk())):
        if isinstance(node, exp.WithinGroup):
            node.replace(_ordered_set(node))
        elif (
            isinstance(node, exp.Anonymous)
            and node.name.lower() in _APPROX_NAMES
            and not isinstance(node.parent, exp.WithinGroup)
        ):
            node.replace(_approx_call(node))
    for node in reversed(list(root.walk())):
        if isinstance(node, exp.Filter):
            node.replace(_filtered(node))
    return root


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect=DIALECT)


def _parse(text: str) -> exp.Expression:
    select = sqlglot.parse_one(f"SELECT {text}", read=DIALECT)
    assert isinstance(select, exp.Select)
    node = select.selects[0]
    assert isinstance(node, exp.Expression)
    return node


def _sort_key(node: exp.WithinGroup, function: str) -> exp.Expression:
    order = node.expression
    keys = order.expressions if isinstance(order, exp.Order) else []
    if len(keys) != 1:
        raise DialectError(
            f"{function} WITHIN GROUP needs exactly one ORDER BY key",
            remedy="Write quantileExactInclusive(p)(x) for one column x.",
        )
    key = keys[0]
    if isinstance(key, exp.Ordered):
        if key.args.get("desc"):
            raise DialectError(
                f"{function} WITHIN GROUP (ORDER BY ... DESC) is not supported",
                remedy="Order ascending and use the complementary fraction (1 - p).",
            )
        key = key.this
    return key


def _fraction(arg: exp.Expression | None, function: str) -> str:
    literal = arg.this if isinstance(arg, exp.Paren) else arg
    if not isinstance(literal, exp.Literal) or literal.is_string:
        raise DialectError(
            f"{function} takes one numeric literal fraction between 0 and 1",
            remedy=f"Write {function}(0.5) WITHIN GROUP (ORDER BY x).",
        )
    value = float(literal.this)
    if not 0.0 <= value <= 1.0:
        raise DialectError(
            f"{function}({literal.this}): the fraction must lie between 0 and 1",
            remedy=f"Write {function}(0.5) WITHIN GROUP (ORDER BY x).",
        )
    return str(literal.this)


def _ordered_set(node: exp.WithinGroup) -> exp.Expression:
    inner = node.this
    if isinstance(inner, exp.PercentileCont):
        x = _sql(_sort_key(node, "percentile_cont"))
        return _parse(f"quantileExactInclusive({_fraction(inner.this, 'percentile_cont')})({x})")
    if isinstance(inner, exp.PercentileDisc):
        p = _fraction(inner.this, "percentile_disc")
        x = _sql(_sort_key(node, "percentile_disc"))
        # The ceil(p * n)-th smallest non-null value (1-based, at least the first), as PostgreSQL.
        return _parse(
            f"if(count({x}) = 0, NULL, arrayElement(arraySort(groupArray({x})), "
            f"toUInt64(greatest(1, ceil({p} * count({x}))))))"
        )
    if isinstance(inner, exp.Anonymous) and inner.name.lower() == "approx_percentile_cont":
        p = _fraction(inner.expressions[0] if len(inner.expressions) == 1 else None, "approx_percentile_cont")
        return _parse(f"quantile({p})({_sql(_sort_key(node, 'approx_percentile_cont'))})")
    name = inner.sql_name() if not isinstance(inner, exp.Anonymous) else inner.name
    raise DialectError(
        f"{name} WITHIN GROUP is not supported",
        remedy="Use percentile_cont, percentile_disc or approx_percentile_cont, or ClickHouse's "
        "quantileExact(p)(x) / quantile(p)(x).",
    )


def _approx_call(node: exp.Anonymous) -> exp.Expression:
    name = node.name.lower()
    args = node.expressions
    if len(args) != 2:
        raise DialectError(
            f"{name} takes a column and a fraction", remedy=f"Write {name}(x, 0.5), or quantile(0.5)(x)."
        )
    return _parse(f"quantile({_fraction(args[1], name)})({_sql(args[0])})")


def _filtered(node: exp.Filter) -> exp.Expression:
    agg = node.this
    where = node.expression
    cond = _sql(where.this if isinstance(where, exp.Where) else where)
    if isinstance(agg, exp.Count):
        target = agg.this
        if isinstance(target, exp.Distinct):
            values = ", ".join(_sql(e) for e in target.expressions)
            return _parse(f"uniqExactIf({values}, {cond})")
        if target is None or isinstance(target, exp.Star):
            return _parse(f"countIf({cond})")
        return _parse(f"countIf({_sql(target)} IS NOT NULL AND ({cond}))")
    for kind, name in _IF_COMBINABLE.items():
        if isinstance(agg, kind) and not isinstance(agg.this, exp.Distinct):
            return _parse(f"{name}If({_sql(agg.this)}, {cond})")
    if isinstance(agg, exp.ParameterizedAgg) and not isinstance(agg, exp.CombinedParameterizedAgg):
        # quantile(p)(x), quantileExactInclusive(p)(x): the combinator goes on the function name.
        params = ", ".join(_sql(e) for e in agg.expressions)
        args = ", ".join(_sql(e) for e in agg.args.get("params") or [])
        return _parse(f"{agg.name}If({params})({args}, {cond})")
    raise DialectError(
        f"FILTER (WHERE ...) on {_sql(agg)} is not supported",
        remedy="Use ClickHouse's -If combinator, e.g. sumIf(x, cond) or countIf(cond).",
    )
