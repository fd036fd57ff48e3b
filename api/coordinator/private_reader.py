"""Reads of the customer's Lance datasets for one query, every read at the query's bound versions.

Binding: :meth:`PrivateReader.bind` opens each dataset once at its latest committed version; the
projector commits the ``projected_executions`` ledger last, so an execution with a ledger row at
the bound ledger version has all of its private rows in the bound versions of the other datasets
(api/dataplane/lance_store.py). The ledger version is the snapshot's ``lance_version``; an execution
without a ledger row is *pending* for this query, whatever the other datasets hold.

Every read counts the Arrow bytes it returned (``private_bytes_read``, the budget's private bytes).
Values leave this module only to the query that asked; nothing here logs a value.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import lance
import pyarrow as pa
import pyarrow.compute as pc

from api.common.lru import LruCache
from api.coordinator.leaf_values import PARTS
from api.coordinator.planner import LeafPrune
from api.coordinator.root_set import RootSet, contains_any
from api.coordinator.value_cache import DiskValueCache
from api.coordinator.value_reader import ObjectSource, ValueReader
from api.dataplane.lance_rowids import slow_zone_map
from api.dataplane.lance_store import LEDGER, LanceStore, sql_in_list, sql_literal
from formats.object_keys import Scope

_IN_CHUNK = 2000
# The leaf parts a typed private column is built from (api/coordinator/leaf_values.py).
LEAF_COLUMNS = ["execution_id", "call_id", *PARTS]
EXACT_LEAF_COLUMNS = ("integer", "bigint")


class OutdatedLeafLayout(Exception):
    """The bound leaf dataset predates exact numbers: reading its numbers would round them."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"value_leaves_v1 lacks {', '.join(missing)}")
        self.missing = missing


FragmentKey = tuple[str, tuple[str, ...], tuple[int, int] | None, int]


# What a fragment holds, per (dataset uri, data files, deletion file, generation), least recently
# used forgotten first (at most 4,096 each): the big fragments written first are read by every
# query, the small ones compaction replaces stop being asked for.
#
# A fragment's rows never change: its data files are written once, and a delete gives it a new
# deletion file. So one fragment's answer holds for every version that holds it, and a query reads
# only the fragments committed since the last one it saw. Keyed by the whole version instead,
# every query re-read all 3.76 M ledger roots at 15 M calls (1-2 s), because the ledger gets a
# version at every committer cadence.
FRAGMENT_CACHE_ENTRIES = 4096


def _fragment_key(uri: str, fragment: lance.LanceFragment, generation: int) -> FragmentKey:
    meta = fragment.metadata
    deletion = meta.deletion_file
    return (
        uri,
        tuple(f.path for f in meta.files),
        None if deletion is None else (int(deletion.id), int(deletion.read_version)),
        generation,
    )


# A generation's roots per ledger fragment, indexed for vectorised membership over large candidate sets.
LEDGER_ROOTS: LruCache[FragmentKey, RootSet] = LruCache(FRAGMENT_CACHE_ENTRIES)
# Per leaf fragment: the start times it holds (min, max) if a range filter answered by the zone map
# is slow on it (lance_rowids), else ().
SLOW_ZONE_MAP: LruCache[FragmentKey, tuple[int, int] | tuple[()]] = LruCache(FRAGMENT_CACHE_ENTRIES)


def _slow_span(fragment: lance.LanceFragment) -> tuple[int, int] | tuple[()]:
    if not slow_zone_map(fragment):
        return ()
    # Read once per fragment (fragments are immutable): such fragments are few, one column.
    bounds = pc.min_max(fragment.to_table(columns=["started_at_ns"]).column("started_at_ns")).as_py()
    if bounds["min"] is None:
        return ()
    return int(bounds["min"]), int(bounds["max"])


