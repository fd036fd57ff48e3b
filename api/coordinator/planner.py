"""The query planner: parse the user's SQL, split it into a public resident subquery and private work.

Pure code, no I/O. Decision (docs/query.md): the user's SQL is ClickHouse SQL over the catalog's
relations, plus private fields addressed with subscripts (``args['invoice']['id']``,
``output['score']``, ``output['items'][1]`` with 1-based list indexes as in ClickHouse, i.e. the
leaf path ``items[0]``).
It is parsed once with sqlglot and rewritten:

* a query with no private reference is sent whole to Boundary as the resident subquery (Boundary
  reparses it, allow-lists relations and functions, injects the tenant scope);
* a query with private references must read one relation that has private columns (``calls_v1``)
  and no joins or subqueries. Its WHERE conjuncts that touch no private field become the resident
  subquery's filter; the resident subquery selects only the public columns the query needs (plus
  the call's identity and availability). Each private reference becomes a pseudo column
  (``__p0``...) that the executor fills from Lance; the whole query, rewritten over those pseudo
  columns, is then run by DataFusion over the joined rows (the *final* SQL). Private conjuncts of
  supported shapes are also turned into :class:`LeafFilter` lookups so the executor prunes with
  Lance's indexes before materialising anything.

The resident SQL is checked to carry no private column and no literal from a private conjunct
(:func:`_assert_no_private_leak`): a private literal never reaches Boundary.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from api.coordinator.dialect import DialectError, to_clickhouse
from formats import catalog, value_json
from formats.query_errors import PlanError, StatementNotAllowed, UnknownRelation, UnsupportedQuery

DIALECT = "clickhouse"
FINAL_DIALECT = "postgres"  # DataFusion reads the generic/Postgres rendering
PRIVATE_ROLES: dict[str, tuple[str, ...]] = {"calls_v1": ("args", "output", "error")}
IDENTITY_COLUMNS = ("execution_id", "call_id")
PRIVATE_STATE = "private_state"

QueryClass = Literal[
    "public",
    "value_read",
    "private_exact",
    "private_substring",
    "private_order",
    "private_group",
    "private_filter",
    "private_projection",
]


@dataclass(frozen=True)
class PrivateRef:
    """One private field the query reads: a role's whole value (``path == ()``) or one leaf path."""

    role: str
    path: tuple[str | int, ...]
    column: str

    @property
    def path_text(self) -> str:
        return value_json.path_text(self.path)

    @property
    def whole(self) -> bool:
        return not self.path


@dataclass(frozen=True)
class LeafFilter:
    """A private conjunct the executor can answer from the leaf dataset's indexes.

    ``op``: ``eq`` (exact match through the combined ``key`` column), ``contains`` (substring of a
    string leaf; ``path_text`` None means any leaf of the role) or a numeric comparison.
    """

    role: str
    path_text: str | None
    op: Literal["eq", "contains", "lt", "le", "gt", "ge"]
    value: str | int | float | bool | None


@dataclass(frozen=True)
class SubstringColumn:
    """``<role> LIKE '%needle%'`` on a whole value: a boolean pseudo column the executor fills.

    True when some *string leaf* of the call's ``role`` value contains ``needle`` (key names and
    the JSON punctuation never match); answered from the leaves' n-gram indexed ``string`` column.
    """

    role: str
    needle: str
    column: str


@dataclass(frozen=True)
class QueryPlan:
    relation: str | None
    query_class: QueryClass
    resident_sql: str
    final_sql: str | None = None
    final_where_sql: str | None = None
    # Result columns that hold a whole value's JSON rendering (emitted as JSON, not as text).
    json_columns: tuple[str, ...] = ()
    refs: tuple[PrivateRef, ...] = ()
    leaf_filters: tuple[LeafFilter, ...] = ()
    resident_columns: tuple[str, ...] = ()
    # When candidates arrive in the query's own order and no private aggregate or ordering applies,
    # the executor may stop once this many rows survived the private filters.
    early_limit: int | None = None
    resident_capped: bool = False
    narrowed: bool = True
    aggregate: bool = False
    reasons: tuple[str, ...] = field(default_factory=tuple)
    substrings: tuple[SubstringColumn, ...] = ()
    # Lance filter over the public copies on each leaf row (function_name, started_at_ns, status)
    # implied by the public conjuncts: pruning only, the candidates still decide which calls count.
    leaf_prune: LeafPrune | None = None

    @property
    def private(self) -> bool:
        return bool(self.refs) or bool(self.substrings)

    @property
    def roles(self) -> tuple[str, ...]:
        """The private roles the query reads (for availability and pending)."""
        return tuple(sorted({r.role for r in self.refs} | {s.role for s in self.substrings}))

    @property
    def interactive(self) -> bool:
        """False when the cost estimate exceeds what an interactive query may spend."""
        return not self.private or self.narrowed


