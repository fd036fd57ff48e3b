"""One flush: collect, authorize, upload in the fixed order, then cursor, markers, release, retention.

The order of a flush (guide, "The flush algorithm"):

1. collect (publisher/collect.py);
2. authorize every object, in calls of at most ``max_objects_per_authorize`` per (stream, flush id);
3. PUT tables, large values, packs; then per stream data ascending, then meta ascending. A failed
   table, value or pack stops the segment phase (a meta must never land before what it needs); a
   failed data sequence stops its plane, and a meta waits until its ``data_high_water`` shipped;
4. per stream ``write_cursor``, then ``mark_shipped`` for shipped CAS files, then
   ``release_segments``; 5. retention and disk pressure.

A flush takes at most ``max_flush_objects`` segments. On a backlog (a flush that leaves ``more``)
step 3's meta wave runs on the meta lane while the next flush does steps 1-3 up to its data, and
that next flush runs step 4 for it (docs/publisher.md, "Backlogs").

Outcomes are counted in :class:`publisher.metrics.PublisherMetrics`; nothing is raised to the host
except :class:`ShippingStopped` (401/403/409), which the thread turns into its stopped state.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import ulid

from formats.profile_store import Plane, ProfileStore
from formats.profile_store.errors import StoreError
from formats.upload_wire import AuthorizedObject, AuthorizeRequest, PublisherConfig
from publisher import plan
from publisher.collect import Collected, Collector, PlanePlan, ShipObject
from publisher.metrics import PublisherMetrics
from publisher.settings import PublisherSettings
from publisher.transport import (
    GatewayClient,
    GatewayError,
    GatewayRejected,
    GatewayRetryable,
    GatewayStopped,
    GatewayTooLarge,
    PutOutcome,
    S3Putter,
)

log = logging.getLogger("baml.publisher")

# A PUT that would start this close to ``expires_at`` gets a fresh URL first.
_EXPIRY_MARGIN = dt.timedelta(seconds=5)


_T = TypeVar("_T")
_R = TypeVar("_R")


class _Pools:
    """The flush's worker threads, started on first use and idle (no CPU) between flushes.

    ``cpu``: a few threads compressing and hashing (zstd and hashlib release the GIL).
    ``io``: presigned PUTs and authorize calls side by side over one pooled HTTP client.
    ``close`` ends them; a later flush (``run_once`` after ``close``) starts new ones.
    """

    def __init__(self, cpu_workers: int, io_workers: int) -> None:
        self._cpu_workers = cpu_workers
        self._io_workers = io_workers
        self._cpu: ThreadPoolExecutor | None = None
        self._io: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def cpu(self) -> ThreadPoolExecutor | None:
        if self._cpu_workers <= 1:
            return None
        with self._lock:
            if self._cpu is None:
                self._cpu = ThreadPoolExecutor(self._cpu_workers, thread_name_prefix="baml-publisher-cpu")
            return self._cpu

    def io(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._io is None:
                self._io = ThreadPoolExecutor(self._io_workers, thread_name_prefix="baml-publisher-put")
            return self._io

    def close(self) -> None:
        with self._lock:
            pools, self._cpu, self._io = (self._cpu, self._io), None, None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)


class _PhaseClock:
    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._last
        self._last = now


class ShippingStopped(Exception):
    """The gateway refused the token (401/403/409): stop shipping, keep files, poll config."""


class _ObjectFailed(Exception):
    pass


@dataclass
class FlushReport:
    flush_id: str
    shipped: int = 0
    stored: int = 0
    conflicts: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (reason, what)
    cursors: dict[str, tuple[int, int]] = field(default_factory=dict)  # euid -> (meta, data)
    more: bool = False
    duration_seconds: float = 0.0
    # Wall seconds per step (collect, authorize, put_cas, put_data, put_meta, finalize): where a
    # flush spends its time, for the benchmark and for operators reading a slow flush.
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def merge(self, other: FlushReport) -> None:
        """Add what the previous flush's meta wave and finalize did (pipelined flushes)."""
        self.shipped += other.shipped
        self.stored += other.stored
        self.conflicts.extend(other.conflicts)
        self.failed.extend(other.failed)
        self.cursors.update(other.cursors)
        for name, seconds in other.phases.items():
            self.phases[f"previous_{name}"] = self.phases.get(f"previous_{name}", 0.0) + seconds


