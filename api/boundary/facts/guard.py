"""Resident SQL guard: parse the caller's SELECT, allow-list it, inject scope, render (pure).

Contract: :func:`guard_sql` returns ClickHouse SQL in which every physical table reference
is ``(SELECT * FROM <db>.<relation> FINAL WHERE tenant_id = .. AND project_id = .. AND
environment_id = .. AND generation = ..) AS <alias>``, or raises :class:`SqlRejected` whose
``code`` names the offending construct. The caller's text is never executed as written:
it is re-rendered from the checked syntax tree (PLATFORM.md section 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope

from formats import catalog

DIALECT = "clickhouse"


class SqlRejected(ValueError):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Scope:
    tenant_id: str
    project_id: str
    environment_id: str
    generation: int


# Syntax nodes a resident query may contain besides allowed functions. Everything else
# (SETTINGS, FORMAT, PREWHERE, SAMPLE, ARRAY JOIN, lambdas, map access, placeholders, window
# clauses, ...) is rejected by name.
_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.Union, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order,
    exp.Ordered, exp.Limit, exp.Offset, exp.Column, exp.Identifier, exp.Literal, exp.Alias,
    exp.TableAlias, exp.Table, exp.Subquery, exp.With, exp.CTE, exp.Star, exp.Paren, exp.Null,
    exp.Boolean, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not,
    exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Neg, exp.Add, exp.Sub, exp.Mul,
    exp.Div, exp.Mod, exp.IntDiv, exp.Tuple, exp.Distinct, exp.DataType, exp.DataTypeParam,
    exp.Interval, exp.Var, exp.Final,
)  # fmt: skip

# Typed sqlglot function classes, by sql_name().
_TYPED_FUNCS = frozenset(
    {
        "COUNT", "SUM", "AVG", "MIN", "MAX", "QUANTILE", "APPROX_DISTINCT", "COUNT_IF", "IF",
        "CASE", "COALESCE", "LOWER", "UPPER", "LENGTH", "STR_POSITION", "STARTS_WITH", "ENDS_WITH",
        "CAST", "TRY_CAST", "TIMESTAMP_TRUNC", "DATE_TRUNC", "ABS", "FLOOR", "CEIL", "ROUND",
        "LEAST", "GREATEST", "ANY_VALUE", "ARG_MAX", "ARG_MIN", "NULLIF", "STDDEV_POP",
        "STDDEV_SAMP", "VARIANCE", "VARIANCE_POP", "LOG", "LN", "SQRT", "POW", "SIGN",
        "CURRENT_TIMESTAMP", "CURRENT_DATE", "TO_STRING",
    }
)  # fmt: skip
# ClickHouse functions sqlglot keeps as anonymous calls, by lower-case name.
_NAMED_FUNCS = frozenset(
    {
        "count", "sum", "avg", "min", "max", "uniq", "uniqexact", "uniqcombined", "countif",
        "sumif", "avgif", "minif", "maxif", "uniqif", "anyif", "quantile", "quantiles",
        "quantileexact", "quantilesexact", "quantiletdigest", "quantilestdigest", "median",
        "medianexact", "argmax", "argmin", "any", "anylast", "countdistinct", "stddevpop",
        "stddevsamp", "varpop", "varsamp", "todate", "todatetime", "todatetime64", "tostartofhour",
        "tostartofday", "tostartofminute", "tostartoffiveminutes", "tostartoffifteenminutes",
        "tostartofweek", "tostartofmonth", "tomonday", "tohour", "tominute", "toyyyymmdd", "toyyyymm",
        "fromunixtimestamp64nano", "fromunixtimestamp64milli", "fromunixtimestamp64micro",
        "tounixtimestamp64nano", "tounixtimestamp64milli", "tounixtimestamp", "now", "now64",
        "today", "yesterday", "multiif", "if", "intdiv", "tostring", "toint64", "touint64",
        "toint32", "touint32", "tofloat64", "isnull", "isnotnull", "ifnull", "nullif", "empty",
        "notempty", "startswith", "endswith", "position", "positioncaseinsensitive", "lower",
        "upper", "length", "round", "coalesce", "datediff",
    }
)  # fmt: skip
_NAMED_CLASSES = (exp.Anonymous, exp.AnonymousAggFunc, exp.CombinedAggFunc, exp.ParameterizedAgg)
_CLAUSES = {"settings": "SETTINGS", "format": "FORMAT", "into": "INTO", "prewhere": "PREWHERE",
            "sample": "SAMPLE", "windows": "WINDOW"}  # fmt: skip


def _public_schema(version: int) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for rel in catalog.relations(version):
        if rel.storage == "clickhouse":
            out[rel.name] = {
                f.name: "String" if str(f.type) in ("string", "large_string") else _sg_type(f.type)
                for f in catalog.public_schema(rel.name, version)
            }
    return out


def _sg_type(t: object) -> str:
    return {"int64": "Int64", "uint64": "UInt64", "uint32": "UInt32", "bool": "Bool"}.get(str(t), "String")


def _private_names(version: int) -> frozenset[str]:
    names: set[str] = set()
    for rel in catalog.relations(version):
        names |= {c.name for c in rel.columns if c.visibility == "private"}
    return frozenset(names)


def _func_name(node: exp.Func) -> tuple[str, bool]:
    if isinstance(node, _NAMED_CLASSES):
        return str(node.name).lower(), True
    return node.sql_name().upper(), False


def _check_node(node: Any, relations: dict[str, dict[str, str]], ctes: set[str]) -> None:
    if isinstance(node, exp.Select):
        for arg, label in _CLAUSES.items():
            if node.args.get(arg):
                raise SqlRejected("clause_not_allowed", f"{label} is not allowed in a resident query")
    if isinstance(node, exp.Table):
        if not isinstance(node.this, exp.Identifier):
            name = node.this.name if isinstance(node.this, exp.Func) else type(node.this).__name__
            raise SqlRejected("table_function_not_allowed", f"table function {name} is not allowed")
        if node.args.get("db") or node.args.get("catalog"):
            raise SqlRejected(
                "qualified_table_not_allowed", f"qualified table {node.sql(DIALECT)} is not allowed"
            )
        for arg in ("sample", "joins", "laterals", "pivots"):
            if node.args.get(arg):
                raise SqlRejected("clause_not_allowed", f"{arg.upper()} on a table is not allowed")
        if node.name not in relations and node.name not in ctes:
            code = "relation_not_public" if node.name in catalog.PRIVATE_RELATIONS else "relation_unknown"
            raise SqlRejected(code, f"relation {node.name} is not a registered public relation")
        return
    if isinstance(node, exp.Join):
        if node.args.get("global_") or node.args.get("global"):
            raise SqlRejected("construct_not_allowed", "GLOBAL JOIN is not allowed")
        if (node.kind or "").upper() == "ARRAY":
            raise SqlRejected("construct_not_allowed", "ARRAY JOIN is not allowed")
    if isinstance(node, exp.In) and node.args.get("is_global"):
        raise SqlRejected("construct_not_allowed", "GLOBAL IN is not allowed")
    if isinstance(node, exp.Func) and not isinstance(node, exp.Connector):
        name, named = _func_name(node)
        if (named and name not in _NAMED_FUNCS) or (not named and name not in _TYPED_FUNCS):
            raise SqlRejected("function_not_allowed", f"function {name} is not allowed in a resident query")
        return
    if not isinstance(node, _NODES):
        raise SqlRejected(
            "construct_not_allowed", f"{type(node).__name__} is not allowed in a resident query"
        )


def _scope_filter(scope: Scope) -> exp.Condition:
    cond: exp.Condition = exp.column("tenant_id").eq(exp.Literal.string(scope.tenant_id))
    cond = exp.and_(cond, exp.column("project_id").eq(exp.Literal.string(scope.project_id)))
    cond = exp.and_(cond, exp.column("environment_id").eq(exp.Literal.string(scope.environment_id)))
    return exp.and_(cond, exp.column("generation").eq(exp.Literal.number(int(scope.generation))))


def _scoped_subquery(database: str, relation: str, alias: str, scope: Scope) -> exp.Subquery:
    table = exp.Table(this=exp.to_identifier(relation), db=exp.to_identifier(database))
    inner = exp.Select(expressions=[exp.Star()]).from_(exp.Final(this=table)).where(_scope_filter(scope))
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def guard_sql(
    sql: str, scope: Scope, *, database: str, catalog_version: int = catalog.LATEST_CATALOG_VERSION
) -> str:
    if len(sql) > 100_000:
        raise SqlRejected("sql_too_long", "resident SQL is limited to 100000 characters")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        raise SqlRejected("sql_parse_error", "the SQL does not parse in the ClickHouse dialect") from exc
    if len(statements) != 1:
        raise SqlRejected("multiple_statements", f"exactly one statement is allowed, got {len(statements)}")
    root = statements[0]
    if not isinstance(root, (exp.Select, exp.Union)):
        raise SqlRejected("statement_not_allowed", f"only SELECT or UNION is allowed, got {root.key.upper()}")
    relations = _public_schema(catalog_version)
    ctes = {c.alias_or_name for c in root.find_all(exp.CTE)}
    shadow = ctes & (set(relations) | set(catalog.PRIVATE_RELATIONS))
    if shadow:
        raise SqlRejected(
            "construct_not_allowed", f"a CTE may not be named like relation {sorted(shadow)[0]}"
        )
    private = _private_names(catalog_version)
    public_names = {c for cols in relations.values() for c in cols}
    for col in root.find_all(exp.Column):
        if col.name in private and col.name not in public_names:
            raise SqlRejected(
                "private_column", f"column {col.name} is private and evaluated in the data plane"
            )
    for node in root.walk():
        _check_node(node, relations, ctes)
    try:
        root = qualify(
            root,
            schema=dict(relations),
            dialect=DIALECT,
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
    except OptimizeError as exc:
        raise SqlRejected("unknown_column", f"a column does not resolve: {str(exc)[:200]}") from exc
    injected: list[exp.Subquery] = []
    for sc in traverse_scope(root):
        for alias, (_node, src) in list(sc.selected_sources.items()):
            if isinstance(src, exp.Table) and src.name in relations and not src.args.get("db"):
                target = src.parent if isinstance(src.parent, exp.Final) else src
                sub = _scoped_subquery(database, src.name, alias, scope)
                target.replace(sub)
                injected.append(sub)
    _assert_scoped(root, injected, database, ctes)
    return root.sql(dialect=DIALECT)


def _assert_scoped(root: exp.Expression, injected: list[exp.Subquery], database: str, ctes: set[str]) -> None:
    """Defence in depth: every physical table must sit inside one of the injected subqueries."""
    inner = {id(s.this) for s in injected}
    for table in root.find_all(exp.Table):
        if table.args.get("db"):
            select = table.find_ancestor(exp.Select)
            if table.text("db") != database or select is None or id(select) not in inner:
                raise SqlRejected("construct_not_allowed", "a table escaped scope injection")
        elif table.name not in ctes:
            raise SqlRejected(
                "relation_unknown", f"relation {table.name} is not a registered public relation"
            )