# --- parsing -----------------------------------------------------------------------------------------


def parse_select(sql: str) -> exp.Expression:
    """One SELECT (or UNION of SELECTs); anything else is refused before it can run anywhere."""
    if not sql or not sql.strip():
        raise PlanError("empty query")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
        raise PlanError(f"SQL does not parse{where}", code="sql_syntax") from None
    if len(statements) != 1:
        raise StatementNotAllowed(f"exactly one statement is allowed, got {len(statements)}")
    root = statements[0]
    if not isinstance(root, exp.Select | exp.SetOperation):
        raise StatementNotAllowed(
            f"only SELECT queries are allowed, got {root.key.upper()}",
            remedy="Queries are read-only; write a SELECT over the catalog relations.",
        )
    for node in root.walk():
        if isinstance(node, exp.Select) and any(node.args.get(a) for a in ("settings", "format", "into")):
            raise StatementNotAllowed("SETTINGS, FORMAT and INTO clauses are not allowed")
    return root


def _relations_in(root: exp.Expression) -> list[exp.Table]:
    ctes = {c.alias_or_name for c in root.find_all(exp.CTE)}
    tables = []
    for t in root.find_all(exp.Table):
        if not isinstance(t.this, exp.Identifier):
            raise UnknownRelation("table functions are not allowed")
        if t.args.get("db") or t.args.get("catalog"):
            raise UnknownRelation(f"qualified table names are not allowed ({t.sql(dialect=DIALECT)})")
        if t.name in ctes:
            continue
        try:
            rel = catalog.relation(t.name)
        except KeyError:
            raise UnknownRelation(
                f"unknown relation {t.name!r}",
                remedy=f"Query one of: {', '.join(catalog.PUBLIC_RELATIONS)}.",
            ) from None
        if rel.storage != "clickhouse":
            raise UnknownRelation(
                f"{t.name} is an internal private dataset; query its fields through calls_v1's "
                "args, output and error columns"
            )
        tables.append(t)
    return tables


def _ref_of(node: exp.Expression, roles: tuple[str, ...]) -> tuple[str, tuple[str | int, ...]] | None:
    """(role, path) when ``node`` is a private reference chain, else None."""
    path: list[str | int] = []
    cur = node
    while isinstance(cur, exp.Bracket):
        if len(cur.expressions) == 1 and isinstance(cur.expressions[0], exp.Neg):
            # sqlglot stores ClickHouse's 1-based index 0-based: [0] arrives as -1.
            raise UnsupportedQuery("list subscripts start at 1, as ClickHouse arrays do")
        if len(cur.expressions) != 1 or not isinstance(cur.expressions[0], exp.Literal):
            raise UnsupportedQuery("a private field subscript must be one string or integer literal")
        lit = cur.expressions[0]
        if lit.is_string:
            path.append(value_json.escape_key(lit.this))
        else:
            try:
                index = int(lit.this)
            except ValueError:
                raise UnsupportedQuery("a list subscript must be a non-negative integer") from None
            if index < 0:
                raise UnsupportedQuery("a list subscript must be a non-negative integer")
            path.append(index)
        cur = cur.this
    if isinstance(cur, exp.Column) and cur.name in roles:
        path.reverse()
        return cur.name, tuple(path)
    return None


def _private_columns_of(relation: str) -> set[str]:
    return {c.name for c in catalog.private_columns(relation)}


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this) if isinstance(node.this, exp.And) else [node]
    return [node]


def _literal_value(node: exp.Expression) -> str | int | float | bool | None:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        v = _literal_value(node.this)
        assert isinstance(v, int | float)
        return -v
    if isinstance(node, exp.Literal):
        if node.is_string:
            return str(node.this)
        text = str(node.this)
        try:
            return int(text)
        except ValueError:
            pass
        exact = _plain_decimal(text)
        if exact is not None and exact == exact.to_integral_value():
            # 9223372036854775807.0 is that integer exactly (as typed_sql compares it), not 2**63.
            return int(exact)
        return float(text)
    raise ValueError("not a literal")


def _plain_decimal(text: str) -> Decimal | None:
    """The exact value of a numeric literal written without an exponent, else None."""
    if "e" in text.lower():
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _is_literal(node: exp.Expression) -> bool:
    try:
        _literal_value(node)
    except ValueError:
        return False
    return True


