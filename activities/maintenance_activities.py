"""The maintenance activities: the sweep, index and compaction, the replay scan and its enqueue.

:class:`MaintenanceActivities` works on the projection's clients and, for the sweep, through its
projection path: an abandoned execution is projected exactly as a finished one is, by
:class:`activities.projection_activities.ProjectionActivities` (the one home of that story). Each
method is a Temporal activity taking and returning one frozen dataclass
(formats/contracts/projection.py), and a plain function a test calls directly.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from functools import partial
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.evidence_reader import EvidenceReader
from activities.heartbeat import beating, heartbeat
from activities.projection.model import ExecutionInput
from activities.projection_activities import ProjectionActivities, _MetaIndexes, _scope_of
from activities.sweep_memory import SweepMemory, decode_state, encode_state
from api.dataplane.lance_store import DATASETS
from formats import meta_segment as ms
from formats import object_keys, reader_rules
from formats.contracts import projection as c
from formats.errors import FormatError
from formats.object_keys import InvalidKeyError, Scope
from formats.value_pack import read_pack

log = logging.getLogger("baml_studio.maintenance")

ERR_ENQUEUE_FAILED = "EnqueueFailed"  # retryable: SQS did not take some replay messages
_SEND_ATTEMPTS = 4  # sends of one replay batch: the first and three resends of its failed entries
_RESEND_DELAY_S = 0.2  # before the first resend; doubled before each later one


class MaintenanceActivities:
    def __init__(self, projection: ProjectionActivities) -> None:
        self.p = projection
        self.sweep_memory = SweepMemory()

    def activities(self) -> list[Any]:
        return [self.sweep, self.index_and_compact, self.replay_scan, self.enqueue_replay]

    # --- sweep -------------------------------------------------------------------------------

    @activity.defn(name="sweep")
    def sweep(self, inp: c.SweepInput) -> c.SweepResult:
        """Close executions of silent streams that have RootStarted and no RootEnded as abandoned.

        A tick lists only the meta objects that arrived since the last, and passes over a silent
        stream it already closed (:mod:`activities.sweep_memory`): its cost follows the streams
        and what is new, not the bucket's history."""
        scope = _scope_of(inp.scope)
        limit = inp.silence_limit_s if inp.silence_limit_s is not None else self.p.settings.silence_limit_s
        generation = self.p.sink.active_generation(scope.environment_id)
        reader = EvidenceReader(self.p.s3, self.p.bucket)
        now, tick = dt.datetime.now(dt.UTC), time.monotonic()
        streams = reader.list_prefixes(object_keys.evidence_prefix(scope) + "streams/")
        memory = self.sweep_memory
        already: set[str] | None = None  # the ledger's roots, read once a stream needs them
        outcomes: list[c.ExecutionOutcome] = []
        silent = 0
        for prefix in streams:
            euid = prefix.rstrip("/").rsplit("/", 1)[-1]
            recalled = not memory.knows(prefix) and self._recall_sweep_state(
                reader, scope, euid, prefix, tick
            )
            after = memory.start_after(prefix, tick)
            listed = list(reader.list_objects(prefix + "meta/", after))
            seen = memory.listed(prefix, [(o.key, o.last_modified) for o in listed], tick, full=after is None)
            if seen is None or (now - seen.newest).total_seconds() < limit:
                continue
            silent += 1
            if not memory.closed(prefix, generation) and not recalled:
                # Another worker's tick may have closed it since this worker listed it.
                self._recall_sweep_state(reader, scope, euid, prefix, tick)
            if memory.closed(prefix, generation):
                continue
            metas = listed if after is None else list(reader.list_objects(prefix + "meta/"))
            if already is None:
                already = self.p.lance.ledger_roots(scope, generation)
            inputs = self._abandoned_inputs(reader, scope, euid, metas, already)
            heartbeat("sweep", euid)
            got: list[c.ExecutionOutcome] = []
            if inputs:
                got, _, _ = self.p._project(reader, scope, generation, inputs, sweep=True, meta_key=None)
                outcomes.extend(got)
            if all(o.outcome in c.DONE_OUTCOMES for o in got):  # a pending one: the next tick again
                self._keep_sweep_state(scope, euid, prefix, generation)
        log.info("sweep streams=%d silent=%d abandoned=%d", len(streams), silent, len(outcomes))
        return c.SweepResult(len(streams), silent, generation, tuple(outcomes))

    def _keep_sweep_state(self, scope: Scope, euid: str, prefix: str, generation: int) -> None:
        """Close the stream in this worker's memory and in the bucket, for every worker's later ticks."""
        closed = self.sweep_memory.close(prefix, generation)
        assert closed is not None  # listed by this tick
        self.p.s3.put_object(
            Bucket=self.p.bucket,
            Key=object_keys.sweep_state_key(scope, euid),
            Body=encode_state(closed),
            ContentType="application/json",
        )

    def _recall_sweep_state(
        self, reader: EvidenceReader, scope: Scope, euid: str, prefix: str, tick: float
    ) -> bool:
        """What a tick of any worker kept of a stream it closed (:mod:`activities.sweep_memory`);
        whether there was such a state."""
        key = object_keys.sweep_state_key(scope, euid)
        data = reader.get_raw(key)
        if data is None:
            return False
        seen = decode_state(data, prefix, tick)
        if seen is None:
            log.warning("sweep state %s unreadable: the stream is listed and read in full", key)
            return False
        self.sweep_memory.recall(prefix, seen)
        return True

    def _abandoned_inputs(
        self, reader: EvidenceReader, scope: Scope, euid: str, metas: list[Any], already: set[str]
    ) -> list[ExecutionInput]:
        started: dict[bytes, tuple[int, ms.RootStarted]] = {}
        ended: set[bytes] = set()
        present: list[int] = []
        decoded: list[int] = []
        for obj in metas:
            seq = object_keys.parse_evidence_key(obj.key).sequence
            assert seq is not None
            present.append(seq)
            seg = reader.meta(scope, euid, seq)
            if not isinstance(seg, ms.MetaSegment):
                continue
            decoded.append(seq)
            for record in seg.records:
                if isinstance(record, ms.RootStarted):
                    started[record.root.to_bytes()] = (seq, record)
                elif isinstance(record, ms.RootEnded):
                    ended.add(record.root.to_bytes())
        open_roots = [
            (seq, rs)
            for root, (seq, rs) in sorted(started.items())
            if root not in ended and rs.root.execution_id not in already
        ]
        if not open_roots:
            return []
        data_seqs = sorted(
            s
            for s in (
                object_keys.parse_evidence_key(o.key).sequence
                for o in reader.list_objects(object_keys.stream_prefix(scope, euid) + "data/")
            )
            if s is not None
        )
        stream_started = self.p._stream_started(reader, scope, euid)
        # The stream is silent (not alive): every unreadable sequence up to the newest is a gap, and
        # a gap after an execution's RootStarted makes it index_corrupt (the reader's rules).
        gaps = tuple(reader_rules.index_gaps(max(present), decoded, present, alive=False))
        indexes: _MetaIndexes = {}
        out = []
        for seq, rs in open_roots:
            inp = self.p._input(reader, scope, euid, seq, rs.root, stream_started, None, data_seqs, indexes)
            # Only the segments that hold this root's groups belong to it.
            out.append(
                dataclasses.replace(
                    inp,
                    context=dataclasses.replace(inp.context, gaps=gaps),
                    data=tuple(r for r in inp.data if r.group is not None),
                )
            )
        return out

    # --- index and compaction ----------------------------------------------------------------

    @activity.defn(name="index_and_compact")
    def index_and_compact(self, inp: c.IndexInput) -> c.IndexResult:
        scope = _scope_of(inp.scope)
        names = inp.datasets or tuple(DATASETS)
        totals = {"indexes": 0, "compacted_fragments": 0, "removed_versions": 0}
        for name in names:
            got = beating(
                partial(
                    self.p.lance.index_and_compact,
                    scope,
                    name,
                    retain_versions=self.p.settings.retain_versions,
                    older_than_s=self.p.settings.retain_older_than_s,
                    lease_s=self.p.settings.index_lease_s,
                    beat=partial(heartbeat, name),
                ),
                name,
            )
            for k in totals:
                totals[k] += got[k]
        return c.IndexResult(tuple(names), **totals)

    # --- replay ------------------------------------------------------------------------------

    @activity.defn(name="replay_scan")
    def replay_scan(self, inp: c.ReplayScanInput) -> c.ReplayScanResult:
        """One page of the evidence listing: meta objects with an unprojected RootEnded, packs not ingested.

        "Projected" here is what Lance's ledger holds for the generation; the ledger row is
        written after the facts are visible in ClickHouse, so it implies both stores.
        """
        scope = _scope_of(inp.scope)
        reader = EvidenceReader(self.p.s3, self.p.bucket)
        kwargs: dict[str, Any] = {
            "Bucket": self.p.bucket,
            "Prefix": object_keys.evidence_prefix(scope) + "streams/",
            "MaxKeys": inp.page_size,
        }
        if inp.start_after:
            kwargs["StartAfter"] = inp.start_after
        page = self.p.s3.list_objects_v2(**kwargs)
        keys = [o["Key"] for o in page.get("Contents", [])]
        done = self.p.lance.ledger_roots(scope, inp.generation)
        missing_meta: list[str] = []
        missing_pack: list[str] = []
        for key in keys:
            try:
                parsed = object_keys.parse_evidence_key(key)
            except InvalidKeyError:
                continue
            if parsed.kind == "meta_segment":
                try:
                    seg = reader.meta_strict(key)
                except (LookupError, FormatError):
                    missing_meta.append(key)  # re-delivery quarantines it properly
                    continue
                # Replay and rebuild rebuild the engine registry as they scan: a page's engines are
                # registered before any of its meta objects is enqueued.
                self.p.engines.register(parsed.scope, parsed.euid or "", seg)
                roots = {r.root.execution_id for r in seg.records if isinstance(r, ms.RootEnded)}
                if roots - done:
                    missing_meta.append(key)
            elif parsed.kind == "value_pack" and self._pack_missing(reader, parsed.scope, key):
                missing_pack.append(key)
        truncated = bool(page.get("IsTruncated"))
        return c.ReplayScanResult(
            tuple(missing_meta), tuple(missing_pack), len(keys), keys[-1] if truncated and keys else None
        )

    def _pack_missing(self, reader: EvidenceReader, scope: Scope, key: str) -> bool:
        try:
            data = reader.get_file(key)
            if data is None:
                return False
            pack = read_pack(data, file=key, verify_entries=False)
        except FormatError:
            return True
        cids = [e.cid.removeprefix(object_keys.CID_PREFIX) for e in pack.entries]
        return len(self.p.lance.lookup_values(scope, cids)) < len(set(cids))

    @activity.defn(name="enqueue_replay")
    def enqueue_replay(self, inp: c.EnqueueInput) -> c.EnqueueResult:
        """Send an S3-event-shaped message per key to the projection queue (the bridge starts the work).

        ``sent`` counts only the entries SQS reported ``Successful``. A batch answers per entry, so
        its ``Failed`` entries are resent (``_SEND_ATTEMPTS`` sends in all); entries still failing
        raise a retryable ``EnqueueFailed``. Temporal's retry then sends every key of the input
        again: duplicates are harmless, since the bridge starts one workflow per object ID."""
        if self.p.sqs is None or self.p.queue_url is None:
            raise ApplicationError("no projection queue configured", type="NoQueue", non_retryable=True)
        sent = 0
        failed: dict[str, str] = {}  # key -> SQS error code, after the last resend
        for start in range(0, len(inp.keys), 10):
            delivered, left = self._send_batch(inp.keys[start : start + 10])
            sent += delivered
            failed.update(left)
            heartbeat("enqueued", sent)
        if failed:
            codes = sorted(set(failed.values()))
            # Keys and error codes only, never the message bodies.
            raise ApplicationError(
                f"{len(failed)} of {len(inp.keys)} replay messages were not enqueued "
                f"after {_SEND_ATTEMPTS} sends (SQS error codes: {', '.join(codes)})",
                len(failed),
                codes,
                sorted(failed),
                type=ERR_ENQUEUE_FAILED,
            )
        return c.EnqueueResult(sent)

    def _send_batch(self, keys: tuple[str, ...]) -> tuple[int, dict[str, str]]:
        """Send up to 10 keys as one batch, resending its failed entries: (successful, key -> code)."""
        assert self.p.sqs is not None and self.p.queue_url is not None
        pending = {str(i): key for i, key in enumerate(keys)}
        codes: dict[str, str] = {}
        delivered = 0
        for attempt in range(_SEND_ATTEMPTS):
            if attempt:
                time.sleep(_RESEND_DELAY_S * 2 ** (attempt - 1))
            resp = self.p.sqs.send_message_batch(
                QueueUrl=self.p.queue_url,
                Entries=[
                    {"Id": i, "MessageBody": json.dumps(s3_event(self.p.bucket, key))}
                    for i, key in pending.items()
                ],
            )
            for entry in resp.get("Successful", []):
                if pending.pop(entry["Id"], None) is not None:
                    delivered += 1
            codes = {f["Id"]: str(f.get("Code") or "unknown") for f in resp.get("Failed", [])}
            # An entry in neither list was not acknowledged: it is resent too.
            if not pending:
                break
            log.warning(
                "replay batch: %d of %d entries failed (codes %s), attempt %d",
                len(pending),
                len(keys),
                ",".join(sorted(set(codes.values()))) or "none",
                attempt + 1,
            )
        return delivered, {key: codes.get(i, "not_acknowledged") for i, key in pending.items()}


def s3_event(bucket: str, key: str) -> dict[str, Any]:
    """The S3 ObjectCreated notification shape the bridge parses (key URL-encoded like S3 does)."""
    from urllib.parse import quote_plus

    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Replay",
                "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(key)}},
            }
        ]
    }
