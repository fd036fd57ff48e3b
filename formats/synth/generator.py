"""The synthetic profiler: writes real-format streams into a profile directory.

Two modes over the same write cycle (:mod:`formats.synth.cycle`):

* bulk (:func:`synthesize`): simulated time, as fast as the disk allows, byte-identical
  for the same seed and config;
* live (:class:`LiveSynth`): a daemon thread starting executions at
  ``rate_per_second`` in real time and publishing every ``publish_interval``, for
  end-to-end runs; ``start()``/``stop()`` or a ``with`` block.

Both return a :class:`~formats.synth.truth.GroundTruth`, and write it as JSON lines when
given ``truth_path``. Bulk mode also runs the long mode (``min_meta_objects``, a late engine)
and the damage modes (:mod:`formats.synth.damage`), which hit the stream of process 0; with
damage the truth is judged once the stream is closed and damaged.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from types import TracebackType

from formats.ids import uuid7_bytes
from formats.profile_store import ProfileStore, StreamWriter
from formats.synth import damage
from formats.synth.config import (
    LOST_ADMITTED_BATCH,
    NO_FUNCTION_TABLE,
    NS_PER_S,
    SynthConfig,
    SynthConfigError,
)
from formats.synth.cycle import StreamSim
from formats.synth.facts import Program
from formats.synth.plan import ExecutionPlan, Planner
from formats.synth.reading import StreamView
from formats.synth.truth import GroundTruth
from formats.synth.values import ValuePool


def stream_euid(config: SynthConfig, process: int) -> bytes:
    """Deterministic UUIDv7 per (seed, process): the stream directory name."""
    rng = random.Random(f"euid/{config.seed}/{process}")
    return uuid7_bytes(config.zero_unix_ns // 1_000_000 + process, rng.randbytes(10))


class _Stream:
    """One process's stream: planner, simulation and the CAS objects it already wrote."""

    def __init__(
        self,
        store: ProfileStore,
        config: SynthConfig,
        pool: ValuePool,
        process: int,
        truth: GroundTruth | None,
    ):
        self.config = config
        self.process = process
        self.euid = stream_euid(config, process)
        self.rng = random.Random(f"stream/{config.seed}/{process}")
        self.planner = Planner(config, pool, self.rng)
        # Damage hits process 0 only, so the other streams stay byte-identical to an undamaged run.
        self.damage = config.damage if process == 0 else ()
        tableless = (
            frozenset([config.engines_per_process]) if NO_FUNCTION_TABLE in self.damage else frozenset()
        )
        self.program = Program(config.baml_version, process % config.builds, tableless_engines=tableless)
        self.writer: StreamWriter = store.open_stream(self.euid)
        self.sim = StreamSim(
            self.writer,
            self.euid,
            config,
            self.program,
            truth,
            os_pid=10_000 + process,
            defer_truth=bool(config.damage),
        )
        self.next_thread: dict[int, int] = {}
        self.started = 0
        self._written: set[bytes] = set()
        self.cas_objects = 0
        # The table is in the CAS before any EngineStarted names it.
        self.writer.put_cas(self.program.table_cas_bytes)
        self.cas_objects += 1

    def _engines(self) -> int:
        """Engines running now: the last one waits for ``late_engine_after_meta`` meta objects."""
        n = self.config.engines_per_process
        late = self.config.late_engine_after_meta
        return n - 1 if late and self.sim.meta_seq < late else n

    def new_plan(self, started_ns: int) -> ExecutionPlan:
        engine = self.started % self._engines() + 1
        thread = self.next_thread.get(engine, 0) + 1
        self.next_thread[engine] = thread
        self.started += 1
        return self.planner.plan(engine, thread, started_ns)

    def admit(self, plan: ExecutionPlan, *, cutoff_ns: int | None = None) -> None:
        # Values reach the CAS before the data segment that references them.
        for call in plan.calls:
            if cutoff_ns is not None and call.started_ns > cutoff_ns:
                continue
            for ref in call.values:
                if ref.value is not None and ref.value.cid not in self._written:
                    if cutoff_ns is not None and ref.role != "input" and call.ended_ns > cutoff_ns:
                        continue
                    self.writer.put_cas(ref.value.cas_bytes)
                    self._written.add(ref.value.cid)
                    self.cas_objects += 1
        self.sim.admit(plan, cutoff_ns=cutoff_ns)

    def close(self) -> None:
        self.writer.close()

    def damage_and_judge(self, root: Path, truth: GroundTruth | None) -> None:
        """Deferred truth: apply the post-write damage to the closed stream, then judge what remains."""
        if not self.sim.defer_truth:
            return
        sim = self.sim
        stream = self.euid.hex()
        plan = damage.DamagePlan()
        post = [m for m in self.damage if m in damage.POST_WRITE_MODES]
        if post:
            plan = damage.choose(post, sim.meta_log, sim.placements, sim.data_seq, stream=stream)
            damage.apply(root, self.euid, plan)
        if truth is None:
            return
        if LOST_ADMITTED_BATCH in self.damage:
            if not sim.lost_admitted:
                raise SynthConfigError(f"damage {LOST_ADMITTED_BATCH}: no batch fits (write more executions)")
            roots = [r.hex() for batch in sim.lost_admitted for r in batch]
            truth.damage.append({"mode": LOST_ADMITTED_BATCH, "stream": stream, "roots": roots})
        if NO_FUNCTION_TABLE in self.damage:
            engines = sorted(self.program.tableless_engines & sim.engines_started)
            truth.damage.append({"mode": NO_FUNCTION_TABLE, "stream": stream, "engines": engines})
        truth.damage.extend(plan.reports)
        sim.judge_all(
            StreamView(
                sim.meta_seq,
                sim.data_seq,
                missing_meta=plan.missing_meta,
                missing_data=plan.missing_data,
                corrupt_data=plan.corrupt_data,
            )
        )