_CMP: dict[type[exp.Expression], tuple[str, str]] = {
    exp.GT: ("gt", "lt"),
    exp.GTE: ("ge", "le"),
    exp.LT: ("lt", "gt"),
    exp.LTE: ("le", "ge"),
}


def _leaf_filter(cond: exp.Expression, refs: dict[str, PrivateRef]) -> LeafFilter | None:
    """A Lance-answerable form of a private conjunct, or None (then only DataFusion evaluates it)."""

    def ref_of(node: exp.Expression) -> PrivateRef | None:
        if isinstance(node, exp.Column) and node.name in refs:
            return refs[node.name]
        return None

    if isinstance(cond, exp.EQ):
        for a, b in ((cond.this, cond.expression), (cond.expression, cond.this)):
            ref = ref_of(a)
            if ref is not None and not ref.whole and _is_literal(b):
                value = _literal_value(b)
                if value is None:
                    return None
                return LeafFilter(ref.role, ref.path_text, "eq", value)
    if isinstance(cond, exp.Like):
        ref = ref_of(cond.this)
        pattern = cond.expression
        if ref is not None and isinstance(pattern, exp.Literal) and pattern.is_string:
            text = str(pattern.this)
            inner = text[1:-1] if len(text) >= 2 and text.startswith("%") and text.endswith("%") else None
            if inner and not any(ch in inner for ch in "%_\\"):
                return LeafFilter(ref.role, None if ref.whole else ref.path_text, "contains", inner)
    for kind, (op, flipped) in _CMP.items():
        if isinstance(cond, kind):
            for a, b, o in ((cond.this, cond.expression, op), (cond.expression, cond.this, flipped)):
                ref = ref_of(a)
                if ref is not None and not ref.whole and _is_literal(b):
                    value = _literal_value(b)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        return LeafFilter(ref.role, ref.path_text, o, value)  # type: ignore[arg-type]
    return None


_NARROWING_COLUMNS = {"call_id", "execution_id", "function_name", "started_at_ns", "ended_at_ns"}


def _narrows(cond: exp.Expression) -> bool:
    """A public conjunct that bounds the candidate set: an id, a function, or a time window."""
    cols = {c.name for c in cond.find_all(exp.Column)}
    if not cols & _NARROWING_COLUMNS:
        return False
    return isinstance(cond, exp.EQ | exp.In | exp.GT | exp.GTE | exp.LT | exp.LTE | exp.Between)


def _has_aggregate(select: exp.Select) -> bool:
    if select.args.get("group") or select.args.get("having") or select.args.get("distinct"):
        return True
    return any(isinstance(n, exp.AggFunc) for e in select.expressions for n in e.walk())


def _final_count_star(root: exp.Expression) -> None:
    # ClickHouse's count() with no argument; DataFusion wants count(*).
    for node in list(root.find_all(exp.Count)):
        if node.this is None and not node.expressions:
            node.set("this", exp.Star())


# --- the passes ----------------------------------------------------------------------------------------
#
# plan_query runs them in this order; each returns a small value, tested on its own
# (tests/coordinator/test_planner_passes.py).


@dataclass(frozen=True)
class PrivateReads:
    """Pass 1 (:func:`find_private_reads`): what private data a statement reads, or nothing."""

    relation: str
    roles: tuple[str, ...]
    refs: tuple[PrivateRef, ...]
    substrings: tuple[SubstringColumn, ...]


def find_private_reads(root: exp.Expression, tables: list[exp.Table]) -> PrivateReads | None:
    """The private references and whole-value substring tests in ``root``; None for a public query.

    Rewrites ``<role> LIKE '%x%'`` into substring pseudo columns in place. Refuses private columns
    that are not queryable, and the shapes a private query cannot take (UNION, joins, subqueries).
    """
    names = {t.name for t in tables}
    private_cols = {name: _private_columns_of(name) for name in names}
    roles_all = tuple(sorted({r for n in names for r in PRIVATE_ROLES.get(n, ())}))
    substrings = _substring_columns(root, roles_all)
    found: list[tuple[str, tuple[str | int, ...]]] = []
    for node in list(root.walk()):
        if not isinstance(node, exp.Bracket | exp.Column) or _inner_link(node):
            continue  # the outermost bracket of a chain stands for the whole chain
        hit = _ref_of(node, roles_all) if roles_all else None
        if hit is not None:
            found.append(hit)
        elif isinstance(node, exp.Column):
            for rel_name, cols in private_cols.items():
                if node.name in cols and node.name not in roles_all:
                    raise UnsupportedQuery(
                        f"private column {rel_name}.{node.name} is not queryable in this version",
                        remedy="Query args, output and error of calls_v1.",
                    )
    if not found and not substrings:
        return None
    if not isinstance(root, exp.Select):
        raise UnsupportedQuery("UNION over private fields is not supported; run each part separately")
    if len(tables) != 1 or root.args.get("joins") or root.find(exp.CTE) or root.find(exp.Subquery):
        raise UnsupportedQuery(
            "a query over private fields reads one relation (calls_v1) with no joins or subqueries",
            remedy="Filter calls_v1 directly; join public relations in a separate public query.",
        )
    relation = tables[0].name
    roles = PRIVATE_ROLES.get(relation, ())
    refs: dict[tuple[str, tuple[str | int, ...]], PrivateRef] = {}
    for role, path in found:
        if role not in roles:
            raise UnsupportedQuery(f"{relation} has no private field {role}")
        if (role, path) not in refs:
            refs[(role, path)] = PrivateRef(role, path, f"__p{len(refs)}")
    return PrivateReads(relation, roles, tuple(refs.values()), tuple(substrings))