@dataclass
class PrivateReader:
    scope: Scope
    generation: int
    datasets: dict[str, lance.LanceDataset | None]
    ledger_uri: str
    cache: DiskValueCache | None = None
    objects: ObjectSource | None = None
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Start-time spans of the bound leaf fragments on which the zone map is slow (_prune_sql).
    _slow_spans: list[tuple[int, int]] | None = field(default=None, repr=False)

    @classmethod
    def bind(
        cls,
        store: LanceStore,
        scope: Scope,
        generation: int,
        *,
        cache: DiskValueCache | None = None,
        objects: ObjectSource | None = None,
    ) -> PrivateReader:
        # The ledger first: anything it lists is already in the later-opened datasets.
        names = (LEDGER, "values_v1", "value_leaves_v1")
        opened = {name: store.open(scope, name) for name in names}
        return cls(scope, generation, opened, store.uri(scope, LEDGER), cache, objects)

    @property
    def lance_version(self) -> int | None:
        ds = self.datasets.get(LEDGER)
        return ds.version if ds is not None else None

    def versions(self) -> dict[str, int]:
        return {name: ds.version for name, ds in self.datasets.items() if ds is not None}

    def _count(self, table: pa.Table) -> pa.Table:
        self._add(table.nbytes)
        return table

    def _add(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    # --- ledger --------------------------------------------------------------------------------

    def indexed_executions(self, execution_ids: list[str]) -> set[str]:
        """The subset of ``execution_ids`` whose private rows are in the bound version."""
        ds = self.datasets.get(LEDGER)
        if ds is None or not execution_ids:
            return set()
        unique = sorted(set(execution_ids))
        found: set[str] = set()
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            table = self._count(
                ds.to_table(
                    columns=["root_id"],
                    filter=f"generation = {int(self.generation)} AND root_id IN ({sql_in_list(chunk)})",
                )
            )
            found.update(table["root_id"].to_pylist())
        return found

    def indexed_mask(self, execution_ids: pa.ChunkedArray | pa.Array) -> pa.Array:
        """Per row: whether its execution's private rows are in the bound version (vectorised)."""
        ids = execution_ids.combine_chunks() if isinstance(execution_ids, pa.ChunkedArray) else execution_ids
        ds = self.datasets.get(LEDGER)
        if ds is None or len(ids) == 0:
            return pa.array([False] * len(ids), pa.bool_())
        unique = pc.unique(ids)
        keys = [(f, _fragment_key(self.ledger_uri, f, self.generation)) for f in ds.get_fragments()]
        cached = [(f, key, LEDGER_ROOTS.get(key)) for f, key in keys]
        if len(unique) > 20_000 or all(roots is not None for _, _, roots in cached):
            sets = []
            for fragment, key, roots in cached:
                if roots is None:
                    table = self._count(
                        fragment.to_table(columns=["root_id"], filter=f"generation = {int(self.generation)}")
                    )
                    roots = RootSet(table["root_id"].combine_chunks())
                    LEDGER_ROOTS.put(key, roots)
                sets.append(roots)
            # Not is_in over millions of roots (3.8 M at 15 M calls): it hashes them on every
            # query, 0.24 s at 100 k candidates. RootSet searches sorted digests (root_set.py).
            return contains_any(sets, ids)
        found = self.indexed_executions(unique.to_pylist())
        return pc.fill_null(pc.is_in(ids, value_set=pa.array(sorted(found), pa.string())), False)

    # --- leaves --------------------------------------------------------------------------------

    def calls_with_key(self, role: str, key: str) -> pa.Table:
        """(execution_id, call_id) of leaves whose combined ``path=value`` key equals ``key``."""
        ds = self.datasets.get("value_leaves_v1")
        if ds is None:
            return pa.table({"execution_id": pa.array([], pa.string()), "call_id": pa.array([], pa.string())})
        return self._count(
            ds.to_table(
                columns=["execution_id", "call_id"],
                filter=f"key = {sql_literal(key)} AND role = {sql_literal(role)}",
            )
        )

    def _leaf_dataset(self) -> lance.LanceDataset | None:
        """The bound leaf dataset, refused when written before the exact integer columns.

        Its ``number`` column rounds integers beyond 2**53 and cannot tell ``3`` from ``3.0``: a
        leaf read from it would be silently inexact, so the query fails and names the remedy.
        """
        ds = self.datasets.get("value_leaves_v1")
        if ds is not None:
            missing = [c for c in EXACT_LEAF_COLUMNS if c not in ds.schema.names]
            if missing:
                raise OutdatedLeafLayout(missing)
        return ds

    @property
    def leaves_carry_call_facts(self) -> bool:
        """Whether the bound leaf dataset has the public call copies a pruned scan filters on."""
        ds = self.datasets.get("value_leaves_v1")
        return ds is not None and "function_name" in ds.schema.names

    def _prune_sql(self, ds: lance.LanceDataset, prune: LeafPrune) -> str:
        """The prune filter for the bound leaves: its window through the zone map, unless the
        window reaches a fragment whose row ids make the zone map slow
        (api/dataplane/lance_rowids.py). Then the window is filtered as rows are read, after the
        role, path and function bitmaps: about 3x slower than the zone map on clean fragments,
        80x faster than it on such a fragment. A window that misses those fragments' start times
        selects none of their zones, so it keeps the zone map."""
        lo, hi = prune.window()
        if lo is None and hi is None:
            return prune.sql()
        if self._slow_spans is None:  # once per bound version: a query may scan several paths
            spans = []
            for fragment in ds.get_fragments():
                key = _fragment_key(ds.uri, fragment, 0)
                span = SLOW_ZONE_MAP.get(key)
                if span is None:
                    span = _slow_span(fragment)
                    SLOW_ZONE_MAP.put(key, span)
                if span:
                    spans.append(span)
            self._slow_spans = spans
        reaches = any((hi is None or a <= hi) and (lo is None or lo <= b) for a, b in self._slow_spans)
        return prune.sql(zone_map=not reaches)

    def pruned_leaves(self, role: str, path_text: str, prune: LeafPrune) -> pa.Table:
        """Leaf rows at ``path_text`` of ``role`` for every call the public-copy filter ``prune`` admits.

        One indexed scan (role, path, function, window) instead of candidate id lists: the caller
        joins the result with its candidates, which still decide which calls count.
        """
        ds = self._leaf_dataset()
        if ds is None or "function_name" not in ds.schema.names:
            return _empty_leaves()
        table = self._count(
            ds.to_table(
                columns=LEAF_COLUMNS,
                filter=(
                    f"role = {sql_literal(role)} AND path = {sql_literal(path_text)}"
                    f" AND {self._prune_sql(ds, prune)}"
                ),
            )
        )
        return table.cast(pa.schema(list(_LEAF_TYPES.items())))

    def calls_with_substring(
        self,
        role: str,
        needle: str,
        *,
        prune: LeafPrune | None = None,
        execution_ids: list[str] | None = None,
    ) -> pa.Table:
        """(execution_id, call_id) of calls with a string leaf of ``role`` containing ``needle``.

        Only string leaves are searched (the n-gram indexed ``string`` column), so key names never
        match. Narrowed by the public-copy filter ``prune`` or else by ``execution_ids``.
        """
        ds = self.datasets.get("value_leaves_v1")
        empty = pa.table({"execution_id": pa.array([], pa.string()), "call_id": pa.array([], pa.string())})
        if ds is None:
            return empty
        base = f"role = {sql_literal(role)} AND contains(`string`, {sql_literal(needle)})"
        if prune is not None and "function_name" in ds.schema.names:
            return self._count(
                ds.to_table(
                    columns=["execution_id", "call_id"], filter=f"{base} AND {self._prune_sql(ds, prune)}"
                )
            )
        unique = sorted(set(execution_ids or ()))
        parts = [empty]
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            parts.append(
                self._count(
                    ds.to_table(
                        columns=["execution_id", "call_id"],
                        filter=f"execution_id IN ({sql_in_list(chunk)}) AND {base}",
                    )
                )
            )
        return pa.concat_tables(parts, promote_options="permissive")

    def leaves(self, role: str, path_text: str, execution_ids: list[str]) -> pa.Table:
        """Leaf rows at ``path_text`` of ``role`` for the calls of these executions."""
        ds = self._leaf_dataset()
        if ds is None or not execution_ids:
            return _empty_leaves()
        parts = []
        unique = sorted(set(execution_ids))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            parts.append(
                self._count(
                    ds.to_table(
                        columns=LEAF_COLUMNS,
                        filter=(
                            f"execution_id IN ({sql_in_list(chunk)}) AND role = {sql_literal(role)}"
                            f" AND path = {sql_literal(path_text)}"
                        ),
                    )
                )
            )
        return pa.concat_tables(parts).cast(pa.schema(list(_LEAF_TYPES.items())))

    # --- whole values --------------------------------------------------------------------------

    def value_texts(self, cids: Iterable[str]) -> dict[str, str | None]:
        """CID -> the value's JSON rendering, read by CID (cache, values_v1, cas/values/)."""
        reader = ValueReader(
            self.scope,
            self.datasets.get("values_v1"),
            cache=self.cache,
            objects=self.objects,
            count=self._add,
        )
        return reader.json_texts(cids)


_LEAF_TYPES: dict[str, pa.DataType] = {"execution_id": pa.string(), "call_id": pa.string(), **PARTS}


def _empty_leaves() -> pa.Table:
    return pa.table({c: pa.array([], t) for c, t in _LEAF_TYPES.items()})


def pair_keys(table: pa.Table) -> pa.Array:
    """One string per (execution_id, call_id), for set membership across tables."""
    return pc.binary_join_element_wise(table["execution_id"], table["call_id"], "\x1f")
