"""The projection activities: S3 reads, Boundary batches and Lance commits around the pure core.

:class:`ProjectionActivities` receives its clients once (boto3 S3, :class:`LanceStore`, a
:class:`FactSink` over the Boundary client); each method is a Temporal activity taking and
returning one frozen dataclass (formats/contracts/projection.py), and a plain function a test calls
directly. Contract order per meta object (spec "Projection contract"): verify, build rows with
the pure core, make every public batch visible in Boundary, then commit Lance, the ledger last.
Redelivery repeats the same steps with the same ids, so a crash anywhere leaves one row set.

Objects that fail verification (the triggering meta object or pack: bad frame, trailing
checksum, version, identity, or a key outside the deployment's scope) raise a non-retryable
``ApplicationError`` of type ``ObjectQuarantined`` whose first detail is the reason code; the
caller writes the marker with :meth:`quarantine_object` and dead-letters the message.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from botocore.exceptions import ClientError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.engine_registry import EngineRegistry
from activities.evidence_reader import EvidenceReader, already_exists
from activities.fact_sink import FactSink
from activities.generation_cache import ActiveGenerations
from activities.heartbeat import heartbeat
from activities.lance_committer import LanceCommitter
from activities.projection.assemble import abandoned_execution, assemble_execution
from activities.projection.batches import build_batch_set, private_tables_of
from activities.projection.model import (
    DataRead,
    ExecutionInput,
    ExecutionProjection,
    MetaProblem,
    PendingExecution,
    ResolvedValue,
)
from activities.projection.walk import (
    MAX_WALK,
    MetaIndex,
    find_root_context,
    index_meta_segment,
    plan_meta_walk,
)
from activities.settings import ProjectionSettings
from activities.work_gate import WorkGate
from api.common.lru import LruCache
from api.dataplane.lance_store import (
    DATASETS,
    LEDGER,
    LEDGER_SCHEMA,
    LanceStore,
    ledger_row_id,
)
from formats import cas, evidence, object_keys
from formats import meta_segment as ms
from formats.contracts import projection as c
from formats.data_segment import DataSegment
from formats.errors import FormatError
from formats.ids import ThreadRef
from formats.object_keys import InvalidKeyError, ParsedKey, Scope
from formats.value_pack import read_pack

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger("baml_studio.projection")

# A meta object's timing lines (durations only, no values), and the patterns that read their
# phases back (bench/soak.py): each pattern's groups are (phase name, seconds) pairs.
READ_LINE = "meta read executions=%d read=%.3fs"
PROJECTED_LINE = "projected executions=%d values+assemble=%.3fs boundary=%.3fs lance=%.3fs"
LANCE_LINE = "lance committed datasets=%.3fs ledger=%.3fs"
PHASE_LINES = (
    re.compile(r"meta read executions=\d+ (read)=([\d.]+)s"),
    re.compile(r"projected executions=\d+ (values\+assemble)=([\d.]+)s (boundary)=([\d.]+)s"),
    re.compile(r"lance committed (datasets)=([\d.]+)s (ledger)=([\d.]+)s"),
)

_INDEX_CORRUPT = "index_corrupt"


def quarantined(key: str, reason: str) -> ApplicationError:
    # The message names the key and a reason code only; never object contents.
    return ApplicationError(
        f"object quarantined ({reason}): {key}", reason, type=c.ERR_QUARANTINED, non_retryable=True
    )


def _scope_of(ref: c.ScopeRef) -> Scope:
    return Scope(ref.tenant_id, ref.project_id, ref.environment_id)


# One stream's walked meta segments, indexed once per activity run (its executions share the walk).
_MetaIndexes = dict[int, MetaIndex | MetaProblem]
_META_INDEX_CACHE = 50_000  # meta segments: 25 streams walked back the full 2,000


def _available_cids(group_facts: list[Any]) -> Iterator[bytes]:
    for fact in group_facts:
        state = None
        if isinstance(fact, evidence.ValueOccurrence):
            state = fact.state
        elif isinstance(fact, evidence.ErrorCapture):
            state = fact.value
        if isinstance(state, evidence.ValueAvailable):
            yield state.cid


def _stream_started_of(first: ms.MetaSegment | MetaProblem) -> ms.StreamStarted | None:
    """A stream's StreamStarted: the first record of its sequence-1 meta segment, if readable."""
    if isinstance(first, ms.MetaSegment) and first.records and isinstance(first.records[0], ms.StreamStarted):
        return first.records[0]
    return None