def _inner_link(node: exp.Bracket | exp.Column) -> bool:
    """True for the inner links of a subscript chain (``args`` and ``args['a']`` in ``args['a']['b']``)."""
    return isinstance(node.parent, exp.Bracket) and node.parent.this is node


@dataclass(frozen=True)
class FinalTree:
    """Pass 2 (:func:`final_tree`): the statement over pseudo columns, and which names are private."""

    tree: exp.Select
    by_column: dict[str, PrivateRef]
    substring_columns: frozenset[str]
    # Select aliases whose expression reads a private field count as private where they are used.
    private_aliases: frozenset[str]

    def reads_private(self, node: exp.Expression) -> bool:
        return any(
            c.name in self.by_column or c.name in self.substring_columns for c in node.find_all(exp.Column)
        )

    def reads_private_or_alias(self, node: exp.Expression) -> bool:
        return any(
            c.name in self.by_column or c.name in self.private_aliases for c in node.find_all(exp.Column)
        )


def final_tree(root: exp.Select, reads: PrivateReads) -> FinalTree:
    """A copy of ``root`` with each private reference replaced by its pseudo column."""
    refs = {(r.role, r.path): r for r in reads.refs}
    final = copy.deepcopy(root)
    # A bare private field in the select list keeps its written name as the result column.
    for i, item in enumerate(list(final.expressions)):
        if isinstance(item, exp.Bracket | exp.Column) and _ref_of(item, reads.roles) is not None:
            final.expressions[i] = exp.alias_(item, item.sql(dialect=DIALECT), quoted=True)
    for node in list(final.walk()):
        if isinstance(node, exp.Bracket | exp.Column) and not _inner_link(node):
            hit = _ref_of(node, reads.roles)
            if hit is not None:
                node.replace(exp.column(refs[hit].column))
    by_column = {r.column: r for r in reads.refs}
    private_aliases = frozenset(
        e.alias
        for e in final.expressions
        if isinstance(e, exp.Alias) and any(c.name in by_column for c in e.find_all(exp.Column))
    )
    return FinalTree(final, by_column, frozenset(sc.column for sc in reads.substrings), private_aliases)


@dataclass(frozen=True)
class Conjuncts:
    """Pass 3 (:func:`split_conjuncts`): the WHERE conjuncts, by whether they read private data."""

    public: tuple[exp.Expression, ...]
    private: tuple[exp.Expression, ...]


def split_conjuncts(final: FinalTree) -> Conjuncts:
    where = final.tree.args.get("where")
    public: list[exp.Expression] = []
    private: list[exp.Expression] = []
    for cond in _conjuncts(where.this if where is not None else None):
        (private if final.reads_private(cond) else public).append(cond)
    return Conjuncts(tuple(public), tuple(private))


@dataclass(frozen=True)
class Shape:
    """The statement's aggregation, ordering and paging, read off the final tree."""

    aggregate: bool
    order: exp.Order | None
    order_private: bool
    limit: int | None
    offset: int

    @property
    def pushable_order(self) -> bool:
        """The ORDER BY can run in Boundary: it reads no private field and nothing aggregates."""
        return self.order is not None and not self.order_private and not self.aggregate


def query_shape(final: FinalTree) -> Shape:
    tree = final.tree
    order = tree.args.get("order")
    order_private = order is not None and any(final.reads_private_or_alias(o) for o in order.expressions)
    limit_node = tree.args.get("limit")
    offset_node = tree.args.get("offset")
    return Shape(
        aggregate=_has_aggregate(tree),
        order=order,
        order_private=order_private,
        limit=_int_of(limit_node.expression) if limit_node is not None else None,
        offset=_int_of(offset_node.expression) if offset_node is not None else 0,
    )


