"""Reading a synthetic stream back from disk, independently of the synthesizer's own bookkeeping.

The damage and cycle tests compare the synthesizer's truth with what these helpers find in the
files: which meta objects remain, where each RootStarted/RootEnded sits, which data segments
are missing or fail verification.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from formats import meta_segment as ms
from formats.data_segment import DataSegment, decode_data_segment
from formats.errors import FormatError
from formats.reader_rules import index_gaps, index_state


@dataclass
class DiskStream:
    euid: bytes
    meta: dict[int, ms.MetaSegment] = field(default_factory=dict)
    data: dict[int, DataSegment] = field(default_factory=dict)
    data_files: set[int] = field(default_factory=set)  # every data file present, valid or not
    started: dict[str, tuple[int, ms.RootStarted]] = field(
        default_factory=dict
    )  # execution id -> (seq, record)
    ended: dict[str, tuple[int, ms.RootEnded]] = field(default_factory=dict)
    engines: list[tuple[int, ms.EngineStarted]] = field(default_factory=list)  # (meta seq, record)

    @property
    def meta_max(self) -> int:
        return max(self.meta)

    @property
    def data_max(self) -> int:
        return max(self.data_files)

    @property
    def gaps(self) -> list[int]:
        return index_gaps(self.meta_max, self.meta, self.meta, alive=False)

    def listed(self) -> set[str]:
        return set(self.started) | set(self.ended)

    def data_issues(self, execution_id: str) -> list[str]:
        end = self.ended.get(execution_id)
        if end is not None:
            rec = end[1]
            seqs = range(rec.data_first_seq, rec.data_last_seq + 1) if rec.data_segment_count else range(0)
        else:
            lower = self.meta[self.started[execution_id][0]].data_high_water + 1
            seqs = range(lower, self.data_max + 1)
        issues = []
        for seq in seqs:
            if seq not in self.data_files:
                issues.append(f"missing_data_segment {seq}")
            elif seq not in self.data:
                issues.append(f"corrupt_data_segment {seq}")
        return issues

    def index_state(self, execution_id: str) -> str:
        start = self.started.get(execution_id)
        end = self.ended.get(execution_id)
        return index_state(
            started_seq=start[0] if start else None,
            ended_seq=end[0] if end else None,
            root_started_lost=bool(end and end[1].root_started_lost),
            gaps=self.gaps,
            data_intact=not self.data_issues(execution_id),
        )


def read_stream(root: Path, stream: str) -> DiskStream:
    sdir = root / "streams" / stream
    disk = DiskStream(bytes.fromhex(stream))
    for path in (sdir / "meta").iterdir():
        seq = int(path.name.split(".")[0])
        seg = ms.decode_meta_segment(path.read_bytes(), expected_euid=disk.euid, expected_sequence=seq)
        disk.meta[seq] = seg
        for record in seg.records:
            if isinstance(record, ms.RootStarted):
                disk.started[record.root.execution_id] = (seq, record)
            elif isinstance(record, ms.RootEnded):
                disk.ended[record.root.execution_id] = (seq, record)
            elif isinstance(record, ms.EngineStarted):
                disk.engines.append((seq, record))
    disk.engines.sort(key=lambda e: e[0])
    for path in (sdir / "data").iterdir():
        seq = int(path.name.split(".")[0])
        disk.data_files.add(seq)
        with contextlib.suppress(FormatError):  # a corrupt segment is present but not readable
            disk.data[seq] = decode_data_segment(
                path.read_bytes(), expected_euid=disk.euid, expected_sequence=seq, deep=True
            )
    return disk
