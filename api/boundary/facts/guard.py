"""Resident SQL guard: parse the caller's SELECT, allow-list it, inject scope, render (pure).

Contract: :func:`guard_sql` returns ClickHouse SQL in which every physical table reference
is ``(SELECT * FROM <db>.<relation> FINAL WHERE <scope>) AS <alias>``, with ``<scope>`` =
``tenant_id = .. AND project_id = .. AND environment_id = .. AND generation = ..``, or raises
:class:`SqlRejected` whose ``code`` names the offending construct. The caller's text is never
executed as written: it is re-rendered from the checked syntax tree (PLATFORM.md section 5).

Identity lookups: when the WHERE of the query level that reads a relation looks it up by
execution (an equality, or an IN list of at most 1000 literals, on ``execution_id``: selective
and bloom-filter indexed, ddl.py), the subquery's WHERE becomes
``<scope> AND (<dedup key>) IN (SELECT <dedup key> FROM <db>.<relation> WHERE <scope> AND
<pushed>)``. ``<dedup key>`` is the table's ORDER BY without the scope columns (the key FINAL
collapses on, ddl.py); ``<pushed>`` are the WHERE's conjuncts that read only that relation's
key columns and the columns its row id is derived from (``execution_id``, ``call_id``, ...:
equal on every version of a row). The key set is read without FINAL, so it holds every key that
has *some* version matching them; FINAL then merges just those keys, and the caller's whole WHERE
still applies outside, to the newest version. So the result is the same as without the key set
whatever the versions hold: it only spares FINAL a merge of the whole scope. Not pushed:
conjuncts holding a subquery, and any into a relation on the null-extended side of a join (a
pushed filter would change which rows get null-extended).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from api.boundary.facts import ddl
from formats import catalog

DIALECT = "clickhouse"
_RENDER = Dialect.get_or_raise(DIALECT)
# Beyond this an IN list is not taken for a lookup: index analysis over a large key set costs more
# than the FINAL merge it saves (docs/query.md: 1000 execution ids still gain, a 10 k-key window loses).
MAX_LOOKUP_VALUES = 1000
# Only execution_id is selective on its own among the identity columns (ddl.IDENTITY_COLUMNS: call,
# thread and path ids repeat across executions), so only it makes a lookup. A lookup on a key
# column needs no key set: the primary index already narrows FINAL to it.
# Join sides and kinds (sqlglot spells ClickHouse strictness as either) under which the FROM
# relation keeps every row independently of the other rows, so filtering it first commutes.
_ROW_PRESERVING = frozenset({"LEFT", "INNER", "OUTER", "CROSS", "ALL", "SEMI", "ANTI", "ASOF"})
_PLAIN_INNER = frozenset({"INNER", "CROSS", "ALL"})


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
        # What api/coordinator/dialect.py writes for standard percentiles and FILTER clauses.
        "quantileexactinclusive", "quantileexactinclusiveif", "quantileif", "quantileexactif",
        "uniqexactif", "grouparray", "arraysort", "arrayelement",
    }
)  # fmt: skip
_NAMED_CLASSES = (exp.Anonymous, exp.AnonymousAggFunc, exp.CombinedAggFunc, exp.ParameterizedAgg)
_CLAUSES = {"settings": "SETTINGS", "format": "FORMAT", "into": "INTO", "prewhere": "PREWHERE",
            "sample": "SAMPLE", "windows": "WINDOW"}  # fmt: skip


@cache
def _public_schema(version: int) -> dict[str, dict[str, str]]:
    """Public columns per ClickHouse relation (shared across calls: never mutated)."""
    out: dict[str, dict[str, str]] = {}
    for rel in catalog.relations(version):
        if rel.storage == "clickhouse":
            out[rel.name] = {
                f.name: "String" if str(f.type) in ("string", "large_string") else _sg_type(f.type)
                for f in catalog.public_schema(rel.name, version)
            }
    return out


def _schema(version: int) -> MappingSchema:
    # A fresh schema per query: qualify's lookups fill its caches with the query's own table
    # spellings. Names need no normalizing: ClickHouse identifiers are case-sensitive, and a
    # normalizing build costs 0.3 ms a query.
    return MappingSchema(
        {name: dict(columns) for name, columns in _public_schema(version).items()},
        dialect=DIALECT,
        normalize=False,
    )


def _sg_type(t: object) -> str:
    return {"int64": "Int64", "uint64": "UInt64", "uint32": "UInt32", "bool": "Bool"}.get(str(t), "String")


@cache
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
    # Fresh nodes throughout, so nothing needs sqlglot's defensive copies (copy=False).
    cond: exp.Condition = exp.EQ(this=exp.column("tenant_id"), expression=exp.Literal.string(scope.tenant_id))
    for column, value in (
        ("project_id", exp.Literal.string(scope.project_id)),
        ("environment_id", exp.Literal.string(scope.environment_id)),
        ("generation", exp.Literal.number(int(scope.generation))),
    ):
        cond = exp.and_(cond, exp.EQ(this=exp.column(column), expression=value), copy=False)
    return cond


def _table(database: str, relation: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(relation), db=exp.to_identifier(database))


def _scoped_subquery(
    database: str, relation: str, alias: str, scope: Scope, pushed: list[exp.Expr], version: int
) -> exp.Subquery:
    cond = _scope_filter(scope)
    if pushed:
        key = [exp.column(c) for c in _dedup_key(relation, version)]
        keys = (
            exp.Select(expressions=key)
            .from_(_table(database, relation), copy=False)
            .where(cond.copy(), *pushed, copy=False)
        )
        cond = exp.and_(
            cond,
            exp.In(this=exp.Tuple(expressions=[k.copy() for k in key]), query=keys.subquery(copy=False)),
            copy=False,
        )
    inner = (
        exp.Select(expressions=[exp.Star()])
        .from_(exp.Final(this=_table(database, relation)), copy=False)
        .where(cond, copy=False)
    )
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))


@cache
def _dedup_key(relation: str, version: int) -> tuple[str, ...]:
    """The ORDER BY that FINAL collapses on, less the scope columns the scope filter pins."""
    order = ddl.table_spec(relation, version).order_by
    return tuple(c for c in order if c not in (*ddl.SCOPE_COLUMNS, "generation"))


def _conjuncts(cond: exp.Expr) -> list[exp.Expr]:
    cond = cond.unnest()
    if isinstance(cond, exp.And):
        return [c for side in (cond.this, cond.expression) for c in _conjuncts(side)]
    return [cond]


def _is_lookup(cond: exp.Expr) -> bool:
    """Whether ``cond`` can only hold on rows of a few literal execution ids."""
    cond = cond.unnest()
    if isinstance(cond, exp.And):
        return any(_is_lookup(c) for c in _conjuncts(cond))
    if isinstance(cond, exp.Or):
        return _is_lookup(cond.this) and _is_lookup(cond.expression)
    if isinstance(cond, exp.EQ):
        a, b = cond.this, cond.expression
        return any(
            isinstance(x, exp.Column) and x.name == "execution_id" and isinstance(y, exp.Literal)
            for x, y in ((a, b), (b, a))
        )
    if isinstance(cond, exp.In):
        values = cond.expressions
        return (
            isinstance(cond.this, exp.Column)
            and cond.this.name == "execution_id"
            and not any(cond.args.get(a) for a in ("query", "unnest", "field"))
            and 0 < len(values) <= MAX_LOOKUP_VALUES
            and all(isinstance(v, exp.Literal) for v in values)
        )
    return False


def _tokens(join: exp.Join) -> set[str]:
    return {str(join.args.get(a) or "").upper() for a in ("side", "kind")} - {""}


def _filter_commutes(select: exp.Select, target: exp.Expr) -> bool:
    """Whether filtering ``target``'s rows before the joins of ``select`` gives the same rows."""
    joins: list[exp.Join] = select.args.get("joins") or []
    if not all(_tokens(j) <= _ROW_PRESERVING or _tokens(j) == {"LEFT", "ANY"} for j in joins):
        return False  # RIGHT/FULL null-extend the FROM side; PASTE pairs rows by position
    from_ = select.args.get("from_")
    if from_ is not None and from_.this is target:
        return True
    return any(j.this is target and _tokens(j) <= _PLAIN_INNER for j in joins)