@dataclass(frozen=True)
class ResidentSelect:
    """Pass 4 (:func:`resident_select`): the public subquery Boundary runs, and how it is bounded."""

    sql: str
    columns: tuple[str, ...]
    early_limit: int | None
    capped: bool


def resident_select(
    reads: PrivateReads, final: FinalTree, conds: Conjuncts, shape: Shape, candidate_cap: int
) -> ResidentSelect:
    """Only public columns, the public conjuncts, the ORDER BY and LIMIT when they can run there,
    else a cap of ``candidate_cap + 1`` rows (so the executor can tell the cap was reached)."""
    columns = _resident_columns(reads, final)
    resident = exp.select(*[exp.column(c) for c in columns]).from_(exp.to_table(reads.relation))
    if conds.public:
        resident = resident.where(exp.and_(*[copy.deepcopy(c) for c in conds.public]))
    if shape.pushable_order:
        assert shape.order is not None
        resident.set("order", copy.deepcopy(shape.order))
    early_limit: int | None = None
    if (
        not shape.aggregate
        and not shape.order_private
        and shape.limit is not None
        and (shape.order is None or shape.pushable_order)
    ):
        early_limit = shape.limit + shape.offset
        if not conds.private:
            resident = resident.limit(early_limit)
    capped = False
    if resident.args.get("limit") is None:
        resident = resident.limit(candidate_cap + 1)
        capped = True
    _assert_no_private_leak(resident, list(reads.refs), list(conds.public), list(conds.private))
    return ResidentSelect(resident.sql(dialect=DIALECT), columns, early_limit, capped)


def _resident_columns(reads: PrivateReads, final: FinalTree) -> tuple[str, ...]:
    """Public columns the final stage needs (everything referenced, minus pseudo and alias names),
    plus the call's identity, each read role's availability and the CIDs of whole values."""
    tree = final.tree
    aliases = {e.alias for e in tree.expressions if isinstance(e, exp.Alias)}
    pub_names = {c.name for c in catalog.relation(reads.relation).columns if c.visibility == "public"}
    needed = {
        c.name
        for c in tree.find_all(exp.Column)
        if c.name not in final.by_column and c.name not in final.substring_columns
    }
    unknown = sorted(n for n in needed - pub_names - aliases)
    if unknown:
        raise UnsupportedQuery(f"unknown column(s) of {reads.relation}: {', '.join(unknown)}")
    if any(isinstance(e, exp.Star) for e in tree.expressions):
        needed |= pub_names - {"tenant_id", "project_id", "environment_id", "generation", "row_id"}
    needed &= pub_names
    needed |= set(IDENTITY_COLUMNS) | {f"{role}_state" for role in _read_roles(reads)}
    # Whole values are read by CID (values_v1 or cas/values/); the CID is a public column.
    needed |= {f"{r.role}_cid" for r in reads.refs if r.whole}
    return tuple(sorted(needed))


def _read_roles(reads: PrivateReads) -> set[str]:
    return {r.role for r in reads.refs} | {sc.role for sc in reads.substrings}


@dataclass(frozen=True)
class FinalSelect:
    """Pass 5 (:func:`final_select`): the SQL DataFusion runs over the joined rows."""

    sql: str
    where_sql: str | None
    # Result columns that hold a whole value's JSON rendering (emitted as JSON, not as text).
    json_columns: tuple[str, ...]


def final_select(final: FinalTree, conds: Conjuncts, shape: Shape) -> FinalSelect:
    """Renders ``final`` for DataFusion (modifying it): pending rows pass every private conjunct,
    and each row carries ``private_state`` unless the query aggregates or selects ``*``."""
    tree = final.tree
    # Pending rows never vanish behind a private filter: they pass it and carry private_state.
    if conds.private and not shape.aggregate:
        pending = exp.column(PRIVATE_STATE).eq(exp.Literal.string("pending"))
        new_where = list(conds.public) + [
            exp.Paren(this=exp.or_(copy.deepcopy(cond), copy.deepcopy(pending))) for cond in conds.private
        ]
        tree.set("where", exp.Where(this=exp.and_(*new_where)))
    if not shape.aggregate and not any(isinstance(e, exp.Star) for e in tree.expressions):
        tree.select(exp.column(PRIVATE_STATE), copy=False)
    _final_count_star(tree)
    where = tree.args.get("where")
    whole_columns = {c for c, r in final.by_column.items() if r.whole}
    json_columns = []
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.name in whole_columns:
            json_columns.append(item.alias_or_name)
    return FinalSelect(
        tree.sql(dialect=FINAL_DIALECT),
        where.this.sql(dialect=FINAL_DIALECT) if where is not None else None,
        tuple(json_columns),
    )


