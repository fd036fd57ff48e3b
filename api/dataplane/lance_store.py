"""Lance datasets of one deployment's scopes: keyed writes, readers of the newest version.

Every dataset lives at ``derived/v1/<scope>/<dataset>.lance`` in the evidence bucket
(:func:`formats.object_keys.lance_dataset_uri`), or under a local directory when the store is
built with ``root`` (tests of pure I/O, benchmarks without S3).

Rules from PLATFORM.md section 3, which this module is the one place to follow:

* writes are keyed on deterministic ids, and each batch is de-duplicated on its key first.
  Rows whose keys are new are appended after a probe of the keys through an index
  (:meth:`LanceStore._append_new_keys`: a merge_insert would join them against every key in the
  dataset); two processes appending the same new key at once is detected by the later one,
  which removes its copies before returning. Rows whose keys exist go through ``merge_insert``;
* key columns carry Lance's unenforced-primary-key metadata, without which two concurrent
  merge_inserts of the same *new* key both commit (a duplicate); and a merge never joins through
  a scalar index on the key (``use_index(False)``), whose path loses that same check;
* a commit conflict is retried by Lance against the newest version (``conflict_retries``),
  which rebases the transaction without rewriting the written fragments; when every retry lost,
  an append commits the same fragments again after a pause, and a merge re-opens the newest
  version and tries again (``outer_retries``);
* datasets are re-opened per operation, so a reader always sees the newest committed version,
  found by opening the version numbers after the newest one seen, not by listing ``_versions/``
  (:meth:`LanceStore.open`);
* datasets are created with stable row ids, so positions survive compaction (Query floors 3).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, Literal

import lance
import pyarrow as pa
import pyarrow.compute as pc
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from api.common.lru import LruCache
from api.dataplane.aws import ObjectStoreAccess
from api.dataplane.index_lease import DEFAULT_LEASE_S, TICK_WAIT_S, held_by_another, index_lease
from api.dataplane.index_tiers import entries_to_merge
from formats import catalog
from formats.deployment_settings import reveal
from formats.lance_schemas import LEDGER, LEDGER_SCHEMA, private_schema
from formats.object_keys import Scope, lance_dataset_key, lance_dataset_uri

log = logging.getLogger("baml_studio.lance_store")


Merge = Literal["upsert", "insert_only"]
LOOKUP_CHUNK = 8192  # CIDs per IN filter (about 0.6 MB of filter text)
VALUES_HANDLE_TTL_S = 1.0
LATEST_PROBES = 8  # newer versions LanceStore.open tries one by one before it lists _versions/
# How long a write may start from the version this store's own last commit of a dataset left,
# instead of looking for the newest version first (``LanceStore._write_base``).
WRITE_BASE_TTL_S = 5.0
WRITE_BASES_HELD = 64  # past this many datasets' handles, expired ones are dropped as new ones come
# Datasets whose program rows are remembered as held (``LanceStore._holds_repeats``), least
# recently merged dropped first: two per scope, a few KiB each.
REPEATS_HELD = 1024
MAINTENANCE_ATTEMPTS = 4  # per step of index_and_compact that can lose a commit race
# The shared session's caches (per store, so per process) unless told otherwise: the coordinator's,
# whose queries read whole datasets. The worker sets its own, smaller (ProjectionSettings.lance_*).
INDEX_CACHE_BYTES = 512 << 20
METADATA_CACHE_BYTES = 256 << 20
ValueRow = tuple[int, bytes, str | None]  # values_v1: (codec, body, locator)


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """How one dataset is keyed and merged, and which indexes the index job builds."""

    name: str
    keys: tuple[str, ...]
    merge: Merge
    btree: tuple[str, ...] = ()
    bitmap: tuple[str, ...] = ()
    ngram: tuple[str, ...] = ()
    # Inexact min/max per chunk of rows: prunes a range filter to the chunks it can match, which
    # pays only when the column follows the storage order (a leaf's start time does: rows arrive,
    # and bulk loads are written, in time order). Intersected with the bitmap indexes.
    zonemap: tuple[str, ...] = ()
    # Rows that arrive again and again unchanged (a program's, with each of its executions): a
    # merge first checks whether it would change anything, and commits only if so.
    repeats: bool = False
    # An indexed column every key is derived from (equal on every row of a key): a merge probes
    # it for the keys that exist and appends the rows whose keys are new (``LanceStore.merge``).
    probe: str | None = None

    @property
    def lookup(self) -> tuple[str, ...]:
        """Columns the write path looks rows up by: an insert-only dataset's indexed keys
        (values_v1 is read by CID for every meta object, cid_refs_v1 by an erasure) and the merge's
        probe column. The committer keeps these indexes current at its cadence, so a probe reads
        at most its last few unindexed fragments; every other index serves queries only and is
        left to IndexAndCompact. merge_insert does not use them (``LanceStore.merge``: ``use_index``)."""
        keys = tuple(c for c in self.keys if c in self.btree) if self.merge == "insert_only" else ()
        return keys + ((self.probe,) if self.probe is not None and self.probe not in keys else ())

    @property
    def query_indexed(self) -> tuple[str, ...]:
        """Columns of the BTREE, bitmap and zone-map indexes that serve queries only: created by the
        IndexAndCompact tick, then folded by the committer whenever enough new rows wait for them
        (``LanceCommitter``: ``query_fold_rows``; the n-gram index, far costlier to fold, waits for
        ``ngram_fold_rows``)."""
        return tuple(
            c for c in dict.fromkeys((*self.btree, *self.bitmap, *self.zonemap)) if c not in self.lookup
        )


# Lance datasets the projector writes, in commit order: the ledger is last, so a ledger row
# means every other dataset already holds the execution's rows.
#
# No upsert dataset indexes its whole key: pylance 14's merge_insert through a BTREE on the key
# refuses upserts ("Primary key column ... must not be nullable"), so merges never join through an
# index (``LanceStore.merge``: ``use_index``) and such an index would only cost folds. A tick drops
# one built by older code (tests/projection_io/test_index_maintenance.py). Insert-only datasets
# keep theirs (values_v1 is looked up by CID through it).
DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("values_v1", ("cid",), "insert_only", btree=("cid",), probe="cid"),
        DatasetSpec(
            "value_leaves_v1",
            ("row_id",),
            "upsert",
            btree=("execution_id", "call_id", "key"),
            # function_name: every private class prunes by function; without it Lance reads the
            # function of every leaf the role and window admit (Q10 with a 2-character needle,
            # which the n-gram index cannot prune: 1.4 s -> 0.5 s at 15 M calls).
            bitmap=("role", "path", "function_name"),
            ngram=("string",),
            zonemap=("started_at_ns",),
            probe="execution_id",
        ),
        DatasetSpec(
            "calls_v1", ("row_id",), "upsert", btree=("execution_id", "call_id"), probe="execution_id"
        ),
        DatasetSpec("errors_v1", ("row_id",), "upsert", btree=("execution_id",), probe="execution_id"),
        DatasetSpec("function_definitions_v1", ("row_id",), "upsert", bitmap=("program_id",), repeats=True),
        DatasetSpec(
            "source_files_v1", ("program_id", "file_id"), "upsert", bitmap=("program_id",), repeats=True
        ),
        DatasetSpec(
            "cid_refs_v1", ("cid", "root_id"), "insert_only", btree=("cid", "root_id"), probe="root_id"
        ),
        DatasetSpec(
            LEDGER, ("row_id",), "upsert", btree=("root_id",), bitmap=("generation",), probe="root_id"
        ),
    )
}


class UnknownDataset(KeyError):
    """A dataset name outside :data:`DATASETS`."""


# Lance detects two concurrent merge_inserts adding the same new key only when the key columns
# are declared as the (unenforced) primary key; without it both inserts commit (measured here
# with pylance 14: 6 writers of overlapping new keys left 180 rows for 80 keys; with it, 80).
PRIMARY_KEY_META = {b"lance-schema:unenforced-primary-key": b"true"}


def dataset_schema(name: str) -> pa.Schema:
    """The dataset's Arrow schema, its key columns marked as Lance's unenforced primary key."""
    if name not in DATASETS:
        raise UnknownDataset(name)
    base = LEDGER_SCHEMA if name == LEDGER else private_schema(name)
    keys = DATASETS[name].keys
    fields = [f.with_nullable(False).with_metadata(PRIMARY_KEY_META) if f.name in keys else f for f in base]
    return pa.schema(fields, metadata=base.metadata)


def create_missing_indexes(ds: lance.LanceDataset, dataset: str, only: tuple[str, ...] | None = None) -> int:
    """Create the scalar indexes ``DATASETS`` names for ``dataset`` (on the columns in ``only``,
    when given) that ``ds`` lacks; how many.

    An index that exists is never rebuilt (``optimize_indices`` folds new rows into it); one of
    another kind on the column (the spec changed) is replaced.
    """
    spec = DATASETS[dataset]
    # column -> index type ("btree", "bitmap", "ngram") of the indexes the dataset has.
    indexed = {tuple(i["fields"]): str(i["type"]).lower() for i in ds.list_indices()}
    if spec.merge == "upsert":
        # An index on a key column that the spec does not name (older code built a BTREE on each
        # upsert dataset's row_id) serves no query and costs a fold per tick: dropped. One the spec
        # names (source_files_v1's program_id, half its key) stays: dropping every index touching a
        # key rebuilt that one at every tick (the hour's soak of 2026-12-05, afternoon).
        wanted = {*spec.btree, *spec.bitmap, *spec.ngram, *spec.zonemap}
        for index in ds.list_indices():
            fields = set(index["fields"])
            if fields & set(spec.keys) and not fields <= wanted:
                ds.drop_index(index["name"])
                indexed.pop(tuple(index["fields"]), None)
    built = 0
    kinds_columns = (
        ("BTREE", spec.btree),
        ("BITMAP", spec.bitmap),
        ("NGRAM", spec.ngram),
        ("ZONEMAP", spec.zonemap),
    )
    for kinds, columns in kinds_columns:
        for column in columns:
            if (only is not None and column not in only) or column not in ds.schema.names:
                continue  # a dataset written before the column existed has nothing to index
            have = indexed.get((column,))
            if have == kinds.lower():
                continue
            ds.create_scalar_index(column, index_type=kinds, replace=have is not None)  # type: ignore[arg-type]
            built += 1
    return built


@dataclass(frozen=True)
class Fold:
    """One index fold a dataset is due: the index, its column, and how many of its newest entries
    the new rows merge with (0: a delta entry of their own)."""

    index: str
    column: str
    merge: int


def due_folds(
    ds: lance.LanceDataset,
    min_rows: Mapping[str, int] | None = None,
    *,
    only: Collection[str] | None = None,
) -> list[Fold]:
    """The folds :func:`fold_new_rows` would run on ``ds`` now, by index name. Entry sizes come from
    the manifest (fragment row counts): no index file is read to decide."""
    fragment_rows = {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}
    entries: dict[str, list[tuple[int, list[int]]]] = {}  # index -> (version, fragments) per entry
    threshold: dict[str, int] = {}  # index -> new rows it waits for
    column: dict[str, str] = {}
    for index in ds.list_indices():
        fields = index["fields"]
        if only is not None and index["name"] not in only:
            continue
        if min_rows is None or (len(fields) == 1 and fields[0] in min_rows):
            fragments = [int(f) for f in index["fragment_ids"]]
            name = str(index["name"])
            entries.setdefault(name, []).append((int(index["version"]), fragments))
            threshold[name] = 1 if min_rows is None else max(min_rows[fields[0]], 1)
            column[name] = str(fields[0])
    due: list[Fold] = []
    for name, found in sorted(entries.items()):
        found.sort()  # oldest first
        covered = {f for _, fragments in found for f in fragments}
        new_rows = sum(n for f, n in fragment_rows.items() if f not in covered)
        if new_rows < threshold[name]:
            continue
        sizes = [sum(fragment_rows.get(f, 0) for f in fragments) for _, fragments in found]
        due.append(Fold(name, column[name], entries_to_merge(sizes, new_rows)))
    return due


def fold_new_rows(
    ds: lance.LanceDataset,
    dataset: str,
    min_rows: Mapping[str, int] | None = None,
    *,
    only: Collection[str] | None = None,
    due: list[Fold] | None = None,
) -> int:
    """Fold the rows added since the last fold into the dataset's existing indexes, the way
    :mod:`api.dataplane.index_tiers` says: a delta entry, or a merge with the newest entries that
    are small beside what is folded. With ``min_rows``, only the indexes on its columns, each once
    at least that many new rows wait for it (fewer are left for a later fold); with ``only``, only
    the indexes of those names; with ``due``, those folds (:func:`due_folds`). Returns the number
    of indexes folded.

    Merging new rows into one entry rewrites all of it: an n-gram index's postings (measured with
    pylance 14 on moto: 74 s of CPU for 200 new rows at 200,000 rows, against 3-5 s for a delta,
    long enough that a worker's compaction committed first and the fold lost the race), a BTREE
    of 188 M value leaves on every tick.
    """
    folds = due if due is not None else due_folds(ds, min_rows, only=only)
    for fold in folds:
        ds.optimize.optimize_indices(index_names=[fold.index], num_indices_to_merge=fold.merge)
    return len(folds)


def ledger_row_id(generation: int, root_id: str) -> str:
    return catalog.deterministic_row_id(LEDGER, root_id, generation)


def dedupe(table: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """Keep the last row of each key (merge_insert inserts duplicate new keys twice)."""
    if table.num_rows < 2:
        return table
    indexed = table.append_column("__pos", pa.array(range(table.num_rows), pa.int64()))
    last = indexed.group_by(list(keys), use_threads=False).aggregate([("__pos", "max")])
    if last.num_rows == table.num_rows:
        return table
    keep = pc.sort_indices(last["__pos_max"])
    return table.take(pc.take(last["__pos_max"], keep))


def sql_literal(value: str | int) -> str:
    """A string or integer as a literal of a Lance (DataFusion) filter."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


