"""Lance-side rows: value leaves, values_v1 entries, CID references, source files, private columns.

Nothing here leaves the data plane. The leaf layout follows DESIGN.md section 6 and
PLATFORM.md "Query floors": one row per leaf of a decoded value with typed columns
(``string``, ``number``, ``bool``) and a separate combined ``key`` column (``path=value``)
so an exact match is one lookup in its own index, while ``string`` keeps its n-gram index.
Numbers are kept exactly: ``number`` holds every numeric leaf as its nearest double (for float
work and older readers), ``integer`` the exact value of an integer leaf that fits int64, and
``bigint`` the canonical decimal text of an integer beyond int64 (any size; docs/query.md
"Exact numbers" says how the coordinator compares them).

:func:`formats.leaf_key.exact_match_key` is the one definition of the key text; the query
coordinator builds its lookup keys with it too.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from activities.projection.model import ResolvedValue, Row
from formats import catalog, evidence, value_json
from formats.cas import CODEC_VALUE
from formats.errors import FormatError
from formats.function_table import FunctionTable
from formats.leaf_key import KEY_MAX_VALUE_CHARS, exact_match_key
from formats.value_codec import Value, decode_value

# Values are immutable by CID, so their renderings are shared across executions (hot values
# such as prompts and enums recur); only small bodies are cached to bound memory.
RENDER_CACHE_ENTRIES = 4096
RENDER_CACHE_MAX_BODY = 4096
# Public calls_v1 columns copied onto each leaf row (pruning in the leaf scan, docs/query.md).
CALL_FACTS = ("function_name", "started_at_ns", "status", "duration_ns")


def _leaf_key(leaf: value_json.Leaf) -> str:
    if leaf.kind in ("string", "number", "bool", "null"):
        return exact_match_key(leaf.path_text, leaf.scalar)
    # Non-scalar leaves are keyed by their tagged rendering, so they never equal a plain scalar.
    tagged = json.dumps({"$" + leaf.kind: leaf.scalar}, ensure_ascii=False, sort_keys=True)
    if len(tagged) > KEY_MAX_VALUE_CHARS:
        tagged = "#sha256:" + hashlib.sha256(tagged.encode()).hexdigest()
    return f"{leaf.path_text}={tagged}"


def _as_float(number: int | float) -> float:
    # Python ints can exceed a double's range (bigint leaves): clamp to infinity instead of raising.
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def number_columns(number: int | float) -> tuple[float, int | None, str | None]:
    """(number, integer, bigint) of a numeric leaf: its double, and its exact integer if it is one.

    A float stays a float even when integral (``3.0``): only the value's own integer kind is
    exact-integer, so the rendering (``3`` or ``3.0``) and the typed column agree.
    """
    if isinstance(number, bool) or not isinstance(number, int):
        return float(number), None, None
    if INT64_MIN <= number <= INT64_MAX:
        return float(number), number, None
    return _as_float(number), None, str(number)


# (path, key, string, number, integer, bigint, bool) per leaf.
LeafTemplate = list[tuple[str, str, str | None, float | None, int | None, str | None, bool | None]]
LeafColumns = tuple[
    tuple[str, ...],
    tuple[str, ...],
    tuple[str | None, ...],
    tuple[float | None, ...],
    tuple[int | None, ...],
    tuple[str | None, ...],
    tuple[bool | None, ...],
]
_EMPTY_LEAVES: LeafColumns = ((), (), (), (), (), (), ())
_shared_json: OrderedDict[bytes, str | None] = OrderedDict()
_shared_leaves: OrderedDict[bytes, LeafColumns] = OrderedDict()
_shared_lock = threading.Lock()  # activities may run in worker threads
_MISS = object()


def _remember(cache: OrderedDict[bytes, Any], cid: bytes, item: Any) -> None:
    with _shared_lock:
        cache[cid] = item
        if len(cache) > RENDER_CACHE_ENTRIES:
            cache.popitem(last=False)


def _recall(cache: OrderedDict[bytes, Any], cid: bytes) -> Any:
    # No lock: one C-level get of a bytes key is atomic under the GIL, and a lock taken for every
    # value read convoys the activity threads (released and re-taken with the GIL each time).
    return cache.get(cid, _MISS)


class RenderedValues:
    """Decodes each resolved value once and renders its JSON text and leaf rows."""

    def __init__(self, resolved: dict[bytes, ResolvedValue]) -> None:
        self.resolved = resolved
        self._decoded: dict[bytes, Value | None] = {}
        self._json: dict[bytes, str | None] = {}
        self._leaves: dict[bytes, LeafColumns] = {}
        # value_leaves_v1 row ids, ("value_leaves_v1", execution id) hashed once per execution.
        self._leaf_ids: tuple[str, catalog.RowIds] | None = None

    def _shareable(self, cid: bytes) -> bool:
        found = self.resolved.get(cid)
        return found is not None and len(found.body) <= RENDER_CACHE_MAX_BODY

    def value(self, cid: bytes | None) -> Value | None:
        if cid is None or cid not in self.resolved:
            return None
        if cid not in self._decoded:
            found = self.resolved[cid]
            decoded: Value | None = None
            if found.codec == CODEC_VALUE:
                try:
                    decoded = decode_value(found.body, file=found.locator or None)
                except FormatError:
                    # Kept in values_v1 by CID; a fixed decoder can render it on rebuild.
                    decoded = None
            self._decoded[cid] = decoded
        return self._decoded[cid]

    def json_text(self, cid: bytes | None) -> str | None:
        if cid is None:
            return None
        if cid not in self._json:
            shared = _recall(_shared_json, cid)
            if shared is not _MISS:
                self._json[cid] = shared
            else:
                value = self.value(cid)
                self._json[cid] = value_json.to_json_text(value) if value is not None else None
                if self._shareable(cid):
                    _remember(_shared_json, cid, self._json[cid])
        return self._json[cid]

    def _leaf_columns(self, cid: bytes) -> LeafColumns:
        """(paths, keys, strings, numbers, integers, bigints, bools) of the value's leaves, once per value."""
        if cid not in self._leaves:
            shared = _recall(_shared_leaves, cid)
            if shared is not _MISS:
                self._leaves[cid] = shared
        if cid not in self._leaves:
            value = self.value(cid)
            out: LeafTemplate = []
            for leaf in value_json.leaves(value) if value is not None else ():
                string: str | None = None
                number: float | None = None
                integer: int | None = None
                bigint: str | None = None
                flag: bool | None = None
                if leaf.kind == "bool":
                    flag = bool(leaf.scalar)
                elif leaf.kind == "number":
                    assert isinstance(leaf.scalar, int | float)
                    number, integer, bigint = number_columns(leaf.scalar)
                elif leaf.kind in ("string", "bytes", "media") and leaf.scalar is not None:
                    string = str(leaf.scalar)
                out.append((leaf.path_text, _leaf_key(leaf), string, number, integer, bigint, flag))
            columns: LeafColumns = tuple(zip(*out, strict=True)) if out else _EMPTY_LEAVES  # type: ignore[assignment]
            self._leaves[cid] = columns
            if self._shareable(cid):
                _remember(_shared_leaves, cid, columns)
        return self._leaves[cid]

    def add_leaves(
        self, out: LeafRows, execution_id: str, call_id: str, role: str, cid: bytes, call: Row | None = None
    ) -> None:
        """Append the value's leaf rows to ``out``; ``call`` is the call's public ``calls_v1`` row.

        The call's public pruning facts (:data:`CALL_FACTS`) are copied onto every leaf so a query
        can filter and rank leaves by function, time window and status in one indexed Lance scan,
        without shipping candidate id lists. They are public facts: the copy leaks nothing.
        """
        paths, keys, strings, numbers, integers, bigints, flags = self._leaf_columns(cid)
        n = len(paths)
        if not n:
            return
        if self._leaf_ids is None or self._leaf_ids[0] != execution_id:
            self._leaf_ids = (execution_id, catalog.RowIds("value_leaves_v1", execution_id))
        facts = call or {}
        c = out.columns
        for name in CALL_FACTS:
            c[name] += [facts.get(name)] * n
        c["row_id"] += self._leaf_ids[1].indexed(n, call_id, role)
        c["execution_id"] += [execution_id] * n
        c["call_id"] += [call_id] * n
        c["cid"] += [cid.hex()] * n
        c["role"] += [role] * n
        c["path"] += paths
        c["key"] += keys
        c["string"] += strings
        c["number"] += numbers
        c["integer"] += integers
        c["bigint"] += bigints
        c["bool"] += flags

    def leaf_rows(
        self, execution_id: str, call_id: str, role: str, cid: bytes, call: Row | None = None
    ) -> list[Row]:
        """Leaf rows of one value as dicts (see :meth:`add_leaves`)."""
        rows = LeafRows()
        self.add_leaves(rows, execution_id, call_id, role, cid, call)
        return list(rows)