@dataclass(frozen=True)
class Classification:
    """Pass 6 (:func:`classify`): the query class and whether the query is narrow enough to run
    interactively (``reasons`` says why not)."""

    query_class: QueryClass
    narrowed: bool
    reasons: tuple[str, ...]


def classify(
    final: FinalTree, conds: Conjuncts, leaf_filters: tuple[LeafFilter, ...], shape: Shape
) -> Classification:
    exact = any(f.op == "eq" for f in leaf_filters)
    narrowed = any(_narrows(c) for c in conds.public) or (exact and shape.limit is not None)
    ids = any(
        isinstance(c, exp.EQ) and {x.name for x in c.find_all(exp.Column)} & {"call_id", "execution_id"}
        for c in conds.public
    )
    group = final.tree.args.get("group")
    qclass: QueryClass
    if (
        shape.aggregate
        and group is not None
        and any(final.reads_private_or_alias(g) for g in group.expressions)
    ):
        qclass = "private_group"
    elif exact:
        qclass = "private_exact"
    elif (
        final.substring_columns
        or any(f.op == "contains" for f in leaf_filters)
        or any(isinstance(c, exp.Like) for c in conds.private)
    ):
        qclass = "private_substring"
    elif shape.order_private:
        qclass = "private_order"
    elif conds.private:
        qclass = "private_filter"
    elif ids:
        qclass = "value_read"
    else:
        qclass = "private_projection"
    reasons = (
        ()
        if narrowed
        else ("no filter on call_id, execution_id, function_name or a time window bounds the candidates",)
    )
    return Classification(qclass, narrowed, reasons)


def _clickhouse_spelling(root: exp.Expression) -> exp.Expression:
    """Standard percentiles, FILTER and casts in ClickHouse's spelling, for Boundary's guard.

    Only the public path needs it: a private query's final SQL runs in DataFusion, which reads the
    standard spellings itself, and its resident part holds no aggregate.
    """
    try:
        return to_clickhouse(root)
    except DialectError as exc:
        raise UnsupportedQuery(exc.message, remedy=exc.remedy, code="unsupported_syntax") from None


def plan_query(sql: str, *, candidate_cap: int = 100_000) -> QueryPlan:
    """Plan ``sql``. ``candidate_cap``: the most public rows a private query may pull from Boundary."""
    root = parse_select(sql)
    tables = _relations_in(root)
    reads = find_private_reads(root, tables)
    if reads is None:
        names = {t.name for t in tables}
        return QueryPlan(
            relation=next(iter(names)) if len(names) == 1 else None,
            query_class="public",
            resident_sql=_clickhouse_spelling(root).sql(dialect=DIALECT),
        )
    assert isinstance(root, exp.Select)  # find_private_reads refuses set operations
    final = final_tree(root, reads)
    conds = split_conjuncts(final)
    shape = query_shape(final)
    resident = resident_select(reads, final, conds, shape, candidate_cap)
    leaf_filters = tuple(
        f for f in (_leaf_filter(c, final.by_column) for c in conds.private) if f is not None
    )
    leaf_filters += tuple(LeafFilter(sc.role, None, "contains", sc.needle) for sc in reads.substrings)
    kind = classify(final, conds, leaf_filters, shape)
    rendered = final_select(final, conds, shape)
    return QueryPlan(
        relation=reads.relation,
        query_class=kind.query_class,
        resident_sql=resident.sql,
        final_sql=rendered.sql,
        final_where_sql=rendered.where_sql,
        json_columns=rendered.json_columns,
        refs=reads.refs,
        leaf_filters=leaf_filters,
        resident_columns=resident.columns,
        early_limit=resident.early_limit,
        resident_capped=resident.capped,
        narrowed=kind.narrowed,
        aggregate=shape.aggregate,
        reasons=kind.reasons,
        substrings=reads.substrings,
        leaf_prune=leaf_prune(list(conds.public)),
    )


def _substring_columns(root: exp.Expression, roles: tuple[str, ...]) -> list[SubstringColumn]:
    """Rewrite ``<role> LIKE '%x%'`` in WHERE into boolean pseudo columns ``__s0``... (in place)."""
    where = root.args.get("where") if isinstance(root, exp.Select) else None
    out: list[SubstringColumn] = []
    if where is None or not roles:
        return out
    for node in list(where.find_all(exp.Like)):
        target = node.this
        pattern = node.expression
        if not (isinstance(target, exp.Column) and target.name in roles and not target.table):
            continue
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            continue
        text = str(pattern.this)
        inner = text[1:-1] if len(text) >= 2 and text.startswith("%") and text.endswith("%") else None
        if not inner or any(ch in inner for ch in "%_\\"):
            continue
        column = SubstringColumn(target.name, inner, f"__s{len(out)}")
        out.append(column)
        node.replace(exp.column(column.column))
    return out