class ProjectionActivities:
    def __init__(
        self,
        *,
        s3: S3Client,
        bucket: str,
        lance: LanceStore,
        sink: FactSink,
        settings: ProjectionSettings,
        tenant_id: str,
        sqs: SQSClient | None = None,
        queue_url: str | None = None,
        batch_threads: int = 8,
    ) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.lance = lance
        self.sink = sink
        self.settings = settings
        self.tenant_id = tenant_id
        self.sqs = sqs
        self.queue_url = queue_url
        self._pool = ThreadPoolExecutor(max_workers=batch_threads, thread_name_prefix="projection-io")
        self.committer = LanceCommitter(
            lance,
            interval_s=settings.commit_interval_s,
            max_fragments=settings.max_fragments,
            retain_s=settings.commit_retain_s,
            cleanup_interval_s=settings.commit_cleanup_interval_s,
            lease_s=settings.index_lease_s,
            beat=partial(heartbeat, "lance"),
        )
        # Indexes of decoded meta segments, shared by this worker's activities (about 1 KiB each).
        # The objects are immutable, and without it every meta object's walk-back would GET and
        # decode its stream's earlier meta objects again (O(sequence squared) over a stream's life).
        self._gate = WorkGate(settings.executions_in_flight)
        self._meta_indexes: LruCache[str, MetaIndex] = LruCache(_META_INDEX_CACHE)
        self._stream_starts: LruCache[str, ms.StreamStarted] = LruCache(_META_INDEX_CACHE)
        self.engines = EngineRegistry(s3, bucket)
        self._generations = ActiveGenerations(sink.active_generation, settings.generation_ttl_s)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.committer.close()

    def caches_held(self) -> str:
        """The bounded caches' fill, for the worker's memory log line."""
        return (
            f"Lance session {self.lance.session.size_bytes() / 2**20:.1f} MiB,"
            f" meta-segment indexes {len(self._meta_indexes)} of {_META_INDEX_CACHE}"
        )

    def activities(self) -> list[Any]:
        return [self.ingest_pack, self.project_meta_object, self.quarantine_object, self.active_generation]

    # --- verification ------------------------------------------------------------------------

    def _parse_in_scope(self, key: str, kind: str) -> ParsedKey:
        try:
            parsed = object_keys.parse_evidence_key(key)
        except InvalidKeyError:
            raise quarantined(key, "invalid_key") from None
        if parsed.scope.tenant_id != self.tenant_id:
            raise quarantined(key, "out_of_scope")
        allowed = self.settings.environment_ids
        if allowed and parsed.scope.environment_id not in allowed:
            raise quarantined(key, "out_of_scope")
        if parsed.kind != kind:
            raise quarantined(key, "unexpected_kind")
        return parsed

    def _check_generation(self, scope: Scope, generation: int) -> None:
        active = self._generations.get(scope.environment_id)
        # Writing into active+1 is a rebuild in progress; anything else is a stale or bogus start.
        if generation not in (active, active + 1):
            raise ApplicationError(
                f"generation {generation} is not the active generation {active} (or the next)",
                active,
                type=c.ERR_STALE_GENERATION,
                non_retryable=True,
            )

    # --- pack ingest -------------------------------------------------------------------------

    @activity.defn(name="ingest_pack")
    def ingest_pack(self, inp: c.IngestPackInput) -> c.IngestPackResult:
        parsed = self._parse_in_scope(inp.key, "value_pack")
        heartbeat("reading")
        reader = EvidenceReader(self.s3, self.bucket)
        try:
            data = reader.get_file(inp.key)
            if data is None:  # erased since the notification: nothing to ingest
                return c.IngestPackResult(inp.key, 0, 0)
            pack = read_pack(data, file=inp.key)
        except FormatError as exc:
            raise quarantined(inp.key, exc.reason) from None
        if pack.manifest.process_euid != parsed.euid:
            raise quarantined(inp.key, "identity_mismatch")
        cids: list[str] = []
        codecs: list[int] = []
        bodies: list[bytes] = []
        locators: list[str] = []
        for index, entry in enumerate(pack.entries):
            try:
                obj = cas.decode_cas_object(entry.data, file=inp.key)
            except FormatError as exc:
                raise quarantined(inp.key, exc.reason) from None
            cids.append(obj.cid.hex())
            codecs.append(obj.codec)
            bodies.append(obj.body)
            locators.append(f"{inp.key}#{index}")
        table = pa.table(
            {
                "cid": cids,
                "codec": pa.array(codecs, pa.uint16()),
                "size_bytes": pa.array([len(b) for b in bodies], pa.uint64()),
                "body": pa.array(bodies, pa.large_binary()),
                "locator": locators,
            }
        )
        heartbeat("merging", len(cids))
        # Through the committer like every projection write: one values_v1 commit a second for
        # all the packs in flight. A commit per pack (20 streams, two workers) was a commit storm
        # in bench/soak.py: Lance gave up after its 30 s retry timeout ("Too many concurrent
        # writers"), so the values never landed and every execution stayed pending.
        result = self.committer.merge(parsed.scope, "values_v1", table)
        log.info(
            "pack ingested entries=%d inserted=%d shared_by=%d", len(cids), result.inserted, result.shared_by
        )
        return c.IngestPackResult(inp.key, len(cids), result.inserted, tuple(sorted(set(cids))))

    # --- meta projection ---------------------------------------------------------------------

    def _walk(
        self, reader: EvidenceReader, scope: Scope, euid: str, start: int, indexes: _MetaIndexes
    ) -> Iterator[MetaIndex | MetaProblem]:
        for seq in plan_meta_walk(start, self.settings.max_walk or MAX_WALK):
            hit = indexes.get(seq)
            if hit is None:
                hit = indexes[seq] = self._meta_index(reader, scope, euid, seq)
            yield hit

    def _meta_index(
        self, reader: EvidenceReader, scope: Scope, euid: str, seq: int
    ) -> MetaIndex | MetaProblem:
        # Only decoded segments are kept: a missing or corrupt one may be uploaded or repaired later.
        key = object_keys.meta_segment_key(scope, euid, seq)
        cached = self._meta_indexes.get(key)
        if cached is not None:
            return cached
        seg = reader.meta(scope, euid, seq)
        if not isinstance(seg, ms.MetaSegment):
            return seg
        index = index_meta_segment(seg)
        self._meta_indexes.put(key, index)
        return index

    def _stream_started(self, reader: EvidenceReader, scope: Scope, euid: str) -> ms.StreamStarted | None:
        key = object_keys.meta_segment_key(scope, euid, 1)
        cached = self._stream_starts.get(key)
        if cached is not None:
            return cached
        record = _stream_started_of(reader.meta(scope, euid, 1))
        if record is not None:
            self._stream_starts.put(key, record)
        return record

    def _data_reads(
        self, reader: EvidenceReader, scope: Scope, euid: str, root: ThreadRef, seqs: range | list[int]
    ) -> tuple[DataRead, ...]:
        root_bytes = root.to_bytes()
        reads: list[DataRead] = []
        for seq in seqs:
            seg = reader.data(scope, euid, seq)
            if not isinstance(seg, DataSegment):
                reads.append(DataRead(seq, None, seg))
                continue
            reads.append(DataRead(seq, reader.group(scope, euid, seq, root_bytes)))
        return tuple(reads)

    def _input_beat(self, *args: Any) -> ExecutionInput:
        heartbeat("reading")
        return self._input(*args)

    def _input(
        self,
        reader: EvidenceReader,
        scope: Scope,
        euid: str,
        walk_from: int,
        root: ThreadRef,
        stream_started: ms.StreamStarted | None,
        root_ended: ms.RootEnded | None,
        data_seqs: range | list[int],
        indexes: _MetaIndexes,
    ) -> ExecutionInput:
        ctx = find_root_context(
            self._walk(reader, scope, euid, walk_from, indexes),
            root,
            need_root_started=root_ended is None or not root_ended.root_started_lost,
            max_walk=self.settings.max_walk,
            stream_started=stream_started,
            engine_lookup=lambda engine_id: self.engines.lookup(scope, euid, engine_id),
        )
        engine = ctx.engine_started
        table = None
        if engine is not None and engine.function_table_cid is not None:
            table = reader.function_table(scope, engine.function_table_cid)
        return ExecutionInput(
            process_euid=bytes.fromhex(euid),
            stream_started=ctx.stream_started,
            context=ctx,
            root_ended=root_ended,
            data=self._data_reads(reader, scope, euid, root, data_seqs),
            function_table=table,
            root_ended_seq=walk_from if root_ended is not None else None,
        )

    def _value_lookup(
        self, reader: EvidenceReader, scope: Scope, inputs: list[ExecutionInput]
    ) -> tuple[dict[bytes, ResolvedValue], Any]:
        """Prefetch every available CID of these executions from values_v1 in one pass."""
        wanted: set[bytes] = set()
        for inp in inputs:
            for read in inp.data:
                if read.group is None or read.problem is not None:
                    continue
                try:
                    wanted.update(_available_cids(read.group.evidence_facts()))
                except FormatError:
                    continue  # the core marks the execution index_corrupt
        found = self.lance.lookup_values(scope, sorted(c.hex() for c in wanted))
        in_lance = {
            bytes.fromhex(cid): ResolvedValue(body, codec, locator or "")
            for cid, (codec, body, locator) in found.items()
        }
        fetched: dict[bytes, ResolvedValue | None] = {}

        def lookup(cid: bytes) -> ResolvedValue | None:
            hit = in_lance.get(cid)
            if hit is not None:
                return hit
            if cid not in fetched:
                fetched[cid] = reader.large_value(scope, cid)
            return fetched[cid]

        return in_lance, lookup

    def _send_batches(self, scope: Scope, generation: int, projections: list[ExecutionProjection]) -> int:
        """Every public batch of the meta object in as few Boundary requests as the set caps allow.

        Each batch keeps its own identity (id, digest) and idempotency: a redelivery re-sends the
        same set and gets the recorded states back."""
        # One Arrow conversion per relation for the whole meta object, sliced into each
        # execution's batches (the same ids and bytes as per execution); one program's
        # function_definitions_v1 batch, the same for each of its executions, is in it once.
        batches = build_batch_set(projections, scope, generation)
        self.sink.put_batches(scope, batches)
        heartbeat("batches", len(batches))
        return len(batches)

    def _commit_lance(
        self,
        scope: Scope,
        generation: int,
        projections: list[ExecutionProjection],
        already_in_lance: set[bytes],
        meta_key: str | None,
    ) -> int:
        tables: dict[str, pa.Table] = {}
        for dataset, table in private_tables_of(projections).items():
            if dataset == "values_v1" and already_in_lance:
                keep = [cid not in already_in_lance for cid in map(bytes.fromhex, table["cid"].to_pylist())]
                table = table.filter(pa.array(keep, pa.bool_()))
            if table.num_rows and dataset != LEDGER:
                tables[dataset] = table
        tables = {dataset: tables[dataset] for dataset in DATASETS if dataset in tables}
        # The datasets are independent: queue them all for their next commits, which run side by
        # side (Lance works outside the GIL), each shared with concurrent activities; the ledger
        # only after every one of them has committed.
        began = time.perf_counter()
        futures = [self.committer.enqueue(scope, d, t) for d, t in tables.items()]
        for future in futures:
            self.committer.result(future)
            heartbeat("lance")
        rows = sum(t.num_rows for t in tables.values())
        now = time.time_ns()
        ledger = pa.table(
            {
                "row_id": [ledger_row_id(generation, p.execution_id) for p in projections],
                "root_id": [p.execution_id for p in projections],
                "generation": [generation] * len(projections),
                "process_euid": [p.process_euid for p in projections],
                "status": [p.status for p in projections],
                "index_state": [p.index_state for p in projections],
                "value_state": [p.value_state for p in projections],
                "meta_key": [meta_key] * len(projections),
                "lance_state": ["committed"] * len(projections),
                "committed_at_ns": [now] * len(projections),
            },
            schema=LEDGER_SCHEMA,
        )
        stamped = time.perf_counter()
        if ledger.num_rows:
            self.committer.merge(scope, LEDGER, ledger)
        # The ledger's commit comes after the freshness stamp (committed_at_ns): timed apart.
        log.info(LANCE_LINE, stamped - began, time.perf_counter() - stamped)
        return rows

    def _outcome(self, projection: ExecutionProjection) -> c.ExecutionOutcome:
        if projection.status == "abandoned":
            return c.ExecutionOutcome(projection.execution_id, c.ABANDONED, reason=projection.index_state)
        if projection.index_state == _INDEX_CORRUPT:
            return c.ExecutionOutcome(projection.execution_id, c.INDEX_CORRUPT, reason=_INDEX_CORRUPT)
        return c.ExecutionOutcome(projection.execution_id, c.PROJECTED)

    def _project(
        self,
        reader: EvidenceReader,
        scope: Scope,
        generation: int,
        inputs: list[ExecutionInput],
        *,
        sweep: bool,
        meta_key: str | None,
    ) -> tuple[list[c.ExecutionOutcome], int, int]:
        t0 = time.perf_counter()
        in_lance, lookup = self._value_lookup(reader, scope, inputs)
        outcomes: list[c.ExecutionOutcome] = []
        projections: list[ExecutionProjection] = []
        for inp in inputs:
            root_id = (inp.root_ended.root if inp.root_ended else inp.context.root_started.root).execution_id  # type: ignore[union-attr]
            try:
                result = abandoned_execution(inp, lookup) if sweep else assemble_execution(inp, lookup)
            except FormatError as exc:
                outcomes.append(c.ExecutionOutcome(root_id, c.QUARANTINED, reason=exc.reason))
                continue
            if isinstance(result, PendingExecution):
                outcomes.append(
                    c.ExecutionOutcome(
                        root_id, c.PENDING, reason=result.reason, missing_cids=result.missing_cids
                    )
                )
                continue
            projections.append(result)
            outcomes.append(self._outcome(result))
        t1 = time.perf_counter()
        sent = self._send_batches(scope, generation, projections) if projections else 0
        heartbeat("batches", sent)
        t2 = time.perf_counter()
        rows = (
            self._commit_lance(scope, generation, projections, set(in_lance), meta_key) if projections else 0
        )
        # Durations only (no values): where an object's projection time goes, for freshness work.
        log.info(
            PROJECTED_LINE,
            len(projections),
            t1 - t0,
            t2 - t1,
            time.perf_counter() - t2,
        )
        return outcomes, sent, rows

    @activity.defn(name="project_meta_object")
    def project_meta_object(self, inp: c.ProjectMetaInput) -> c.ProjectMetaResult:
        parsed = self._parse_in_scope(inp.key, "meta_segment")
        scope = parsed.scope
        assert parsed.euid is not None and parsed.sequence is not None
        began = time.perf_counter()
        self._check_generation(scope, inp.generation)
        reader = EvidenceReader(self.s3, self.bucket)
        try:
            segment = reader.meta_strict(inp.key)
        except LookupError:
            return c.ProjectMetaResult(inp.key, inp.generation)  # erased since the notification
        except FormatError as exc:
            raise quarantined(inp.key, exc.reason) from None
        # Every meta object registers its engines, whether or not it ends an execution: a later
        # RootEnded, thousands of objects on, finds its engine there (activities/engine_registry.py).
        self.engines.register(scope, parsed.euid, segment)
        # The next object's walk starts here: an object that ends no execution (a cycle's admitted
        # batch) is otherwise read again by it.
        self._meta_indexes.put(inp.key, index_meta_segment(segment))
        if parsed.sequence == 1 and (record := _stream_started_of(segment)) is not None:
            self._stream_starts.put(inp.key, record)
        only = set(inp.only_roots)
        ended = [
            r
            for r in segment.records
            if isinstance(r, ms.RootEnded) and (not only or r.root.execution_id in only)
        ]
        if not ended:
            return c.ProjectMetaResult(inp.key, inp.generation)
        # A slot per execution, held while its segments and rows are in memory (work_gate.py).
        with self._gate.hold(len(ended), waiting=lambda: heartbeat("waiting for memory")):
            return self._project_ended(reader, inp, parsed, ended, began)

    def _project_ended(
        self,
        reader: EvidenceReader,
        inp: c.ProjectMetaInput,
        parsed: ParsedKey,
        ended: list[ms.RootEnded],
        began: float,
    ) -> c.ProjectMetaResult:
        scope = parsed.scope
        assert parsed.euid is not None and parsed.sequence is not None
        started = self._stream_started(reader, scope, parsed.euid)
        # The executions of one meta object share most of their data segments: fetch the union
        # once, concurrently.
        reader.prefetch_data(
            scope,
            parsed.euid,
            (s for r in ended if r.data_segment_count for s in range(r.data_first_seq, r.data_last_seq + 1)),
            self._pool,
        )
        indexes: _MetaIndexes = {}
        inputs = [
            self._input_beat(
                reader,
                scope,
                parsed.euid,
                parsed.sequence,
                r.root,
                started,
                r,
                range(r.data_first_seq, r.data_last_seq + 1) if r.data_segment_count else range(0),
                indexes,
            )
            for r in ended
        ]
        heartbeat("read", len(inputs))
        log.info(READ_LINE, len(inputs), time.perf_counter() - began)
        outcomes, sent, rows = self._project(
            reader, scope, inp.generation, inputs, sweep=False, meta_key=inp.key
        )
        log.info(
            "meta projected executions=%d pending=%d batches=%d",
            len(outcomes),
            sum(1 for o in outcomes if o.outcome == c.PENDING),
            sent,
        )
        return c.ProjectMetaResult(inp.key, inp.generation, tuple(outcomes), sent, rows)

    # --- quarantine --------------------------------------------------------------------------

    @activity.defn(name="quarantine_object")
    def quarantine_object(self, inp: c.QuarantineInput) -> c.QuarantineResult:
        """Write the key's marker (create-only, :func:`object_keys.quarantine_marker_key`: the key the
        bridge names in the dead-letter message); the object itself is kept."""
        marker = object_keys.quarantine_marker_key(inp.key)
        body = json.dumps(
            {"key": inp.key, "reason": inp.reason, "quarantined_at": dt.datetime.now(dt.UTC).isoformat()},
            sort_keys=True,
        ).encode()
        try:
            self.s3.put_object(Bucket=self.bucket, Key=marker, Body=body, IfNoneMatch="*")
        except ClientError as exc:
            if already_exists(exc):
                return c.QuarantineResult(marker, False)
            raise
        log.warning("quarantined object reason=%s marker=%s", inp.reason, marker)
        return c.QuarantineResult(marker, True)

    # --- sweep -------------------------------------------------------------------------------

    @activity.defn(name="active_generation")
    def active_generation(self, inp: c.ActiveGenerationInput) -> int:
        return self.sink.active_generation(inp.environment_id)