def sql_in_list(values: Iterable[str | int]) -> str:
    """The inside of ``<column> IN (...)`` in a Lance filter."""
    return ", ".join(sql_literal(v) for v in values)


Fragments = list[lance.LanceFragment] | None  # the fragments a read scans (None: all of them)


def _rows_in(
    ds: lance.LanceDataset,
    column: str,
    values: list[Any],
    columns: tuple[str, ...],
    fragments: Fragments,
    *,
    with_row_id: bool = False,
) -> pa.Table:
    """``columns`` (and ``_rowid``) of the rows whose ``column`` is one of ``values``, among
    ``fragments``. Each scan reads every unindexed fragment given, so as few scans as possible
    (measured on moto, 900 CIDs over 28 fragments: 540 ms in chunks of 500, 370 ms in one)."""
    if fragments == [] or not values:
        fields = [ds.schema.field(c) for c in columns]
        if with_row_id:
            fields.append(pa.field("_rowid", pa.uint64()))
        return pa.schema(fields).empty_table()
    parts = []
    for start in range(0, len(values), LOOKUP_CHUNK):
        listed = sql_in_list(values[start : start + LOOKUP_CHUNK])
        where = f"{column} IN ({listed})"
        scan = ds.scanner(columns=list(columns), filter=where, with_row_id=with_row_id, fragments=fragments)
        parts.append(scan.to_table())
    return pa.concat_tables(parts)