_PRUNE_COLUMNS = {"function_name": "str", "status": "str", "started_at_ns": "int"}
_PRUNE_OPS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
}
_FLIP = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


PruneValue = str | int


def _prune_value(column: str, node: exp.Expression) -> PruneValue | None:
    if not _is_literal(node):
        return None
    value = _literal_value(node)
    if _PRUNE_COLUMNS[column] == "str":
        return value if isinstance(value, str) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sql_value(value: PruneValue) -> str:
    return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else str(value)


# (column, operator, values): one value, or the list of an IN.
PruneTerm = tuple[str, str, tuple[PruneValue, ...]]


def _prune_terms(cond: exp.Expression) -> list[PruneTerm]:
    for kind, op in _PRUNE_OPS.items():
        if isinstance(cond, kind):
            for a, b, o in ((cond.this, cond.expression, op), (cond.expression, cond.this, _FLIP[op])):
                if isinstance(a, exp.Column) and a.name in _PRUNE_COLUMNS:
                    value = _prune_value(a.name, b)
                    if value is not None:
                        return [(a.name, o, (value,))]
    if (
        isinstance(cond, exp.In)
        and isinstance(cond.this, exp.Column)
        and cond.this.name in _PRUNE_COLUMNS
        and cond.args.get("query") is None
        and cond.expressions
    ):
        values = [_prune_value(cond.this.name, e) for e in cond.expressions]
        if all(v is not None for v in values):
            return [(cond.this.name, "IN", tuple(v for v in values if v is not None))]
    if (
        isinstance(cond, exp.Between)
        and isinstance(cond.this, exp.Column)
        and cond.this.name == "started_at_ns"
    ):
        lo = _prune_value("started_at_ns", cond.args["low"])
        hi = _prune_value("started_at_ns", cond.args["high"])
        if lo is not None and hi is not None:
            return [("started_at_ns", ">=", (lo,)), ("started_at_ns", "<=", (hi,))]
    return []


@dataclass(frozen=True)
class LeafPrune:
    """A Lance filter over the leaves' public call copies (``function_name``, ``started_at_ns``,
    ``status``), as the conjunction of its terms."""

    terms: tuple[PruneTerm, ...]

    def window(self) -> tuple[int | None, int | None]:
        """The start times the terms admit, as inclusive bounds (None: unbounded on that side)."""
        lo: int | None = None
        hi: int | None = None
        for column, op, values in self.terms:
            if column != "started_at_ns":
                continue
            times = [int(v) for v in values]
            if op in (">", ">=", "=", "IN"):
                low = min(times) + (op == ">")
                lo = low if lo is None else max(lo, low)
            if op in ("<", "<=", "=", "IN"):
                high = max(times) - (op == "<")
                hi = high if hi is None else min(hi, high)
        return lo, hi

    def sql(self, *, zone_map: bool = True) -> str:
        """The filter. Without ``zone_map`` the window reads ``started_at_ns + 0``, which no scalar
        index answers: Lance then filters the start time while it reads the rows the other
        indexes select, instead of asking the zone map (slow on some fragments: see
        api/dataplane/lance_rowids.py)."""
        out = []
        for column, op, values in self.terms:
            target = column if zone_map or column != "started_at_ns" else f"{column} + 0"
            rendered = [_sql_value(v) for v in values]
            operand = f"({', '.join(rendered)})" if op == "IN" else rendered[0]
            out.append(f"{target} {op} {operand}")
        return " AND ".join(out)


def leaf_prune(public_conds: list[exp.Expression]) -> LeafPrune | None:
    """The Lance filter on the leaves' public copies implied by the public conjuncts, or None.

    Only conjuncts on ``function_name``, ``started_at_ns`` and ``status`` with literals qualify;
    None unless a function or a time bound is among them (else the scan would not be narrow).
    """
    terms = tuple(t for c in public_conds for t in _prune_terms(c))
    if not any(column in ("function_name", "started_at_ns") for column, _, _ in terms):
        return None
    return LeafPrune(terms)


def _int_of(node: exp.Expression | None) -> int:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            value = int(node.this)
        except ValueError:
            value = -1
        if value >= 0:
            return value
    raise UnsupportedQuery("LIMIT and OFFSET must be non-negative integer literals")