def _pushdown(select: exp.Expr, target: exp.Expr, alias: str, relation: str, version: int) -> list[exp.Expr]:
    """The WHERE conjuncts to push into ``relation``'s key set (see the module docstring)."""
    identity = ddl.IDENTITY_COLUMNS.get(relation, frozenset())
    if not identity or not isinstance(select, exp.Select):
        return []
    where = select.args.get("where")
    if where is None or not _filter_commutes(select, target):
        return []
    allowed = identity | set(_dedup_key(relation, version)) | {*ddl.SCOPE_COLUMNS, "generation"}
    pushed = []
    for conj in _conjuncts(where.this):
        cols = list(conj.find_all(exp.Column))
        if (
            conj.find(exp.Query, exp.Subquery) is None
            and cols
            and all(c.table == alias and c.name in allowed for c in cols)
        ):
            pushed.append(conj)
    if not any(_is_lookup(c) for c in pushed):
        return []
    out = []
    for conj in pushed:
        conj = conj.copy()
        for col in conj.find_all(exp.Column):
            col.set("table", None)  # inside the key set the physical table is the only source
        out.append(conj)
    return out


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
            schema=_schema(catalog_version),
            dialect=DIALECT,
            validate_qualify_columns=True,
            quote_identifiers=False,
            identify=False,
        )
    except OptimizeError as exc:
        raise SqlRejected("unknown_column", f"a column does not resolve: {str(exc)[:200]}") from exc
    injected: list[exp.Select] = []
    for sc in traverse_scope(root):
        # Every source, not only the selected ones: a SEMI or ANTI joined table selects nothing.
        for alias, src in list(sc.sources.items()):
            if isinstance(src, exp.Table) and src.name in relations and not src.args.get("db"):
                target = src.parent if isinstance(src.parent, exp.Final) else src
                pushed = _pushdown(sc.expression, target, alias, src.name, catalog_version)
                sub = _scoped_subquery(database, src.name, alias, scope, pushed, catalog_version)
                target.replace(sub)
                injected += sub.find_all(exp.Select)  # pushed conjuncts hold no SELECT
    _assert_scoped(root, injected, database, ctes)
    return _RENDER.generate(root, copy=False)  # the tree is ours and dropped after this


def _assert_scoped(root: exp.Expression, injected: list[exp.Select], database: str, ctes: set[str]) -> None:
    """Defence in depth: every physical table must be read by a SELECT the guard built."""
    inner = {id(s) for s in injected}
    for table in root.find_all(exp.Table):
        if table.args.get("db"):
            select = table.find_ancestor(exp.Select)
            if table.text("db") != database or select is None or id(select) not in inner:
                raise SqlRejected("construct_not_allowed", "a table escaped scope injection")
        elif table.name not in ctes:
            raise SqlRejected(
                "relation_unknown", f"relation {table.name} is not a registered public relation"
            )
