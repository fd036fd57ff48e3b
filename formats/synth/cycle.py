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
from formats.synth.plan import ExecutionPlan
from formats.synth.truth import GroundTruth, TruthExecution

if TYPE_CHECKING:
    from formats.profile_store.writer import StreamWriter


@dataclass
class _Bucket:
    meta_pre: list[ms.MetaRecord] = field(default_factory=list)
    groups: dict[bytes, fx.GroupAcc] = field(default_factory=dict)
    ended: list[tuple[ExecutionPlan, int]] = field(default_factory=list)  # (plan, ended_ns)


@dataclass
class _Publication:
    first: int = 0
    last: int = 0
    count: int = 0


class StreamSim:
    """One stream: buckets facts by publish interval and writes each bucket as one cycle."""

    def __init__(
        self,
        writer: StreamWriter,
        euid: bytes,
        config: SynthConfig,
        program: fx.Program,
        truth: GroundTruth | None,
        *,
        os_pid: int = 4242,
    ) -> None:
        self.writer = writer
        self.euid = euid
        self.config = config
        self.program = program
        self.truth = truth
        self.interval = config.publish_interval_ns
        self.meta_seq = 0
        self.data_seq = 0
        self._buckets: dict[int, _Bucket] = {}
        self._pub: dict[bytes, _Publication] = {}
        self._engines_started: set[int] = set()
        self._open_plans: dict[bytes, ExecutionPlan] = {}
        self._stream_started: ms.StreamStarted | None = ms.StreamStarted(
            os_pid, config.zero_unix_ns, config.baml_version, config.os_arch
        )
        self.calls = 0
        self.spans = 0

    # -- feeding -----------------------------------------------------------------------------
    def _bucket(self, t_ns: int) -> _Bucket:
        k = t_ns // self.interval
        bucket = self._buckets.get(k)
        if bucket is None:
            bucket = self._buckets[k] = _Bucket()
        return bucket

    def admit(self, plan: ExecutionPlan, *, cutoff_ns: int | None = None) -> None:
        """Add every fact of ``plan``; with ``cutoff_ns`` only those before it (the stream stops)."""
        root = ThreadRef(self.euid, plan.engine_id, plan.thread_id)
        root_bytes = root.to_bytes()
        start = self._bucket(plan.started_ns)
        if plan.engine_id not in self._engines_started:
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
            self._bucket(plan.ended_ns).ended.append((plan, plan.ended_ns))
        else:
            plan.finished = False
            self._open_plans[root_bytes] = plan

    def advance(self, now_ns: int) -> None:
        """Publish every bucket that ends at or before ``now_ns``: nothing can join it any more."""
        due = sorted(k for k in self._buckets if (k + 1) * self.interval <= now_ns)
        for k in due:
            self._publish(self._buckets.pop(k))

    def finish(self, cutoff_ns: int | None = None) -> None:
        """Flush everything pending (engine close); record the truth of unfinished executions."""
        for k in sorted(self._buckets):
            self._publish(self._buckets.pop(k))
        if self.truth is not None:
            for plan in self._open_plans.values():
                self.truth.executions.append(self._truth(plan, None, cutoff_ns))
        self._open_plans.clear()

    # -- one cycle ---------------------------------------------------------------------------
    def _write_meta(self, records: list[ms.MetaRecord]) -> None:
        self.meta_seq += 1
        data = ms.encode_meta_segment(ms.MetaSegment(self.meta_seq, self.euid, self.data_seq, tuple(records)))
        self.writer.write_meta(self.meta_seq, data)
        if self.truth is not None:
            self.truth.meta_segments += 1
            self.truth.meta_bytes += len(data)

    def _publish(self, bucket: _Bucket) -> None:
        # Step 1: meta-pre.
        pre = bucket.meta_pre
        if self._stream_started is not None and (pre or bucket.groups or bucket.ended):
            pre = [self._stream_started, *pre]
            self._stream_started = None
        if pre:
            self._write_meta(pre)
        # Step 2: data, in root ThreadRef order, packed up to the segment target.
        target = self.config.segment_target_bytes
        batch: list[tuple[bytes, DataGroup]] = []
        batch_bytes = 0
        for root_bytes in sorted(bucket.groups):
            group = bucket.groups[root_bytes].build()
            size = fx.group_size(group)
            if batch and batch_bytes + size > target:
                self._write_data(batch)
                batch, batch_bytes = [], 0
            batch.append((root_bytes, group))
            batch_bytes += size
            if batch_bytes > target:  # a single oversize group goes alone
                self._write_data(batch)
                batch, batch_bytes = [], 0
        if batch:
            self._write_data(batch)
        # Step 3: meta-post, RootEnded for executions whose groups are all on disk.
        if bucket.ended:
            records: list[ms.MetaRecord] = []
            for plan, ended_ns in bucket.ended:
                root = ThreadRef(self.euid, plan.engine_id, plan.thread_id)
                pub = self._pub.pop(root.to_bytes(), _Publication())
                records.append(
                    ms.RootEnded(
                        root,
                        ended_ns,
                        fx.END_STATUS[plan.outcome],
                        0,
                        pub.first,
                        pub.last,
                        pub.count,
                        fx.health(plan),
                    )
                )
                if self.truth is not None:
                    self.truth.executions.append(self._truth(plan, pub, None))
            self._write_meta(records)

    def _write_data(self, batch: list[tuple[bytes, DataGroup]]) -> None:
        self.data_seq += 1
        data = fx.encode_data_segment(self.data_seq, self.euid, [g for _, g in batch])
        self.writer.write_data(self.data_seq, data)
        for root_bytes, _ in batch:
            pub = self._pub.get(root_bytes)
            if pub is None:
                pub = self._pub[root_bytes] = _Publication(first=self.data_seq)
            pub.last = self.data_seq
            pub.count += 1
        if self.truth is not None:
            self.truth.data_segments += 1
            self.truth.data_bytes += len(data)

    # -- truth -------------------------------------------------------------------------------
    def _truth(self, plan: ExecutionPlan, pub: _Publication | None, cutoff_ns: int | None) -> TruthExecution:
        root = ThreadRef(self.euid, plan.engine_id, plan.thread_id)
        zero = self.config.zero_unix_ns
        if pub is None:  # no RootEnded: the range is wherever its groups landed
            open_pub = self._pub.get(root.to_bytes())
            first = open_pub.first if open_pub else None
            last = open_pub.last if open_pub else None
        else:
            first, last = (pub.first, pub.last) if pub.count else (None, None)
        return TruthExecution(
            stream=self.euid.hex(),
            execution_id=root.execution_id,
            status=fx.STATUS_NAME[plan.outcome] if plan.finished else "abandoned",
            index_state="complete" if plan.finished else "no_root_ended",
            started_unix_ns=zero + plan.started_ns,
            ended_unix_ns=zero + plan.ended_ns if plan.finished else None,
            data_first_seq=first,
            data_last_seq=last,
            spans=fx.truth_spans(plan, self.program, cutoff_ns),
        )