def _assert_no_private_leak(
    resident: exp.Expression,
    refs: list[PrivateRef],
    public_conds: list[exp.Expression],
    private_conds: list[exp.Expression],
) -> None:
    """Defence in depth: no private column, and no literal that only a private conjunct carries."""
    private_names = {"args", "output", "error", *(r.column for r in refs)}
    for col in resident.find_all(exp.Column):
        if col.name in private_names or col.name.startswith("__p"):
            raise AssertionError("private column in resident SQL")
    public_texts = {str(lit.this) for c in public_conds for lit in c.find_all(exp.Literal)}
    resident_texts = {str(lit.this) for lit in resident.find_all(exp.Literal) if lit.is_string}
    for cond in private_conds:
        for lit in cond.find_all(exp.Literal):
            if lit.is_string and str(lit.this) in resident_texts and str(lit.this) not in public_texts:
                raise AssertionError("private literal in resident SQL")


_INT64 = (-(2**63), 2**63 - 1)
_MAX_EXACT_DIGITS = 76  # decimal256
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _exact_literal(node: exp.Expression) -> exp.Expression | None:
    """``CAST('<text>' AS DECIMAL(p, s))`` for a numeric literal DataFusion would not read exactly.

    DataFusion reads an integer literal beyond uint64 as a double and a literal with a fraction as
    a double; written without an exponent, the literal is an exact number (as in standard SQL) and
    compares as one. Integers within int64 are left alone (DataFusion's Int64 is exact).
    """
    negative = isinstance(node, exp.Neg)
    lit = node.this if negative else node
    if not isinstance(lit, exp.Literal) or lit.is_string:
        return None
    text = ("-" if negative else "") + str(lit.this)
    value = _plain_decimal(text)
    if value is None:
        return None
    if value == value.to_integral_value() and _INT64[0] <= int(value) <= _INT64[1] and "." not in text:
        return None
    _, figures, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    precision = max(len(figures) + max(exponent, 0), scale, 1)
    if precision > _MAX_EXACT_DIGITS:
        return None
    return exp.Cast(
        this=exp.Literal.string(format(value, "f")),
        to=exp.DataType.build(f"DECIMAL({precision}, {scale})"),
    )


def typed_sql(sql: str, exact_columns: Collection[str]) -> str:
    """The final SQL (or WHERE text) with literals compared to ``exact_columns`` made exact.

    ``exact_columns`` are the pseudo columns the executor typed as int64 or decimal (integers,
    or integers beyond 2**53 mixed with floats: api/coordinator/leaf_values.py). A numeric literal
    compared with one of them (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``)
    becomes an exact decimal, so ``output['max'] < 9223372036854775807.5`` and
    ``= 1180591620717411303425`` compare exactly. Float columns keep double literals: DataFusion
    would cast a float column to the literal's decimal, which NaN and infinity cannot take.
    """
    if not exact_columns:
        return sql
    root = sqlglot.parse_one(sql, read=FINAL_DIALECT)

    def exact_column(node: exp.Expression | None) -> bool:
        return isinstance(node, exp.Column) and not node.table and node.name in exact_columns

    def swap(node: exp.Expression | None) -> None:
        if node is None:
            return
        replacement = _exact_literal(node)
        if replacement is not None:
            node.replace(replacement)

    for node in list(root.walk()):
        if isinstance(node, _COMPARISONS):
            if exact_column(node.this):
                swap(node.expression)
            elif exact_column(node.expression):
                swap(node.this)
        elif isinstance(node, exp.Between) and exact_column(node.this):
            swap(node.args.get("low"))
            swap(node.args.get("high"))
        elif isinstance(node, exp.In) and exact_column(node.this):
            for item in list(node.expressions):
                swap(item)
    return root.sql(dialect=FINAL_DIALECT)


def with_row_limit(resident_sql: str, limit: int) -> str:
    """The resident SQL returning at most ``limit`` rows (so a row budget truncates, never fails)."""
    root = sqlglot.parse_one(resident_sql, read=DIALECT)
    if isinstance(root, exp.Select):
        current = root.args.get("limit")
        if current is not None:
            try:
                if _int_of(current.expression) <= limit:
                    return resident_sql
            except UnsupportedQuery:
                pass
        return root.limit(limit).sql(dialect=DIALECT)
    wrapped = exp.select("*").from_(
        exp.Subquery(this=root, alias=exp.TableAlias(this=exp.to_identifier("q")))
    )
    return wrapped.limit(limit).sql(dialect=DIALECT)