LEAF_COLUMNS = (
    *CALL_FACTS,
    "row_id",
    "execution_id",
    "call_id",
    "cid",
    "role",
    "path",
    "key",
    "string",
    "number",
    "integer",
    "bigint",
    "bool",
)


class LeafRows(Sequence[Row]):
    """value_leaves_v1 rows of one execution, held as columns.

    Leaves are most of an execution's rows: appending them column by column avoids a dict per
    leaf (and the garbage collector's work on them); :func:`activities.projection.batches.private_tables`
    takes the columns as they are. Indexing and iteration give the rows as dicts, in order.
    """

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in LEAF_COLUMNS}

    def __len__(self) -> int:
        return len(self.columns["row_id"])

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return {name: column[index] for name, column in self.columns.items()}

    def __iter__(self) -> Iterator[Row]:
        names = tuple(self.columns)
        for values in zip(*self.columns.values(), strict=True):
            yield dict(zip(names, values, strict=True))


def values_rows(resolved: dict[bytes, ResolvedValue]) -> list[Row]:
    """values_v1 entries for every value this execution resolved (the writer merges on ``cid``)."""
    return [
        {
            "cid": cid.hex(),
            "codec": v.codec,
            "size_bytes": len(v.body),
            "body": v.body,
            "locator": v.locator or None,
        }
        for cid, v in sorted(resolved.items())
    ]