def _gap_ns(rng: random.Random, rate: float) -> int:
    return max(1, int(rng.expovariate(rate) * NS_PER_S))


def synthesize(
    root: Path | str, config: SynthConfig, *, truth_path: Path | None = None, keep_truth: bool = True
) -> GroundTruth:
    """Bulk mode: write ``config.executions`` executions spread over ``config.processes`` streams.

    Each stream also gets ``config.unfinished_per_process`` executions that start after
    the others and are still running when the stream stops (no RootEnded). With
    ``config.min_meta_objects`` each stream keeps going until it has that many meta objects.
    """
    root = Path(root)
    store = ProfileStore(root)
    truth = GroundTruth()
    pool = ValuePool(config.seed, config.value_pool_size)
    record = truth if (keep_truth or truth_path is not None) else None
    for process in range(config.processes):
        share = config.executions // config.processes + (
            1 if process < config.executions % config.processes else 0
        )
        stream = _Stream(store, config, pool, process, record)
        try:
            t = _gap_ns(stream.rng, config.rate_per_second)
            last_end = 0
            admitted = 0
            while admitted < share or stream.sim.meta_seq < config.min_meta_objects:
                stream.sim.advance(t)
                plan = stream.new_plan(t)
                stream.admit(plan)
                admitted += 1
                if admitted == max(1, share // 2) and LOST_ADMITTED_BATCH in stream.damage:
                    stream.sim.lose_next_admitted = True  # the next batch of RootStarted records only
                last_end = max(last_end, plan.ended_ns)
                t += _gap_ns(stream.rng, config.rate_per_second)
            stop_ns: int | None = None
            if config.unfinished_per_process:
                t = max(t, last_end)
                plans = []
                for _ in range(config.unfinished_per_process):
                    plans.append(stream.new_plan(t))
                    t += _gap_ns(stream.rng, config.rate_per_second)
                # The stream stops while every one of them is still inside its root call.
                stop_ns = max(p.started_ns for p in plans) + 1
                stop_ns = min([stop_ns, *(p.ended_ns - 1 for p in plans)])
                stop_ns = max(stop_ns, max(p.started_ns for p in plans))
                for plan in plans:
                    stream.sim.advance(plan.started_ns)
                    stream.admit(plan, cutoff_ns=max(stop_ns, plan.started_ns))
            stream.sim.finish()
        finally:
            stream.close()
        stream.damage_and_judge(root, record)
        _tally(truth, stream)
    if truth_path is not None:
        truth.write_jsonl(truth_path, issues=bool(config.damage))
    return truth


def _tally(truth: GroundTruth, stream: _Stream) -> None:
    truth.streams.append(stream.euid.hex())
    truth.calls += stream.sim.calls
    truth.spans += stream.sim.spans
    truth.cas_objects += stream.cas_objects


class LiveSynth:
    """Live mode: one thread per run writing ``config.processes`` streams in real time.

    ``stop()`` flushes every pending cycle (engine close), closes the streams (releasing
    ``stream.lock``) and returns the ground truth. Executions still planned to run past
    the stop are written as finished: their timestamps are simulated ahead of the clock.
    """

    def __init__(
        self,
        root: Path | str,
        config: SynthConfig,
        *,
        truth_path: Path | None = None,
        max_executions: int | None = None,
        tick_s: float = 0.05,
    ) -> None:
        if config.damage:
            raise SynthConfigError("damage modes run in bulk mode only (synthesize)")
        self.config = config.replace(zero_unix_ns=time.time_ns())
        self.root = Path(root)
        self.truth_path = truth_path
        self.truth = GroundTruth()
        self.max_executions = max_executions
        self.tick_s = tick_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self.executions_started = 0

    def start(self) -> LiveSynth:
        if self._thread is not None:
            raise RuntimeError("LiveSynth already started")
        self._thread = threading.Thread(target=self._run, name="baml-synth-live", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        cfg = self.config
        store = ProfileStore(self.root)
        pool = ValuePool(cfg.seed, cfg.value_pool_size)
        streams: list[_Stream] = []
        try:
            streams = [_Stream(store, cfg, pool, p, self.truth) for p in range(cfg.processes)]
            next_start = [_gap_ns(s.rng, cfg.rate_per_second) for s in streams]
            while not self._stop.is_set():
                now = time.time_ns() - cfg.zero_unix_ns
                for i, stream in enumerate(streams):
                    # A loaded disk can leave the writer behind the clock: stop() must not wait for it.
                    while next_start[i] <= now and not self._limit_reached() and not self._stop.is_set():
                        stream.sim.advance(next_start[i])
                        stream.admit(stream.new_plan(next_start[i]))
                        with self._lock:
                            self.executions_started += 1
                        next_start[i] += _gap_ns(stream.rng, cfg.rate_per_second)
                    stream.sim.advance(now)
                self._stop.wait(self.tick_s)
            for stream in streams:
                stream.sim.finish()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            for stream in streams:
                stream.close()
                _tally(self.truth, stream)

    def _limit_reached(self) -> bool:
        return self.max_executions is not None and self.executions_started >= self.max_executions

    def stop(self, timeout: float = 10.0) -> GroundTruth:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"live synth did not stop within {timeout} s")
        if self._error is not None:
            raise self._error
        if self.truth_path is not None:
            self.truth.write_jsonl(self.truth_path)
        return self.truth

    def __enter__(self) -> LiveSynth:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