@dataclass
class _Tail:
    """A flush whose meta wave runs on the meta lane; finalized by the next flush (or ``drain``)."""

    collected: Collected
    new_cursor: dict[tuple[str, Plane], int]
    done: set[int]
    report: FlushReport
    future: Future[bool] = field(default_factory=Future)


@dataclass
class FlushHooks:
    """Test seams at the crash points the guide names (never used in production)."""

    before_cursor: Callable[[], None] | None = None


class Flusher:
    """Runs flushes for one profile root. Not thread-safe: the publisher thread owns it."""

    def __init__(
        self,
        store: ProfileStore,
        gateway: GatewayClient,
        putter: S3Putter,
        settings: PublisherSettings,
        metrics: PublisherMetrics,
        *,
        hooks: FlushHooks | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.gateway = gateway
        self.putter = putter
        self.settings = settings
        self.metrics = metrics
        self.hooks = hooks or FlushHooks()
        self.blocks = plan.PlaneBlocks(settings.checksum_block_seconds)
        self._pools = _Pools(settings.compress_workers, settings.upload_concurrency)
        self.collector = Collector(
            store,
            self.blocks,
            max_flush_bytes=settings.max_flush_bytes,
            max_flush_objects=settings.max_flush_objects,
            window=2 * max(1, settings.compress_workers),
        )
        self._sleep = sleep
        self._rng = random.Random()
        self._report_lock = threading.Lock()  # PUT workers update the flush report
        self._expiry_due: float | None = 0.0  # epoch seconds; 0: scan at the first flush; None: nothing
        self._expiry_ran: float | None = None  # monotonic
        self._clean_signature: tuple[int, int, int, int] | None = None
        self._clean_at: float = 0.0  # monotonic time of the flush that left nothing to do
        # The meta wave and finalize of the previous flush of a backlog, still running on the
        # meta lane while this flush collects, authorizes and PUTs its data (see ``_ship``).
        self._tail: _Tail | None = None
        self._meta_lane: ThreadPoolExecutor | None = None

    def close(self) -> None:
        try:
            self.drain()
        except Exception:  # already counted by the lane; the host must not see it
            log.warning("publisher: the last flush's meta wave ended in an error")
        finally:
            self._pools.close()
            lane, self._meta_lane = self._meta_lane, None
            if lane is not None:
                lane.shutdown(wait=False)

    def after_fork(self) -> None:
        """A forked child has no pool threads: start fresh ones on demand."""
        self._pools = _Pools(self.settings.compress_workers, self.settings.upload_concurrency)
        self._tail, self._meta_lane = None, None

    def drain(self, report: FlushReport | None = None) -> bool:
        """Finish the previous flush if its meta wave is still running: wait for it, then write its
        cursor, markers and releases, adding what it did to ``report``. True when it shipped every
        meta it planned (so the next flush may start its metas where that one ended). An error in
        its meta wave is raised here (its cursor then stays: what it shipped answers ``stored``)."""
        tail, covered = self._await_metas()
        if tail is not None:
            self._finish(tail, report)
        return covered

    def _await_metas(self) -> tuple[_Tail | None, bool]:
        tail, self._tail = self._tail, None
        self.collector.assumed_starts = {}
        self.collector.in_flight_cas = set()
        if tail is None:
            return None, True
        return tail, tail.future.result()

    def _finish(self, tail: _Tail, report: FlushReport | None) -> None:
        if self.hooks.before_cursor is not None:
            self.hooks.before_cursor()
        t0 = time.monotonic()
        self._finalize(tail.collected, tail.new_cursor, tail.done, tail.report)
        tail.report.phases["finalize"] = time.monotonic() - t0
        if report is not None:
            report.merge(tail.report)

    # ----------------------------------------------------------------------------- entry point

    def flush(self, config: PublisherConfig, *, deadline: float | None = None) -> FlushReport:
        started = time.monotonic()
        deadline = deadline if deadline is not None else started + self.settings.flush_deadline_seconds
        flush_id = str(ulid.ULID())
        report = FlushReport(flush_id)
        # Read before collecting: anything committed after this read changes the ledger again.
        signature = self.store.ledger_signature()
        self._clean_signature = None
        try:
            self.collector.executor = self._pools.cpu()
            collected = self.collector.collect(flush_id, config)
            report.phases["collect"] = time.monotonic() - started
            report.more = collected.more
            for skip in collected.skips:
                self.metrics.count("skipped", skip.reason)
                report.skipped.append((skip.reason, skip.what))
                log.warning("publisher skipped %s: %s (flush %s)", skip.what, skip.reason, flush_id)
            self._gauges(collected)
            if collected.cas_objects or any(pp.objects or pp.selection.skipped for pp in collected.planes):
                self._ship(collected, config, deadline, report)
            else:
                self.drain(report)
            self._retention(config)
            if report.ok and not report.more and self._tail is None and not self.blocks.blocked():
                self._clean_signature, self._clean_at = signature, started
        finally:
            report.duration_seconds = time.monotonic() - started
            self.metrics.time_flush(report.duration_seconds)
            self.metrics.count("flushes", "ok" if report.ok else "partial")
        return report

    def unchanged_since_clean_flush(self, max_age: float) -> bool:
        """True when the last flush left nothing to do, the store's ledger has not changed since that
        flush began (no commit and no release in any process), and it is younger than ``max_age``
        (a backstop: block windows and retention still get their turn). Costs one 48-byte read."""
        if self._clean_signature is None or time.monotonic() - self._clean_at >= max_age:
            return False
        return self.store.ledger_signature() == self._clean_signature

    # ----------------------------------------------------------------------------- shipping

    def _ship(self, c: Collected, config: PublisherConfig, deadline: float, report: FlushReport) -> None:
        """PUT in waves: tables, large values and packs together; then every stream's data segments
        together; then each stream's meta segments in ascending order (streams side by side).

        Within a data plane PUTs overlap, so a later sequence may land before an earlier one that
        failed; the cursor still only covers the unbroken run of successes (the gateway answers
        ``stored`` for the rest next time). A meta waits until the data it names is under the
        cursor, so no meta notification fires before its data (checklist item 12).
        """
        all_objects = [*c.cas_objects, *(o for pp in c.planes for o in pp.objects)]
        clock = _PhaseClock(report.phases)
        auth = self._authorize_all(all_objects, config, deadline)
        clock.lap("authorize")

        done: set[int] = set()  # id(obj) of objects in the bucket (or a reported conflict)
        cas = sorted(c.cas_objects, key=lambda o: plan.upload_sort_key(o.kind, None, o.cid or o.flush_id))
        cas_results = self._deliver_all(cas, auth, deadline, report)
        done.update(id(o) for o, ok in zip(cas, cas_results, strict=True) if ok)
        cas_ok = all(cas_results)
        clock.lap("put_cas")

        new_cursor: dict[tuple[str, Plane], int] = {}
        data_planes = [pp for pp in c.planes if pp.plane is Plane.DATA]
        meta_planes = [pp for pp in c.planes if pp.plane is Plane.META]
        # A failed table, value or pack stops the segment phase: a meta must not land before it.
        data_objects = [o for pp in data_planes for o in pp.objects] if cas_ok else []
        data_results = self._deliver_all(data_objects, auth, deadline, report)
        done.update(id(o) for o, ok in zip(data_objects, data_results, strict=True) if ok)
        clock.lap("put_data")
        for pp in data_planes:
            finished = set(pp.selection.skipped)
            finished.update(o.sequence for o in pp.objects if id(o) in done and o.sequence is not None)
            candidates = sorted([*pp.selection.ship, *pp.selection.skipped])
            new_cursor[(pp.euid, pp.plane)] = plan.advance_cursor(pp.cursor, candidates, finished)

        # Metas land one at a time per stream, ascending, across flushes too: the previous flush's
        # must all be in before this one's start. If it left one out, this flush's metas (collected
        # from where it should have ended) would land past a gap: they wait for the next flush.
        previous, covered = self._await_metas()
        if not covered:
            meta_planes = []
        clock.lap("wait_previous")
        if c.more and self.settings.pipeline_flushes:
            # A backlog: this flush's meta wave runs on the meta lane while the previous flush is
            # finalized here and the next flush collects, authorizes and PUTs its data; the next
            # flush finalizes this one. What it did is reported with the flush that finalizes it.
            assumed = dict(new_cursor)  # data: exact (its wave is done); meta: if the lane ships all
            for pp in meta_planes:
                assumed[(pp.euid, Plane.META)] = max([pp.cursor, *pp.selection.ship, *pp.selection.skipped])
            tail = _Tail(c, new_cursor, done, FlushReport(report.flush_id))
            tail.future = self._lane().submit(
                self._meta_wave, meta_planes, new_cursor, done, auth, deadline, cas_ok, tail.report
            )
            self._tail = tail
            self.collector.assumed_starts = assumed
            self.collector.in_flight_cas = {path for obj in c.cas_objects for path in obj.cas_paths}
            if previous is not None:
                self._finish(previous, report)
            clock.lap("finalize_previous")
            return
        if previous is not None:
            self._finish(previous, report)
        self._meta_wave(meta_planes, new_cursor, done, auth, deadline, cas_ok, report)
        clock.lap("put_meta")
        self._finish(_Tail(c, new_cursor, done, report), None)  # records its "finalize" phase

    def _lane(self) -> ThreadPoolExecutor:
        if self._meta_lane is None:
            self._meta_lane = ThreadPoolExecutor(1, thread_name_prefix="baml-publisher-meta")
        return self._meta_lane

    def _meta_wave(
        self,
        meta_planes: list[PlanePlan],
        new_cursor: dict[tuple[str, Plane], int],
        done: set[int],
        auth: dict[int, AuthorizedObject],
        deadline: float,
        cas_ok: bool,
        report: FlushReport,
    ) -> bool:
        """Each stream's metas one at a time, ascending (streams side by side); records each meta
        plane's new cursor. True when every meta this flush planned shipped."""
        started = time.monotonic()

        def wave(pp: PlanePlan) -> int:
            data_cursor = new_cursor.get((pp.euid, Plane.DATA), pp.cursor)
            return self._ship_meta_plane(pp, auth, deadline, report, done, cas_ok, data_cursor)

        covered = True
        for pp, through in zip(meta_planes, self._map_io(wave, meta_planes), strict=True):
            new_cursor[(pp.euid, pp.plane)] = through
            covered = covered and through >= max([pp.cursor, *pp.selection.ship, *pp.selection.skipped])
        report.phases["put_meta"] = report.phases.get("put_meta", 0.0) + time.monotonic() - started
        return covered

    def _map_io(self, fn: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """``fn`` over ``items`` on the PUT pool (inline for one item); exceptions propagate."""
        if len(items) <= 1 or self.settings.upload_concurrency <= 1:
            return [fn(item) for item in items]
        futures = [self._pools.io().submit(fn, item) for item in items]
        try:
            return [f.result() for f in futures]
        finally:
            for f in futures:
                f.cancel()

    def _deliver_all(
        self,
        objects: list[ShipObject],
        auth: dict[int, AuthorizedObject],
        deadline: float,
        report: FlushReport,
    ) -> list[bool]:
        return self._map_io(lambda o: self._deliver(o, auth.get(id(o)), deadline, report), objects)

    def _ship_meta_plane(
        self,
        pp: PlanePlan,
        auth: dict[int, AuthorizedObject],
        deadline: float,
        report: FlushReport,
        done: set[int],
        cas_ok: bool,
        data_cursor: int,
    ) -> int:
        finished: set[int] = set(pp.selection.skipped)
        if cas_ok:
            for obj in pp.objects:  # ascending: each meta notification follows the previous one
                if not plan.meta_may_ship(obj.data_high_water, data_cursor):
                    self.metrics.count("skipped", "meta_waits_for_data")
                    break
                if not self._deliver(obj, auth.get(id(obj)), deadline, report):
                    break  # never advance, nor PUT later sequences, past a failed one
                done.add(id(obj))
                assert obj.sequence is not None
                finished.add(obj.sequence)
        candidates = sorted([*pp.selection.ship, *pp.selection.skipped])
        return plan.advance_cursor(pp.cursor, candidates, finished)

    def _finalize(
        self, c: Collected, new_cursor: dict[tuple[str, Plane], int], done: set[int], report: FlushReport
    ) -> None:
        cursors: dict[str, tuple[int, int]] = {}
        for euid in sorted({pp.euid for pp in c.planes}):
            old = self.store.read_cursor(euid)
            meta = max(old.meta, new_cursor.get((euid, Plane.META), old.meta))
            data = max(old.data, new_cursor.get((euid, Plane.DATA), old.data))
            cursors[euid] = report.cursors[euid] = (meta, data)
            if (meta, data) != (old.meta, old.data):
                self.store.write_cursor(euid, meta, data)
                log.info("publisher cursor %s meta=%d data=%d (flush %s)", euid, meta, data, c.flush_id)
            for plane, through in ((Plane.META, meta), (Plane.DATA, data)):
                self.blocks.clear(euid, plane.value, below_or_at=through)
        # One lock hold and one directory sync per CAS directory for the whole flush.
        paths = [path for obj in c.cas_objects if id(obj) in done for path in obj.cas_paths]
        if paths:
            try:
                executor = self._pools.io() if self.settings.upload_concurrency > 1 else None
                missing = self.store.mark_shipped_many(paths, executor=executor)
            except StoreError:
                missing = paths
            for _ in missing:
                self.metrics.count("errors", "mark_shipped")  # the file vanished: it re-ships if reused
            self._note_marked(len(paths) - len(missing))
        for euid, (meta, data) in cursors.items():
            for plane, through in ((Plane.DATA, data), (Plane.META, meta)):
                if through:
                    freed = self.store.release_segments(euid, plane, through)
                    if freed:
                        self.metrics.count("bytes_freed", "release", freed)

    def _note_marked(self, count: int) -> None:
        """Values marked now fall due one retention window from now: schedule the next scan."""
        if count and self._expiry_due is None:
            self._expiry_due = time.time() + self._retention_seconds

    _retention_seconds: float = 3600.0

    def _retention(self, config: PublisherConfig) -> None:
        """Expire shipped values when the oldest one is due, scanning at most every
        ``retention_check_seconds`` (capped at half the window, so values leave at most that late).
        Between scans nothing is listed: the scan says when its oldest kept value falls due, and
        values marked later fall due later still."""
        retention = config.shipped_value_retention_seconds
        if retention != self._retention_seconds:
            self._retention_seconds = retention
            self._expiry_due = 0.0  # the window changed: rescan now
        now, mono = time.time(), time.monotonic()
        period = min(self.settings.retention_check_seconds, retention / 2)
        due = self._expiry_due is not None and now >= self._expiry_due
        if due and (self._expiry_ran is None or mono - self._expiry_ran >= period):
            self._expiry_ran = mono
            expiry = self.store.expire_shipped(now, retention)
            self._expiry_due = expiry.next_due
            if expiry.freed:
                self.metrics.count("bytes_freed", "retention", expiry.freed)
        if self.store.disk_pressure():
            freed = self.store.relieve_pressure(time.time())
            if freed:
                self.metrics.count("bytes_freed", "pressure", freed)

    # ----------------------------------------------------------------------------- authorize

    def _authorize_all(
        self, objects: list[ShipObject], config: PublisherConfig, deadline: float
    ) -> dict[int, AuthorizedObject]:
        """Authorize in calls of at most ``max_objects_per_authorize`` per (stream, flush id)."""
        groups: dict[tuple[str, str], list[ShipObject]] = {}
        for obj in objects:
            groups.setdefault((obj.euid, obj.flush_id), []).append(obj)
        batches = [
            (euid, flush_id, [items[i] for i in idx])
            for (euid, flush_id), items in groups.items()
            for idx in plan.chunk(
                list(range(len(items))),
                plan.authorize_chunk_size(
                    len(items), config.max_objects_per_authorize, self.settings.upload_concurrency
                ),
            )
        ]

        def call(batch: tuple[str, str, list[ShipObject]]) -> list[AuthorizedObject | None]:
            euid, flush_id, objs = batch
            try:
                return self._authorize(euid, flush_id, objs, deadline)
            except (GatewayRejected, GatewayRetryable, _ObjectFailed):
                return [None] * len(objs)  # those objects fail this flush and are retried by the next

        out: dict[int, AuthorizedObject] = {}
        for (_, _, objs), answers in zip(batches, self._map_io(call, batches), strict=True):
            for obj, answer in zip(objs, answers, strict=True):
                if answer is not None:
                    out[id(obj)] = answer
        return out

    def _authorize(
        self, euid: str, flush_id: str, batch: list[ShipObject], deadline: float
    ) -> list[AuthorizedObject | None]:
        request = AuthorizeRequest(process_euid=euid, flush_id=flush_id, objects=[o.to_wire() for o in batch])
        attempt = 0
        while True:
            t0 = time.monotonic()
            try:
                response = self.gateway.authorize(request)
            except GatewayStopped as exc:
                self.metrics.count("errors", f"authorize_{exc.status}")
                raise ShippingStopped(str(exc)) from None
            except GatewayTooLarge:
                self.metrics.count("errors", "authorize_413")
                if len(batch) == 1:
                    self.metrics.count("skipped", "oversize_rejected")
                    return [None]
                half = len(batch) // 2
                return self._authorize(euid, flush_id, batch[:half], deadline) + self._authorize(
                    euid, flush_id, batch[half:], deadline
                )
            except GatewayRejected as exc:
                self.metrics.count("errors", f"authorize_rejected_{exc.label}")
                log.error("publisher authorize rejected (%s), flush %s: reported as a bug", exc, flush_id)
                raise
            except GatewayRetryable as exc:
                self.metrics.count("errors", f"authorize_{exc.label}")
                self._backoff(attempt, exc.retry_after, deadline)
                attempt += 1
                continue
            finally:
                self.metrics.time_authorize(time.monotonic() - t0)
            for obj, answer in zip(batch, response.objects, strict=True):
                self.metrics.count("authorize_outcomes", f"{obj.kind}/{answer.state}")
            return list(response.objects)

    def _backoff(self, attempt: int, retry_after: float | None, deadline: float) -> None:
        s = self.settings
        if attempt + 1 >= s.max_attempts_per_object:
            raise _ObjectFailed("attempts exhausted")
        delay = plan.backoff_delay(
            attempt,
            base=s.backoff_base_seconds,
            cap=s.backoff_cap_seconds,
            jitter=s.backoff_jitter,
            rand=self._rng.random(),
        )
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.backoff_cap_seconds))
        if time.monotonic() + delay > deadline:
            raise _ObjectFailed("flush deadline")
        self._sleep(delay)

    # ----------------------------------------------------------------------------- one object

    def _deliver(
        self, obj: ShipObject, answer: AuthorizedObject | None, deadline: float, report: FlushReport
    ) -> bool:
        """PUT one object until it is in the bucket; False when it must wait for the next flush."""
        t0 = time.monotonic()
        try:
            outcome = self._deliver_inner(obj, answer, deadline)
        except _ObjectFailed as exc:
            report.failed.append(obj.label())
            self.metrics.count("errors", f"ship_failed_{obj.kind}")
            log.warning("publisher could not ship %s (%s), flush %s", obj.label(), exc, obj.flush_id)
            return False
        ms = (time.monotonic() - t0) * 1000
        if outcome == "conflict":
            report.conflicts.append(obj.label())
            self.metrics.count("errors", f"conflict_{obj.kind}")
            log.error(
                "publisher conflict on %s, flush %s: the bucket holds different bytes; not overwritten",
                obj.label(),
                obj.flush_id,
            )
        elif outcome == "stored":
            with self._report_lock:
                report.stored += 1
        else:
            with self._report_lock:
                report.shipped += 1
            self.metrics.shipped(obj.kind, obj.size, obj.original_size)
        log.info("publisher %s %s in %.1f ms (flush %s)", outcome, obj.label(), ms, obj.flush_id)
        return True

    def _deliver_inner(self, obj: ShipObject, answer: AuthorizedObject | None, deadline: float) -> str:
        attempt = 0
        expect_stored = False
        while True:
            if answer is None:
                answer = self._reauthorize(obj, deadline)
            if answer.state == "stored":
                return "stored"
            if answer.state == "conflict":
                # A CID names its content: a value or table in place is the same value.
                return "stored" if obj.kind in ("value", "table") else "conflict"
            if expect_stored:
                self.metrics.count("errors", f"expected_stored_{obj.kind}")
            url, headers, expires = answer.upload_url, answer.required_headers, answer.expires_at
            assert url is not None and headers is not None
            if expires is not None and expires.tzinfo is None:
                expires = expires.replace(tzinfo=dt.UTC)
            if expires is not None and expires - _EXPIRY_MARGIN <= dt.datetime.now(dt.UTC):
                answer = None  # a PUT after expires_at needs a new authorization
                continue
            result = self.putter.put(url, dict(headers), obj.body)
            if result.outcome is PutOutcome.CREATED:
                return "shipped"
            self.metrics.count("put_retries", obj.kind)
            if result.outcome is PutOutcome.EXISTS:
                self.metrics.count("put_412", obj.kind)
                expect_stored = True
                answer = None
                continue  # re-authorize at once: the object is there
            if result.outcome is PutOutcome.CHECKSUM:
                self.metrics.count("errors", f"put_checksum_{obj.kind}")
                obj.checksum = ""
                obj.__post_init__()  # recompute from the bytes we send
            if result.outcome is PutOutcome.LOST:
                self.metrics.count("errors", f"put_lost_{obj.kind}")
                expect_stored = True
            self._backoff(attempt, result.retry_after, deadline)
            attempt += 1
            answer = None if result.outcome is not PutOutcome.RETRY else answer

    def _reauthorize(self, obj: ShipObject, deadline: float) -> AuthorizedObject:
        try:
            answers = self._authorize(obj.euid, obj.flush_id, [obj], deadline)
        except (GatewayRejected, GatewayRetryable) as exc:
            raise _ObjectFailed(f"re-authorize: {type(exc).__name__}") from None
        if answers[0] is None:
            raise _ObjectFailed("oversize")
        return answers[0]

    # ----------------------------------------------------------------------------- gauges

    def _gauges(self, c: Collected) -> None:
        pending: dict[str, int] = {"meta": 0, "data": 0}
        oldest: dict[str, float] = {}
        now = time.time()
        for pp in c.planes:
            pending[pp.plane.value] += max(0, pp.high_water - pp.cursor)
            if pp.oldest_unshipped_mtime is not None:
                age = max(0.0, now - pp.oldest_unshipped_mtime)
                oldest[pp.plane.value] = max(oldest.get(pp.plane.value, 0.0), age)
        self.metrics.set_gauges(
            pending_segments=pending,
            pending_values=c.pending_values,
            pending_tables=c.pending_tables,
            oldest_age=oldest,
        )


def is_gateway_error(exc: BaseException) -> bool:
    return isinstance(exc, GatewayError)


__all__ = ["FlushHooks", "FlushReport", "Flusher", "Path", "ShippingStopped"]