def _row_digest(row: dict[str, Any]) -> bytes:
    """A digest over every column's value of a row (as the merge would write it)."""
    return hashlib.sha256(repr(tuple(row.values())).encode()).digest()


def _row_digests(table: pa.Table) -> frozenset[bytes]:
    """One digest per row of ``table``."""
    return frozenset(_row_digest(row) for row in table.to_pylist())


def _data_files(metadata: lance.fragment.FragmentMetadata) -> tuple[str, ...]:
    """The data file names of a fragment: unique, and never reused by another fragment."""
    return tuple(f.path for f in metadata.data_files())


def _key_column(table: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """One comparable value per row for its (possibly composite) key."""
    if len(keys) == 1:
        return table[keys[0]].combine_chunks()
    return pc.binary_join_element_wise(
        *(pc.cast(table[k], pa.string()) for k in keys), "\x1f"
    ).combine_chunks()


def _changing(rows: pa.Table, found: pa.Table, merge: Merge) -> pa.Table:
    """Those of ``rows`` (whose keys ``found`` holds) that a merge would write: none for an
    insert-only dataset, which never rewrites a key; for an upsert, the rows that differ from the
    held copy in some column (``found`` carries every column of ``rows``). The rest are held as
    they are, so merging them would change nothing (:func:`_changed`)."""
    if merge == "insert_only" or not rows.num_rows:
        return rows.slice(0, 0)
    held = _row_digests(found.select(rows.column_names))
    return rows.filter(pa.array([_row_digest(r) not in held for r in rows.to_pylist()], pa.bool_()))


def _changed(schema: pa.Schema, keys: tuple[str, ...]) -> str:
    """merge_insert's update condition: a matched row is rewritten only when a column differs.

    Every worker upserts the same program's function definitions and source files; rewriting an
    identical row deletes it from its fragment, and two processes deleting from one fragment
    conflict in a way Lance resolves only by re-running the whole merge (its new fragments
    written again). Unchanged rows touch no fragment, so those commits rebase instead."""
    return " OR ".join(
        f"(source.`{f.name}` IS DISTINCT FROM target.`{f.name}`)" for f in schema if f.name not in keys
    )


def _rows_touched(stats: dict[str, Any]) -> int:
    """Rows a merge inserted, updated or deleted, from its statistics."""
    return sum(int(stats.get(k, 0)) for k in ("num_inserted_rows", "num_updated_rows", "num_deleted_rows"))


def is_retryable_conflict(exc: BaseException) -> bool:
    """A commit that lost to another writer: Lance's ``CommitConflictError`` ("Commit conflict for
    version N: Failed to commit the transaction after N retries") or its contention timeout ("Too
    many concurrent writers. Attempted N times, but failed on retry_timeout ...")."""
    text = str(exc).lower()
    return isinstance(exc, OSError) and any(w in text for w in ("retry", "conflict", "concurrent writers"))


def _on_conflict(attempts: int, *, multiplier: float, max_s: float, what: str | None = None) -> Retrying:
    """Runs a commit again, after a random pause that grows, while it loses to another writer
    (:func:`is_retryable_conflict`), at most ``attempts`` times in all; the last error is raised.
    With ``what``, each retry is logged as "lance <what> ... (attempt N)"."""
    return Retrying(
        retry=retry_if_exception(is_retryable_conflict),
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=multiplier, max=max_s),
        before_sleep=(
            (lambda state: log.info("lance %s (attempt %d)", what, state.attempt_number)) if what else None
        ),
        reraise=True,
    )