def cid_ref_rows(root_id: str, process_euid: str, cids: Iterable[bytes]) -> list[Row]:
    """One reference per distinct CID (values and the function table) for erasure reference counts."""
    return [{"cid": c.hex(), "root_id": root_id, "process_euid": process_euid} for c in sorted(set(cids))]


def is_llm_function(kind_detail: str | None) -> bool:
    # The real table has no LLM marker (kind_detail names a sys-op); only the synthetic
    # profiler writes "llm" there. Per-call LLM-ness comes from SpanStart selection reasons.
    return (kind_detail or "").lower() == "llm"


def function_definition_rows(
    table: FunctionTable, program_hex: str, table_cid: bytes
) -> tuple[list[Row], list[Row]]:
    """Public function_definitions_v1 rows and their private part (source path and span)."""
    public: list[Row] = []
    private: list[Row] = []
    paths = {f.file_id: f.path for f in table.files}
    for f in table.functions:
        row_id = catalog.deterministic_row_id("function_definitions_v1", program_hex, f.function_id)
        public.append(
            {
                "row_id": row_id,
                "program_id": program_hex,
                "function_id": f.function_id,
                "function_name": f.fqn,
                "is_llm": is_llm_function(f.kind_detail),
                "table_cid": table_cid.hex(),
            }
        )
        span = f.source_span
        private.append(
            {
                "row_id": row_id,
                "program_id": program_hex,
                "source_path": paths.get(span.file_id, f.source_file) if span is not None else f.source_file,
                "source_span": f"{span.file_id}:{span.start}-{span.end}" if span is not None else None,
            }
        )
    return public, private


_ProgramRows = tuple[list[Row], list[Row], list[Row]]
_program_rows: OrderedDict[tuple[int, str, bytes], tuple[FunctionTable, _ProgramRows]] = OrderedDict()
PROGRAM_ROWS_ENTRIES = 64


def program_rows(table: FunctionTable, program_hex: str, table_cid: bytes) -> _ProgramRows:
    """:func:`function_definition_rows` and :func:`source_file_rows`, built once per table object.

    Every execution of an engine carries the same rows (the worker's function tables are one
    cached object per CID), so they are built once and shared: callers never mutate rows. The
    cache holds the table itself and answers only for that very object."""
    key = (id(table), program_hex, table_cid)
    hit = _program_rows.get(key)  # atomic under the GIL, as in _recall
    if hit is not None and hit[0] is table:
        rows = hit[1]
        return list(rows[0]), list(rows[1]), list(rows[2])
    public, private = function_definition_rows(table, program_hex, table_cid)
    built = (public, private, source_file_rows(table, program_hex))
    with _shared_lock:
        _program_rows[key] = (table, built)
        if len(_program_rows) > PROGRAM_ROWS_ENTRIES:
            _program_rows.popitem(last=False)
    return list(public), list(private), list(built[2])


def source_file_rows(table: FunctionTable, program_hex: str) -> list[Row]:
    return [
        {"program_id": program_hex, "file_id": f.file_id, "path": f.path, "text": None} for f in table.files
    ]


def throw_site_text(site: evidence.ThrowSite | None, table: FunctionTable | None) -> str | None:
    """``<path>:<line>:<start>-<end>`` of an error's throw site (private: it names a source path)."""
    if site is None:
        return None
    path = table.file_path(site.file_id) if table is not None else None
    where = path if path is not None else f"file#{site.file_id}"
    return f"{where}:{site.line}:{site.start_offset}-{site.end_offset}"
