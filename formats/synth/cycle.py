"""The write cycle of one synthetic stream, as the real profiler's stream writer runs it.

Facts from ``bex_prof_store/src/prof/backend/writer.rs`` (read for facts only):

* a cycle runs when pending work is ``publish_interval`` old (default 1 s), or on flush;
* each cycle writes, in order: one meta segment with the pending ``StreamStarted``
  (first cycle of a stream only), ``EngineStarted`` and ``RootStarted`` records; then
  the pending data groups in root-ThreadRef order, packed into data segments up to
  ``segment_target_bytes`` (a single oversize group goes alone); then one meta segment
  with the ``RootEnded`` records whose groups are all on disk, each naming the data
  sequence range ``[first, last]`` and segment count that hold the execution;
* one execution has at most one group per data segment: its facts from one cycle are
  merged.

* each meta object's header carries ``data_high_water``: the data high-water when it is
  encoded, so meta-pre carries the high-water before the cycle's data and meta-post the one
  after it;
* a meta-pre batch that is Lost does not consume its sequence; its RootStarted records are
  remembered, and each of their RootEnded records carries flag bit 0 (``root_started_lost``).

The simulation buckets each fact by the publish interval its timestamp falls in, and
publishes a bucket once no later execution can add to it. Timestamps are simulated, so
bulk corpora are byte-identical per seed; live mode feeds the same machine in real time.
Size is measured on encoded groups (the real writer counts accounted reservation bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats import meta_segment as ms
from formats.data_segment import DataGroup
from formats.ids import ThreadRef
from formats.synth import facts as fx
from formats.synth.config import SynthConfig
from formats.synth.placement import MetaEntry, Placement
from formats.synth.plan import ExecutionPlan
from formats.synth.reading import StreamView, judge
from formats.synth.truth import GroundTruth

if TYPE_CHECKING:
    from formats.profile_store.writer import StreamWriter


@dataclass
class _Bucket:
    meta_pre: list[ms.MetaRecord] = field(default_factory=list)
    groups: dict[bytes, fx.GroupAcc] = field(default_factory=dict)
    ended: list[bytes] = field(default_factory=list)  # root ThreadRef bytes, in end order


class StreamSim:
    """One stream: buckets facts by publish interval and writes each bucket as one cycle.

    With ``defer_truth`` the truth is not judged as executions end: every placement is kept
    (``placements``, ``meta_log``) so damage can be applied to the closed stream first and the
    truth judged from what remains (:meth:`judge_all`).
    """

    def __init__(
        self,
        writer: StreamWriter,
        euid: bytes,
        config: SynthConfig,
        program: fx.Program,
        truth: GroundTruth | None,
        *,
        os_pid: int = 4242,
        defer_truth: bool = False,
    ) -> None:
        self.writer = writer
        self.euid = euid
        self.config = config
        self.program = program
        self.truth = truth
        self.interval = config.publish_interval_ns
        self.defer_truth = defer_truth
        self.meta_seq = 0
        self.data_seq = 0
        self._buckets: dict[int, _Bucket] = {}
        self._live: dict[bytes, Placement] = {}  # admitted, RootEnded not yet written
        self._engines_started: set[int] = set()
        self._stream_started: ms.StreamStarted | None = ms.StreamStarted(
            os_pid, config.zero_unix_ns, config.baml_version, config.os_arch
        )
        self.placements: list[Placement] = []  # every execution (defer_truth only)
        self.meta_log: list[MetaEntry] = []  # every meta object written (defer_truth only)
        # Set by the caller: the next meta-pre batch holding only RootStarted records is Lost.
        self.lose_next_admitted = False
        self.lost_admitted: list[tuple[bytes, ...]] = []  # roots of each Lost batch
        self.calls = 0
        self.spans = 0

    # -- feeding -----------------------------------------------------------------------------
    def _bucket(self, t_ns: int) -> _Bucket:
        k = t_ns // self.interval
        bucket = self._buckets.get(k)
        if bucket is None:
            bucket = self._buckets[k] = _Bucket()
        return bucket

    @property
    def engines_started(self) -> frozenset[int]:
        return frozenset(self._engines_started)

    def admit(self, plan: ExecutionPlan, *, cutoff_ns: int | None = None) -> None:
        """Add every fact of ``plan``; with ``cutoff_ns`` only those before it (the stream stops)."""
        root = ThreadRef(self.euid, plan.engine_id, plan.thread_id)
        root_bytes = root.to_bytes()
        placement = Placement(plan, root, cutoff_ns)
        self._live[root_bytes] = placement
        if self.defer_truth:
            self.placements.append(placement)
        start = self._bucket(plan.started_ns)
        if plan.engine_id not in self._engines_started:
            # Once per engine, in the same batch as (and before) its first RootStarted.
            self._engines_started.add(plan.engine_id)
            start.meta_pre.append(self.program.engine_started(plan.engine_id))
        start.meta_pre.append(ms.RootStarted(root, plan.started_ns, fx.runtime_id(root)))
        self.calls += len(plan.calls)
        self.spans += sum(1 for c in plan.calls if c.selected)
        for t_ns, item in fx.emissions(plan, root, self.program):
            if cutoff_ns is not None and t_ns > cutoff_ns:
                continue
            bucket = self._bucket(t_ns)
            group = bucket.groups.get(root_bytes)
            if group is None:
                group = bucket.groups[root_bytes] = fx.GroupAcc(root)
            group.add(item)
        if cutoff_ns is None:
            self._bucket(plan.ended_ns).ended.append(root_bytes)
        else:
            plan.finished = False

    def advance(self, now_ns: int) -> None:
        """Publish every bucket that ends at or before ``now_ns``: nothing can join it any more."""
        due = sorted(k for k in self._buckets if (k + 1) * self.interval <= now_ns)
        for k in due:
            self._publish(k, self._buckets.pop(k))

    def finish(self) -> None:
        """Flush everything pending (engine close); judge unfinished executions unless deferred."""
        for k in sorted(self._buckets):
            self._publish(k, self._buckets.pop(k))
        if self.truth is not None and not self.defer_truth:
            for placement in self._live.values():
                self._judge_now(placement)
        self._live.clear()

    # -- one cycle ---------------------------------------------------------------------------
    def _write_meta(self, records: list[ms.MetaRecord]) -> int:
        self.meta_seq += 1
        data = ms.encode_meta_segment(ms.MetaSegment(self.meta_seq, self.euid, self.data_seq, tuple(records)))
        self.writer.write_meta(self.meta_seq, data)
        if self.defer_truth:
            self.meta_log.append(
                MetaEntry(
                    self.meta_seq,
                    self.data_seq,
                    any(isinstance(r, ms.StreamStarted | ms.EngineStarted) for r in records),
                    tuple(r.root.to_bytes() for r in records if isinstance(r, ms.RootStarted)),
                    tuple(r.root.to_bytes() for r in records if isinstance(r, ms.RootEnded)),
                )
            )
        if self.truth is not None:
            self.truth.meta_segments += 1
            self.truth.meta_bytes += len(data)
        return self.meta_seq

    def _publish(self, k: int, bucket: _Bucket) -> None:
        # Step 1: meta-pre (StreamStarted first, then EngineStarted and RootStarted in admission order).
        pre = bucket.meta_pre
        if self._stream_started is not None and (pre or bucket.groups or bucket.ended):
            pre = [self._stream_started, *pre]
            self._stream_started = None
        if pre and self.lose_next_admitted and all(isinstance(r, ms.RootStarted) for r in pre):
            # The batch is Lost: no file, no sequence consumed; its RootEnded records say so.
            self.lose_next_admitted = False
            lost = tuple(r.root.to_bytes() for r in pre if isinstance(r, ms.RootStarted))
            for root_bytes in lost:
                self._live[root_bytes].root_started_lost = True
            self.lost_admitted.append(lost)
        elif pre:
            high_water = self.data_seq
            seq = self._write_meta(pre)
            for r in pre:
                if isinstance(r, ms.RootStarted):
                    placement = self._live[r.root.to_bytes()]
                    placement.started_seq, placement.started_high_water = seq, high_water
        # Step 2: data, in root ThreadRef order, packed up to the segment target.
        target = self.config.segment_target_bytes
        batch: list[tuple[bytes, DataGroup]] = []
        batch_bytes = 0
        for root_bytes in sorted(bucket.groups):
            group = bucket.groups[root_bytes].build()
            size = fx.group_size(group)
            if batch and batch_bytes + size > target:
                self._write_data(k, batch)
                batch, batch_bytes = [], 0
            batch.append((root_bytes, group))
            batch_bytes += size
            if batch_bytes > target:  # a single oversize group goes alone
                self._write_data(k, batch)
                batch, batch_bytes = [], 0
        if batch:
            self._write_data(k, batch)
        # Step 3: meta-post, RootEnded for executions whose groups are all on disk.
        if bucket.ended:
            records: list[ms.MetaRecord] = []
            ended = [self._live.pop(root_bytes) for root_bytes in bucket.ended]
            for p in ended:
                plan = p.plan
                records.append(
                    ms.RootEnded(
                        p.root,
                        plan.ended_ns,
                        fx.END_STATUS[plan.outcome],
                        ms.ROOT_ENDED_FLAG_ROOT_STARTED_LOST if p.root_started_lost else 0,
                        p.first,
                        p.last,
                        p.count,
                        fx.health(plan),
                    )
                )
            seq = self._write_meta(records)
            for p in ended:
                p.ended_seq = seq
                if self.truth is not None and not self.defer_truth:
                    self._judge_now(p)

    def _write_data(self, k: int, batch: list[tuple[bytes, DataGroup]]) -> None:
        self.data_seq += 1
        data = fx.encode_data_segment(self.data_seq, self.euid, [g for _, g in batch])
        self.writer.write_data(self.data_seq, data)
        for root_bytes, _ in batch:
            p = self._live[root_bytes]
            if p.count == 0:
                p.first = self.data_seq
            p.last = self.data_seq
            p.count += 1
            p.segments[k] = self.data_seq
        if self.truth is not None:
            self.truth.data_segments += 1
            self.truth.data_bytes += len(data)

    # -- truth -------------------------------------------------------------------------------
    def _judge_now(self, p: Placement) -> None:
        """An undamaged stream: what the reader will find is known as soon as the records are out."""
        assert self.truth is not None
        self._append(p, StreamView(self.meta_seq, self.data_seq))

    def judge_all(self, view: StreamView) -> None:
        """Deferred truth: judge every execution against what remains on disk (``view``)."""
        for p in self.placements:
            self._append(p, view)

    def _append(self, p: Placement, view: StreamView) -> None:
        assert self.truth is not None
        found = judge(
            p,
            view,
            self.program,
            stream=self.euid.hex(),
            zero_unix_ns=self.config.zero_unix_ns,
            interval_ns=self.interval,
        )
        if found is None:
            self.truth.orphans.append(p.root.execution_id)
        else:
            self.truth.executions.append(found)