def _is_missing(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "not found" in text or "does not exist" in text or "no such" in text


@dataclass(frozen=True, slots=True)
class MergeResult:
    dataset: str
    inserted: int
    updated: int
    version: int
    fragments: int = 0  # the committed version's fragment count (from its manifest: no I/O)
    # Callers whose rows this commit held (the committer merges several callers' rows at once):
    # above 1, ``inserted`` and ``updated`` count all of them, not one caller's.
    shared_by: int = 1

    @classmethod
    def unchanged(cls, dataset: str, ds: lance.LanceDataset) -> MergeResult:
        """A merge that committed nothing: the dataset stays at ``ds``'s version."""
        return cls(dataset, 0, 0, ds.version, len(ds.get_fragments()))


class LanceStore:
    """Datasets of every scope under one bucket (or local root). Thread-safe; holds no open datasets
    (only the newest version number it saw of each, where :meth:`open` starts)."""

    def __init__(
        self,
        *,
        bucket: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        root: Path | None = None,
        conflict_retries: int = 20,
        outer_retries: int = 5,
        write_base_ttl_s: float = WRITE_BASE_TTL_S,
        index_cache_bytes: int = INDEX_CACHE_BYTES,
        metadata_cache_bytes: int = METADATA_CACHE_BYTES,
    ) -> None:
        if (bucket is None) == (root is None):
            raise ValueError("give exactly one of bucket (S3) or root (local directory)")
        self.bucket = bucket
        self.root = root
        self.storage_options = dict(storage_options or {})
        self.conflict_retries = conflict_retries
        self.outer_retries = outer_retries
        self._create_lock = threading.Lock()
        self._values_handles: dict[Scope, tuple[float, lance.LanceDataset]] = {}
        # Newest version seen per dataset URI (opened or committed): where ``open`` starts looking.
        self._seen: dict[str, int] = {}
        self._seen_lock = threading.Lock()
        # Per dataset URI, the handle this store's last commit left and when it was the newest
        # (monotonic clock): where the next write starts (_write_base). Taken out while a write
        # uses it, so no two writes share one handle (a merge moves its handle's version). Under
        # _seen_lock, beside the versions seen that decide whether a held handle is still newest.
        self.write_base_ttl_s = write_base_ttl_s
        self._write_bases: dict[str, tuple[lance.LanceDataset, float]] = {}
        # Per dataset URI, the probe column's values of each fragment this store appended
        # (:meth:`_append_new_keys`), by fragment id (never reused in a dataset), while the fragment
        # is in the newest version this store committed: a probe, or a lookup by CID, skips the
        # ones that hold none of its values (:meth:`_may_hold`). Under _seen_lock.
        self._appended: dict[str, dict[int, frozenset[Any]]] = {}
        # Per dataset URI of repeated rows (``DatasetSpec.repeats``), a version and the digests of
        # rows it is known to hold unchanged: a merge of only such rows, into that version still
        # the newest, would change nothing and is skipped (:meth:`_holds_repeats`). Under _seen_lock.
        self._repeats_held: LruCache[str, tuple[int, frozenset[bytes]]] = LruCache(REPEATS_HELD)
        # One cache of index pages and file metadata for every dataset this store opens. Without
        # it each open (every lookup, every commit) read the BTREE pages and the data files'
        # footers from S3 again: in bench/soak.py most of moto's Lance requests were re-reads of
        # the same immutable index and data files. Index and data files never change once written
        # (a new version writes new files), so a cached page is never stale.
        # Bounded, least recently used first out: pages of index versions and fragments that newer
        # commits replaced are never read again and stay until the bound pushes them out, so a busy
        # worker's session fills to its bound (docs/projection-runtime.md, "Worker", "Memory").
        self.session = lance.Session(
            index_cache_size_bytes=index_cache_bytes, metadata_cache_size_bytes=metadata_cache_bytes
        )

    @classmethod
    def for_s3(
        cls,
        bucket: str,
        *,
        endpoint_url: str | None,
        region: str,
        access_key_id: str,
        secret_access_key: str,
        **tuning: Any,
    ) -> LanceStore:
        options = {
            "aws_region": region,
            "aws_access_key_id": access_key_id,
            "aws_secret_access_key": secret_access_key,
        }
        if endpoint_url:
            options["aws_endpoint"] = endpoint_url
            if endpoint_url.startswith("http://"):
                options["allow_http"] = "true"
        return cls(bucket=bucket, storage_options=options, **tuning)

    @classmethod
    def in_bucket(cls, bucket: str, access: ObjectStoreAccess, **tuning: Any) -> LanceStore:
        """Datasets in ``bucket`` of the object store that settings (or a stack deployment) name;
        ``tuning``: the constructor's keyword arguments (cache sizes, the write base's age)."""
        return cls.for_s3(
            bucket,
            endpoint_url=access.s3_endpoint_url or None,
            region=access.aws_region,
            access_key_id=access.aws_access_key_id,
            secret_access_key=reveal(access.aws_secret_access_key),
            **tuning,
        )

    def uri(self, scope: Scope, dataset: str) -> str:
        if dataset not in DATASETS:
            raise UnknownDataset(dataset)
        if self.root is not None:
            return str(self.root / lance_dataset_key(scope, dataset))
        assert self.bucket is not None
        return lance_dataset_uri(self.bucket, scope, dataset)

    def _options(self) -> dict[str, str] | None:
        return self.storage_options or None

    # --- reading -----------------------------------------------------------------------------

    def newest(self, scope: Scope, dataset: str) -> lance.LanceDataset:
        """The newest committed version of a dataset known to exist (datasets are never removed)."""
        ds = self.open(scope, dataset)
        assert ds is not None, f"{dataset} was opened before and datasets are never removed"
        return ds

    def open(self, scope: Scope, dataset: str, version: int | None = None) -> lance.LanceDataset | None:
        """The newest committed version (or ``version``), or None when the dataset does not exist yet.

        The newest version is found from the newest one this store has seen, by opening the next
        version numbers until one is missing (Lance commits versions in order, each manifest
        created once): O(1) requests. Lance itself lists ``_versions/``, whose length is every
        version kept (``cleanup_old_versions`` keeps ten minutes of commits at the committer's
        cadence): on moto, 4 ms at 13 versions and 86 ms at 609, for every open of every merge,
        lookup and query (bench/soak.py: half of moto's CPU serialised those listings). A store
        that is far behind (more than ``LATEST_PROBES`` new versions) lists once instead.
        """
        uri = self.uri(scope, dataset)
        if version is not None:
            return self._open_version(uri, version)
        known = self._seen.get(uri)
        if known is not None:
            ds = self._probe_newest(uri, known)
            if ds is not None:
                return ds
        ds = self._open_version(uri, None)
        if ds is not None:
            self._saw(uri, ds.version)
        return ds

    def _open_version(self, uri: str, version: int | None) -> lance.LanceDataset | None:
        try:
            return lance.dataset(uri, version=version, storage_options=self._options(), session=self.session)
        except (ValueError, OSError, FileNotFoundError) as exc:
            if _is_missing(exc):
                return None
            raise

    def _probe_newest(self, uri: str, known: int) -> lance.LanceDataset | None:
        """The newest version from ``known`` on, or None when a listing is the cheaper way."""
        newest, at = None, known
        for _ in range(LATEST_PROBES + 1):  # up to LATEST_PROBES new ones, and the missing next
            ahead = self._open_version(uri, at + 1)
            if ahead is None:
                break
            newest, at = ahead, at + 1
        else:
            return None
        if newest is None:
            newest = self._open_version(uri, known)  # still the newest (its manifest is cached)
        if newest is not None:
            self._saw(uri, at)
        return newest

    def _saw(self, uri: str, version: int) -> None:
        with self._seen_lock:
            if version > self._seen.get(uri, 0):
                self._seen[uri] = version

    def _may_hold(self, uri: str, ds: lance.LanceDataset, values: Iterable[Any]) -> Fragments:
        """The fragments of ``ds`` that may hold one of ``values`` in the dataset's probe column.

        A key probe or a lookup by CID reads every fragment the lookup index does not cover yet:
        on moto, 7 GETs and about 10 ms of CPU for a probe over 8 such fragments, against 2 ms with
        every fragment indexed. Most of them are this store's own appends, whose probe values it
        wrote: those that hold none of ``values`` are left out (rows of a data file are never
        added, only deleted, so a fragment that held none of them still holds none). Every other
        fragment (another process's, a merge's or a compaction's) is read as before. None: all."""
        with self._seen_lock:
            known = self._appended.get(uri)
        if not known:
            return None
        wanted = set(values)
        fragments = ds.get_fragments()
        kept = [f for f in fragments if not known.get(f.fragment_id, wanted).isdisjoint(wanted)]
        return kept if len(kept) < len(fragments) else None

    def _find(
        self,
        uri: str,
        ds: lance.LanceDataset,
        column: str,
        values: list[Any],
        columns: tuple[str, ...],
        *,
        with_row_id: bool = False,
    ) -> pa.Table:
        """:func:`_rows_in` over the fragments of ``ds`` that may hold one of ``values``."""
        fragments = self._may_hold(uri, ds, values)
        return _rows_in(ds, column, values, columns, fragments, with_row_id=with_row_id)

    def _holds_repeats(self, uri: str, version: int, rows: frozenset[bytes]) -> bool:
        """Whether ``version`` is known to hold every one of these rows (by digest) unchanged."""
        with self._seen_lock:
            held = self._repeats_held.get(uri)
        return held is not None and held[0] == version and rows <= held[1]

    def _held_repeats(self, uri: str, version: int, rows: frozenset[bytes]) -> None:
        """``version`` holds these rows unchanged: a merge found nothing to change, or committed them."""
        with self._seen_lock:
            held = self._repeats_held.get(uri)
            if held is not None and held[0] == version:
                rows |= held[1]
            self._repeats_held.put(uri, (version, rows))

    def _appended_here(
        self,
        uri: str,
        base: lance.LanceDataset,
        written: list[lance.fragment.FragmentMetadata],
        values: list[Any],
        committed: lance.LanceDataset,
    ) -> None:
        """Remember the probe values of the fragments an append from ``base`` wrote (found by their
        data files among the fragments ``committed`` holds beyond ``base``'s), and forget those of
        fragments ``committed`` no longer holds (compacted away)."""
        top = max((f.fragment_id for f in base.get_fragments()), default=-1)
        files = {_data_files(f) for f in written}
        fragments = committed.get_fragments()
        held = frozenset(values)
        mine = {f.fragment_id for f in fragments if f.fragment_id > top and _data_files(f.metadata) in files}
        live = {f.fragment_id for f in fragments}
        with self._seen_lock:
            known = {fid: v for fid, v in self._appended.get(uri, {}).items() if fid in live}
            known.update(dict.fromkeys(mine, held))
            self._appended[uri] = known

    def _write_base(
        self, scope: Scope, dataset: str, *, newest: bool = False
    ) -> tuple[lance.LanceDataset | None, float]:
        """The version a write starts from, and since when it is known to be the newest.

        The handle this store's last commit of the dataset left, while it is younger than
        ``write_base_ttl_s`` and no newer version was seen; else (or with ``newest``) the newest
        version (:meth:`open`).
        Looking for the newest costs an open of the next version, which is missing (a few HEADs:
        about 5 ms of CPU and 20 ms of wall time on moto), and an open of the known one: most of a
        small commit's cost besides the commit itself (bench/lance_merge.py ``--write-base``).

        A base that another process has committed past is safe to write from: Lance rebases an
        append over the commits in between, and a merge_insert that conflicts is retried against
        the newest version; a key another process appended meanwhile is found when the append
        probes again after its rebase (:meth:`_append_new_keys`). The TTL bounds how often that
        happens. Callers hand the handle back with :meth:`_keep`, committed or not."""
        uri = self.uri(scope, dataset)
        with self._seen_lock:
            held = self._write_bases.pop(uri, None)
            seen = self._seen.get(uri, 0)
        if held is not None and not newest:
            ds, as_of = held
            if time.monotonic() - as_of < self.write_base_ttl_s and ds.version >= seen:
                return ds, as_of
        as_of = time.monotonic()
        return self.open(scope, dataset), as_of

    def _keep(self, scope: Scope, dataset: str, ds: lance.LanceDataset, as_of: float | None = None) -> None:
        """Hold ``ds`` for the next write: just committed by this store (``as_of`` None: now), or a
        base from :meth:`_write_base` that a write left unchanged (its own ``as_of``)."""
        if self.write_base_ttl_s <= 0 or DATASETS[dataset].repeats:
            return  # a repeated rows' write always starts from the newest version
        uri = self.uri(scope, dataset)
        now = time.monotonic()
        with self._seen_lock:
            self._write_bases[uri] = (ds, now if as_of is None else as_of)
            if len(self._write_bases) > WRITE_BASES_HELD:
                # Scopes that stopped writing: their handles (and manifests) are let go.
                for held, (_, at) in list(self._write_bases.items()):
                    if now - at >= self.write_base_ttl_s:
                        del self._write_bases[held]

    def read(
        self, scope: Scope, dataset: str, *, columns: list[str] | None = None, filter: str | None = None
    ) -> pa.Table:
        ds = self.open(scope, dataset)
        if ds is None:
            return dataset_schema(dataset).empty_table().select(columns or dataset_schema(dataset).names)
        return ds.to_table(columns=columns, filter=filter)

    def count(self, scope: Scope, dataset: str, filter: str | None = None) -> int:
        ds = self.open(scope, dataset)
        return 0 if ds is None else int(ds.count_rows(filter=filter))

    def lookup_values(self, scope: Scope, cids_hex: list[str]) -> dict[str, ValueRow]:
        """values_v1 rows for these CIDs: cid -> (codec, body, locator).

        values_v1 is insert-only and content-addressed (a CID's row never changes), so a handle
        opened up to ``VALUES_HANDLE_TTL_S`` ago answers every CID it holds truthfully; only the
        CIDs it misses are asked again of the newest version. That saves opening the dataset (probing
        for a newer version, :meth:`open`) for each of a worker's small meta objects.
        """
        if not cids_hex:
            return {}
        cached = self._values_handles.get(scope)
        fresh = cached is None or time.monotonic() - cached[0] > VALUES_HANDLE_TTL_S
        ds = self._values_handle(scope) if fresh else cached[1]  # type: ignore[index]
        if ds is None:
            return {}
        uri = self.uri(scope, "values_v1")
        out = self._lookup(uri, ds, cids_hex)
        if len(out) < len(set(cids_hex)) and not fresh:
            newest = self._values_handle(scope)
            if newest is not None:
                out.update(self._lookup(uri, newest, [c for c in cids_hex if c not in out]))
        return out

    def _values_handle(self, scope: Scope) -> lance.LanceDataset | None:
        ds = self.open(scope, "values_v1")
        if ds is not None:
            self._values_handles[scope] = (time.monotonic(), ds)
        return ds

    def _lookup(self, uri: str, ds: lance.LanceDataset, cids_hex: list[str]) -> dict[str, ValueRow]:
        cids = [c for c in cids_hex if c.isalnum()]  # CIDs are 64 lowercase hex
        table = self._find(uri, ds, "cid", cids, ("cid", "codec", "body", "locator"))
        return {
            cid: (int(codec), bytes(body), locator)
            for cid, codec, body, locator in zip(
                table["cid"].to_pylist(),
                table["codec"].to_pylist(),
                table["body"].to_pylist(),
                table["locator"].to_pylist(),
                strict=True,
            )
        }

    def ledger_roots(self, scope: Scope, generation: int) -> set[str]:
        ds = self.open(scope, LEDGER)
        if ds is None:
            return set()
        table = ds.to_table(columns=["root_id"], filter=f"generation = {int(generation)}")
        return set(table["root_id"].to_pylist())

    # --- writing -----------------------------------------------------------------------------

    def _create(self, scope: Scope, dataset: str, schema: pa.Schema) -> None:
        # Creating is the one non-merge write: an empty dataset, so a racing creator loses
        # nothing; whoever loses the race simply opens the winner's dataset. Not write_dataset
        # (mode="create"): its existence check comes before its commit, and a commit that finds
        # another process's version 1 is retried as an Overwrite at the next version (seen with
        # three workers: "Overwrite at version 2"), which empties whatever a merge committed in
        # between. One commit attempt, no retry: losing the race raises instead.
        with self._create_lock:
            if self.open(scope, dataset) is not None:
                return
            try:
                lance.LanceDataset.commit(
                    self.uri(scope, dataset),
                    lance.LanceOperation.Overwrite(schema, []),
                    storage_options=self._options(),
                    enable_v2_manifest_paths=True,
                    enable_stable_row_ids=True,
                    max_retries=0,
                )
            except (OSError, ValueError) as exc:
                if self.open(scope, dataset) is None:
                    raise
                log.debug("dataset %s created concurrently (%s)", dataset, type(exc).__name__)

    def merge(self, scope: Scope, dataset: str, table: pa.Table) -> MergeResult:
        """Merge rows keyed by the dataset's keys; a re-run of the same rows inserts nothing."""
        spec = DATASETS.get(dataset)
        if spec is None:
            raise UnknownDataset(dataset)
        schema = dataset_schema(dataset)
        table = table.select(schema.names).cast(schema)
        table = dedupe(table, spec.keys)
        if table.num_rows == 0:
            ds = self.open(scope, dataset)
            if ds is None:
                return MergeResult(dataset, 0, 0, 0)
            return MergeResult.unchanged(dataset, ds)
        appended = 0
        if spec.probe is not None:
            table, result = self._append_new_keys(scope, dataset, table)
            if not table.num_rows:
                return result
            appended = result.inserted
        uri = self.uri(scope, dataset)
        rows = _row_digests(table) if spec.repeats else frozenset()
        attempt = 0
        while True:
            # A retry starts from the newest version; so does a repeated rows' dry run, whose
            # "unchanged" would otherwise be judged against a version that may be behind.
            ds, as_of = self._write_base(scope, dataset, newest=bool(attempt) or spec.repeats)
            if ds is None:
                self._create(scope, dataset, schema)
                continue
            if spec.repeats and self._holds_repeats(uri, ds.version, rows):
                # The newest version is one this store found, or made, holding these very rows:
                # the dry run below would find nothing to change (a scan of the whole dataset).
                return MergeResult.unchanged(dataset, ds)
            builder = ds.merge_insert(list(spec.keys)).when_not_matched_insert_all()
            if spec.merge == "upsert":
                builder = builder.when_matched_update_all(_changed(schema, spec.keys))
            # Never join through a scalar index on the key: pylance 14's indexed merge path leaves
            # the inserted keys out of the transaction, so two writers inserting the same new CID
            # both commit (every time in tests/projection_io/test_lance_concurrent_inserts.py;
            # upstream lance-format/lance#9238). The scan join records them and conflicts.
            builder = builder.conflict_retries(self.conflict_retries).use_index(False)
            if spec.repeats and not _rows_touched(builder.execute_uncommitted(table)[1]):
                # A program's unchanged rows, sent again with each of its executions: no commit, so
                # no version, whose manifest every later open and commit of the dataset lists. Only
                # a dry run: its transaction, committed from Python, loses the inserted keys that
                # Lance's conflict check needs (two inserts of one new key both land), so a merge
                # that changes something runs again through execute(). That rare case (a new
                # program) leaves the dry run's data files unreferenced, for Lance's cleanup.
                self._held_repeats(uri, ds.version, rows)
                self._keep(scope, dataset, ds, as_of)
                return MergeResult.unchanged(dataset, ds)
            try:
                stats: dict[str, Any] = builder.execute(table)
            except OSError as exc:
                attempt += 1
                if attempt > self.outer_retries or not is_retryable_conflict(exc):
                    raise
                # Counts only: which merges lose their races (a soak's restarted worker starved on
                # one, docs/projection-runtime.md "2026-12-07 (later)").
                log.info(
                    "lance %s commit conflict, retrying against the newest version (%d rows, %s)",
                    dataset,
                    table.num_rows,
                    "keys the probe found" if spec.probe is not None else "no probe",
                )
                time.sleep(0.05 * attempt)
                continue
            updated = int(stats.get("num_updated_rows", 0))
            if updated and spec.probe is not None:
                # A row the dataset held, rewritten: what a merge must run again for after a
                # concurrent compaction or change of the same rows.
                log.info("lance %s merge rewrote %d of %d rows", dataset, updated, table.num_rows)
            # execute() moves ``ds`` to the version it committed: no second open (one S3 round trip).
            self._saw(uri, ds.version)
            if spec.repeats:
                self._held_repeats(uri, ds.version, rows)
            self._keep(scope, dataset, ds)
            return MergeResult(
                dataset,
                appended + int(stats.get("num_inserted_rows", 0)),
                updated,
                ds.version,
                len(ds.get_fragments()),
            )

    def _append_new_keys(self, scope: Scope, dataset: str, table: pa.Table) -> tuple[pa.Table, MergeResult]:
        """Append the rows of ``table`` whose keys the dataset does not hold; the other rows (for
        ``merge`` to merge: redeliveries, updates, rare) and what the append committed.

        A merge_insert joins its rows against the key column of every row in the dataset, so its
        cost grows with the dataset (``calls_v1`` on local disk: 8 ms of CPU at 10 k rows, 359 ms
        at 4 M). Rows with new keys (every first projection of an execution) need no join: the
        keys are probed through the index on the column they derive from (``DatasetSpec.probe``,
        kept current by the committer), and the rows appended. Appends never conflict, so a
        concurrent commit rebases them without rewriting a fragment.

        Two processes may append the same new key at once (an execution projected twice
        concurrently, as a retried activity can be). The later commit finds the earlier one's rows
        when it probes again after being rebased, and removes its own copies before it returns, so
        no caller goes on (to the ledger) while its rows are held twice (:meth:`_drop_later_copies`).

        Rows whose keys exist are returned for the merge only if they would change what is held
        (:func:`_changing`). A redelivered execution's rows, or a value shared by many, then need
        no join and no commit: in a 5-minute soak every such merge rewrote nothing, yet each
        joined the whole dataset, committed an empty version, and some lost their commit races
        (docs/projection-runtime.md, "2026-12-07 (later)").
        """
        spec = DATASETS[dataset]
        assert spec.probe is not None
        ds, as_of = self._write_base(scope, dataset)
        if ds is None:
            self._create(scope, dataset, dataset_schema(dataset))
            ds, as_of = self._write_base(scope, dataset, newest=True)
            assert ds is not None  # just created, and datasets are never removed
        probes = pc.unique(table[spec.probe]).to_pylist()
        if None in probes:
            # A row without its probe value: only the join can tell whether its key exists.
            self._keep(scope, dataset, ds, as_of)
            return table, MergeResult.unchanged(dataset, ds)
        uri = self.uri(scope, dataset)
        # An upsert's found rows whole, to tell which of its rows would change them.
        held = spec.keys if spec.merge == "insert_only" else tuple(table.column_names)
        found = self._find(uri, ds, spec.probe, probes, held, with_row_id=True)
        if found.num_rows:
            # Copies a process left behind (it died between its append and its check) would make
            # the merge's join ambiguous: removed first.
            self._drop_later_copies(scope, dataset, found)
            exists = pc.is_in(_key_column(table, spec.keys), _key_column(found, spec.keys))
            rest, table = _changing(table.filter(exists), found, spec.merge), table.filter(pc.invert(exists))
            if not table.num_rows:
                self._keep(scope, dataset, ds, as_of)
                return rest, MergeResult.unchanged(dataset, ds)
            probes = pc.unique(table[spec.probe]).to_pylist()
        else:
            rest = table.slice(0, 0)
        fragments = lance.fragment.write_fragments(
            table, ds, schema=ds.schema, storage_options=self._options(), session=self.session
        )
        new = self._commit_append(dataset, ds, fragments)
        self._saw(uri, new.version)
        self._appended_here(uri, ds, fragments, probes, new)
        if new.version > ds.version + 1 and self._drop_later_copies(
            scope, dataset, self._find(uri, new, spec.probe, probes, spec.keys, with_row_id=True)
        ):
            new = self.open(scope, dataset) or new
        self._keep(scope, dataset, new)
        return rest, MergeResult(dataset, table.num_rows, 0, new.version, len(new.get_fragments()))

    def _commit_append(
        self, dataset: str, base: lance.LanceDataset, fragments: list[lance.fragment.FragmentMetadata]
    ) -> lance.LanceDataset:
        """Commit written fragments as an append on ``base``, rebased over whatever was committed
        since: Lance retries a lost race ``conflict_retries`` times at once. Under contention (two
        workers and the upkeep committing one dataset on a loaded machine) every one of them can
        lose; the error then failed every activity of the committer's group, where a merge that
        lost is run again (:meth:`merge`). The same fragments are committed again after a pause
        that grows, up to ``outer_retries`` times: nothing is written twice."""
        again = _on_conflict(
            self.outer_retries + 1,
            multiplier=0.2,
            max_s=5.0,
            what=f"{dataset} append lost every commit race, committing its fragments again",
        )
        return again(
            lance.LanceDataset.commit,
            base,
            lance.LanceOperation.Append(fragments),
            read_version=base.version,
            storage_options=self._options(),
            max_retries=self.conflict_retries,
        )

    def _drop_later_copies(self, scope: Scope, dataset: str, found: pa.Table) -> bool:
        """Delete every copy of a key in ``found`` (keys and ``_rowid``) but its first; whether any.

        Stable row ids are given in commit order, so each key keeps the copy committed first, and
        every process that finds the same duplicates deletes the same rows (deleting a deleted
        row deletes nothing)."""
        if found.num_rows < 2:
            return False
        keyed = pa.table({"key": _key_column(found, DATASETS[dataset].keys), "rowid": found["_rowid"]})
        first = keyed.group_by("key", use_threads=False).aggregate([("rowid", "min")])
        if first.num_rows == found.num_rows:
            return False
        later = keyed.filter(pc.invert(pc.is_in(keyed["rowid"], first["rowid_min"])))["rowid"].to_pylist()
        log.warning("lance %s: removing %d rows appended twice by concurrent writers", dataset, len(later))
        predicate = f"_rowid IN ({', '.join(str(int(i)) for i in later)})"
        for attempt in _on_conflict(MAINTENANCE_ATTEMPTS, multiplier=0.05, max_s=1.0):
            with attempt:
                ds = self.open(scope, dataset)
                assert ds is not None
                ds.delete(predicate)
                self._saw(self.uri(scope, dataset), ds.version)
        return True

    def append_new(self, scope: Scope, dataset: str, table: pa.Table) -> MergeResult:
        """Bulk load: append rows whose keys the dataset does not hold yet, with no key join.

        For loaders whose keys are new by construction (bench/query.py's replicas of a projected
        base, each with fresh ids); the projector never calls it, because a key that exists is
        stored twice. A merge is the wrong tool there: every merge scans every key in the dataset
        (``merge``: ``use_index``), so loading N groups costs N scans of a growing dataset. Rows
        are written in the order given: a loader sorts them the way queries prune.
        """
        if dataset not in DATASETS:
            raise UnknownDataset(dataset)
        schema = dataset_schema(dataset)
        table = table.select(schema.names).cast(schema)
        ds = self.open(scope, dataset)
        if ds is None:
            self._create(scope, dataset, schema)
            ds = self.open(scope, dataset)
            assert ds is not None  # just created, and datasets are never removed
        if table.num_rows:
            ds.insert(table)
        return MergeResult(dataset, table.num_rows, 0, ds.version, len(ds.get_fragments()))

    # --- maintenance -------------------------------------------------------------------------

    def index_and_compact(
        self,
        scope: Scope,
        dataset: str,
        *,
        retain_versions: int = 20,
        older_than_s: float = 3600.0,
        lease_s: float = DEFAULT_LEASE_S,
        beat: Callable[[], None] | None = None,
    ) -> dict[str, int]:
        """Compact small fragments; then, under the dataset's index lease (``lease_s``, renewed
        while it folds), create the scalar and n-gram indexes it lacks and bring the existing
        ones up to date; remove old versions.

        ``beat`` is called every few seconds while the tick waits (``TICK_WAIT_S`` at most) for
        another's lease.

        Incremental: an index that exists is never rebuilt. ``optimize_indices`` folds the rows
        added since into it (Lance indexes the new fragments only), so a tick costs what arrived
        since the last one, not the dataset's size. Changes no row: readers of any retained
        version see the same rows.
        """
        if dataset not in DATASETS:
            raise UnknownDataset(dataset)
        ds = self.open(scope, dataset)
        if ds is None or ds.count_rows() == 0:
            return {"indexes": 0, "compacted_fragments": 0, "removed_versions": 0}

        newest = partial(self.newest, scope, dataset)
        # Each step commits on its own; one that loses the race to a worker's commit or compaction
        # is run again on the newest version (a fold covers what is unindexed then).
        again = _on_conflict(MAINTENANCE_ATTEMPTS, multiplier=0.2, max_s=2.0)
        # The tick's own compaction first, unless another process is folding under its lease:
        # a compaction would preempt that fold (api/dataplane/index_lease.py).
        compacted = 0
        started = time.monotonic()
        if not held_by_another(newest()):
            compacted = int(getattr(again(lambda: newest().optimize.compact_files()), "fragments_removed", 0))
        waiting = time.monotonic()
        # Then the builds and folds, which take minutes on a large dataset, under the lease: the
        # workers' committers leave the dataset uncompacted meanwhile. A lease held by another
        # (a worker's fold thread) is waited for while its holder renews it: folding beside it,
        # the tick lost every fold to the compactions that resumed once the holder released it
        # (the hour's soak of 2026-12-05, evening). Past that wait the steps still run, each run
        # again when it loses a race; a holder that died stops renewing, and its lease lapses.
        with index_lease(newest, lease_s, wait_s=TICK_WAIT_S, beat=beat) as held:
            folding = time.monotonic()
            if not held:
                log.info("lance %s: the index lease stayed held by another; folding without it", dataset)
            built = again(lambda: create_missing_indexes(newest(), dataset))
            # One index at a time, each retried alone: a retry of the whole pass folded every
            # index again (the rows that arrived meanwhile), so under load no pass finished inside
            # its attempts (the hour's soak of 2026-12-05: a tick failed 8 attempts in 36 min).
            folds: dict[str, float] = {}  # index -> seconds its fold took, retries included
            for name in sorted({str(index["name"]) for index in newest().list_indices()}):
                t0 = time.monotonic()
                again(lambda name=name: fold_new_rows(newest(), dataset, only=(name,)))
                folds[name] = time.monotonic() - t0
        cleaning = time.monotonic()
        ds = newest()
        stats = ds.cleanup_old_versions(
            older_than=timedelta(seconds=older_than_s),
            retain_versions=retain_versions,
            error_if_tagged_old_versions=False,
        )
        # Where a long tick's time went (a soak's 8-minute tick was not explained by its result).
        slowest = ", ".join(f"{n} {t:.1f}" for n, t in sorted(folds.items(), key=lambda f: -f[1])[:3])
        log.info(
            "lance %s: tick compacted %d fragments in %.1f s, waited %.1f s for the index lease,"
            " built %d and folded %d indexes in %.1f s (slowest: %s), cleaned versions in %.1f s",
            dataset,
            compacted,
            waiting - started,
            folding - waiting,
            built,
            len(folds),
            cleaning - folding,
            slowest or "none",
            time.monotonic() - cleaning,
        )
        return {
            "indexes": built,
            "compacted_fragments": compacted,
            "removed_versions": int(getattr(stats, "old_versions", 0)),
        }
