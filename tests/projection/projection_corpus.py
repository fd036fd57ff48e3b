"""Test-side I/O: build projection inputs from a local profile directory, as the projector does from S3.

Reads decoded meta and data segments by sequence, plans and runs the walk-back with the
projection core's own functions, and backs the value lookup with the profile's CAS.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from activities.projection.model import (
    PROBLEM_CORRUPT,
    PROBLEM_MISSING,
    DataRead,
    ExecutionInput,
    MetaProblem,
    ResolvedValue,
)
from activities.projection.walk import find_root_context, plan_meta_walk
from formats import cas
from formats import meta_segment as ms
from formats.data_segment import DataSegment, decode_data_segment
from formats.errors import FormatError
from formats.function_table import FunctionTable, decode_function_table
from formats.profile_store import layout
from formats.segment_names import Plane
from formats.synth import GroundTruth, SynthConfig


@dataclass
class Stream:
    root: Path
    euid: bytes
    broken_meta: set[int] = field(default_factory=set)
    broken_data: set[int] = field(default_factory=set)
    _meta: dict[int, ms.MetaSegment | None] = field(default_factory=dict)
    _data: dict[int, DataSegment | None] = field(default_factory=dict)

    def meta(self, seq: int) -> ms.MetaSegment | None:
        if seq in self.broken_meta:
            return None
        if seq not in self._meta:
            path = layout.segment_path(self.root, self.euid, Plane.META, seq)
            try:
                self._meta[seq] = ms.decode_meta_segment(
                    path.read_bytes(), file=str(path), expected_euid=self.euid, expected_sequence=seq
                )
            except (OSError, FormatError):
                self._meta[seq] = None
        return self._meta[seq]

    def data(self, seq: int) -> DataSegment | None:
        if seq in self.broken_data:
            return None
        if seq not in self._data:
            path = layout.segment_path(self.root, self.euid, Plane.DATA, seq)
            try:
                self._data[seq] = decode_data_segment(
                    path.read_bytes(), file=str(path), expected_euid=self.euid, expected_sequence=seq
                )
            except (OSError, FormatError):
                self._data[seq] = None
        return self._data[seq]

    def meta_sequences(self) -> list[int]:
        d = layout.plane_dir(self.root, self.euid, Plane.META)
        return sorted(int(p.name.split(".")[0]) for p in d.iterdir() if p.name.endswith(".bamlmeta"))

    def walk(self, start: int) -> Iterator[ms.MetaSegment | MetaProblem]:
        for seq in plan_meta_walk(start):
            seg = self.meta(seq)
            yield seg if seg is not None else MetaProblem(seq, PROBLEM_MISSING)

    def stream_started(self) -> ms.StreamStarted | None:
        first = self.meta(1)
        if first is None or not first.records or not isinstance(first.records[0], ms.StreamStarted):
            return None
        return first.records[0]

    def table(self, cid: bytes | None) -> FunctionTable | None:
        if cid is None:
            return None
        path = layout.cas_path(self.root, cid)
        obj = cas.decode_cas_object(path.read_bytes(), expected_cid=cid)
        return decode_function_table(obj.body)

    def data_reads(self, root_bytes: bytes, seqs: range | list[int]) -> tuple[DataRead, ...]:
        reads = []
        for seq in seqs:
            seg = self.data(seq)
            if seg is None:
                missing = not layout.segment_path(self.root, self.euid, Plane.DATA, seq).exists()
                reads.append(DataRead(seq, None, PROBLEM_MISSING if missing else PROBLEM_CORRUPT))
                continue
            group = next((g for g in seg.groups if g.root.to_bytes() == root_bytes), None)
            reads.append(DataRead(seq, group))
        return tuple(reads)

    def ended_inputs(self) -> list[ExecutionInput]:
        """One input per RootEnded in the stream, built the way the projector builds it."""
        out = []
        started = self.stream_started()
        for seq in self.meta_sequences():
            seg = self.meta(seq)
            if seg is None:
                continue
            for rec in seg.records:
                if isinstance(rec, ms.RootEnded):
                    out.append(self.input_for(seq, rec, started))
        return out

    def input_for(self, seq: int, rec: ms.RootEnded, started: ms.StreamStarted | None) -> ExecutionInput:
        ctx = find_root_context(
            self.walk(seq), rec.root, need_root_started=not rec.root_started_lost, stream_started=started
        )
        seqs = range(rec.data_first_seq, rec.data_last_seq + 1) if rec.data_segment_count else range(0)
        engine = ctx.engine_started
        return ExecutionInput(
            process_euid=self.euid,
            stream_started=ctx.stream_started,
            context=ctx,
            root_ended=rec,
            data=self.data_reads(rec.root.to_bytes(), seqs),
            function_table=self.table(engine.function_table_cid if engine else None),
            root_ended_seq=seq,
        )

    def abandoned_inputs(self) -> list[ExecutionInput]:
        """Inputs for the sweep: roots with a RootStarted and no RootEnded, all data segments scanned."""
        started_by_root: dict[bytes, tuple[int, ms.RootStarted]] = {}
        ended: set[bytes] = set()
        seqs = self.meta_sequences()
        for seq in seqs:
            seg = self.meta(seq)
            for rec in seg.records if seg else ():
                if isinstance(rec, ms.RootStarted):
                    started_by_root[rec.root.to_bytes()] = (seq, rec)
                elif isinstance(rec, ms.RootEnded):
                    ended.add(rec.root.to_bytes())
        data_dir = layout.plane_dir(self.root, self.euid, Plane.DATA)
        data_seqs = sorted(
            int(p.name.split(".")[0]) for p in data_dir.iterdir() if p.name.endswith(".bamldata")
        )
        out = []
        for root_bytes, (seq, rs) in sorted(started_by_root.items()):
            if root_bytes in ended:
                continue
            ctx = find_root_context(self.walk(seq), rs.root, stream_started=self.stream_started())
            reads = tuple(r for r in self.data_reads(root_bytes, data_seqs) if r.group is not None)
            engine = ctx.engine_started
            out.append(
                ExecutionInput(
                    process_euid=self.euid,
                    stream_started=ctx.stream_started,
                    context=ctx,
                    root_ended=None,
                    data=reads,
                    function_table=self.table(engine.function_table_cid if engine else None),
                )
            )
        return out


def streams(root: Path) -> list[Stream]:
    d = root / layout.STREAMS_DIR
    return [
        Stream(root, bytes.fromhex(p.name)) for p in sorted(d.iterdir()) if layout.is_euid_dir_name(p.name)
    ]


class CasLookup:
    """value_lookup over the profile's CAS; ``hidden`` CIDs behave as not yet ingested."""

    def __init__(self, root: Path, hidden: set[bytes] | None = None) -> None:
        self.root = root
        self.hidden = hidden or set()
        self.calls: list[bytes] = []

    def __call__(self, cid: bytes) -> ResolvedValue | None:
        self.calls.append(cid)
        if cid in self.hidden:
            return None
        path = layout.cas_path(self.root, cid)
        if not path.exists():
            return None
        obj = cas.decode_cas_object(path.read_bytes(), expected_cid=cid)
        return ResolvedValue(obj.body, obj.codec, locator=f"cas/values/{cid.hex()[:2]}/{cid.hex()}")


# Outcomes, long executions (several data segments), lost and large values, two engines per
# process and unfinished executions, all in one small corpus.
CORPUS_CONFIG = SynthConfig(
    seed=7,
    processes=2,
    engines_per_process=2,
    executions=120,
    p_failed=0.15,
    p_cancelled=0.05,
    p_panicked=0.05,
    p_long=0.25,
    p_large_value=0.02,
    p_too_large_value=0.03,
    unfinished_per_process=2,
)


@dataclass
class Corpus:
    root: Path
    truth: GroundTruth
    streams: list[Stream]
