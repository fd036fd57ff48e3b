"""Damage modes: what a disk, a crash or a failed publication leaves of a stream.

Two happen while writing, as the real writer meets them (:mod:`formats.synth.generator`):
``lost_admitted_batch`` (a meta-pre batch is Lost: no file, no sequence consumed, flag bit 0
on each of its RootEnded records) and ``no_function_table`` (an EngineStarted without
``function_table_cid``, as when the table's CAS publication failed). The others are applied
to the closed stream, after writing:

* ``missing_meta``: an interior meta-post object (RootEnded records only) is deleted; one
  whose deletion leaves an execution's RootStarted before it and its RootEnded after it is
  preferred, so the gap shadows that execution;
* ``lost_root_started``: an interior meta-pre object holding RootStarted records (and no
  StreamStarted or EngineStarted) of executions that ended is deleted;
* ``missing_data``: a data segment inside the range of an execution that spans several
  segments is deleted;
* ``corrupt_data``: another such segment gets one byte flipped before its trailer, so its
  SHA-256 no longer verifies.

Targets sit near the middle of the stream and never at its newest sequence, so the reader's
high-water marks do not move. :func:`choose` is pure; :func:`apply` touches the files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats.profile_store import layout
from formats.segment_names import Plane
from formats.synth.config import (
    CORRUPT_DATA,
    LOST_ROOT_STARTED,
    MISSING_DATA,
    MISSING_META,
    SynthConfigError,
)
from formats.synth.placement import MetaEntry, Placement

TRAILER_LEN = 32
POST_WRITE_MODES = (MISSING_META, LOST_ROOT_STARTED, MISSING_DATA, CORRUPT_DATA)


@dataclass(frozen=True)
class DamagePlan:
    missing_meta: frozenset[int] = frozenset()
    missing_data: frozenset[int] = frozenset()
    corrupt_data: frozenset[int] = frozenset()
    reports: tuple[dict[str, Any], ...] = field(default=())


def _nearest(candidates: Iterable[int], middle: float, prefer: set[int] | None = None) -> int | None:
    preferred = set(prefer or ())
    ranked = sorted(candidates, key=lambda s: (s not in preferred, abs(s - middle), s))
    return ranked[0] if ranked else None


def _none_fits(mode: str) -> SynthConfigError:
    return SynthConfigError(f"damage {mode}: no target fits this stream (write more executions)")


def choose(
    modes: Iterable[str],
    meta_log: list[MetaEntry],
    placements: list[Placement],
    data_max: int,
    *,
    stream: str,
) -> DamagePlan:
    """Pick each post-write mode's target in one closed stream (pure)."""
    wanted = set(modes)
    meta_max = len(meta_log)
    started_at = {r: m.seq for m in meta_log for r in m.started}
    ended_at = {r: m.seq for m in meta_log for r in m.ended}
    middle = meta_max / 2
    missing_meta: set[int] = set()
    reports: list[dict[str, Any]] = []

    if LOST_ROOT_STARTED in wanted:
        fits = [
            m.seq
            for m in meta_log
            if m.started and not m.headers and 1 < m.seq < meta_max and any(r in ended_at for r in m.started)
        ]
        seq = _nearest(fits, middle)
        if seq is None:
            raise _none_fits(LOST_ROOT_STARTED)
        missing_meta.add(seq)
        roots = [r.hex() for r in meta_log[seq - 1].started]
        reports.append({"mode": LOST_ROOT_STARTED, "stream": stream, "meta_seq": seq, "roots": roots})

    if MISSING_META in wanted:
        fits = [
            m.seq
            for m in meta_log
            if m.ended
            and not m.started
            and not m.headers
            and 1 < m.seq < meta_max
            and m.seq not in missing_meta
        ]
        straddled = {s for s in fits if any(started_at.get(r, s) < s < e for r, e in ended_at.items())}
        seq = _nearest(fits, middle, straddled)
        if seq is None:
            raise _none_fits(MISSING_META)
        missing_meta.add(seq)
        roots = [r.hex() for r in meta_log[seq - 1].ended]
        reports.append({"mode": MISSING_META, "stream": stream, "meta_seq": seq, "roots": roots})

    # Data targets lie inside ranges a reader still uses: executions whose RootEnded remains.
    ranges = [
        (p.first, p.last)
        for p in placements
        if p.count and p.ended_seq is not None and p.ended_seq not in missing_meta
    ]
    inside = {s for first, last in ranges for s in range(first, last + 1) if s < data_max}
    multi = {s for first, last in ranges if last > first for s in range(first, last + 1) if s < data_max}
    data_middle = data_max / 2
    taken: dict[str, int] = {}
    for mode in (MISSING_DATA, CORRUPT_DATA):
        if mode not in wanted:
            continue
        seq = _nearest(inside - set(taken.values()), data_middle, multi)
        if seq is None:
            raise _none_fits(mode)
        taken[mode] = seq
        reports.append({"mode": mode, "stream": stream, "data_seq": seq})

    return DamagePlan(
        missing_meta=frozenset(missing_meta),
        missing_data=frozenset([taken[MISSING_DATA]] if MISSING_DATA in taken else []),
        corrupt_data=frozenset([taken[CORRUPT_DATA]] if CORRUPT_DATA in taken else []),
        reports=tuple(reports),
    )


def flip_byte(data: bytes) -> bytes:
    """One byte of the body inverted: the file keeps its length, its trailer no longer verifies."""
    i = max(0, (len(data) - TRAILER_LEN) // 2)
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]


def apply(root: Path, euid: bytes, plan: DamagePlan) -> None:
    """Delete and corrupt the planned files of one closed stream."""
    for seq in sorted(plan.missing_meta):
        layout.segment_path(root, euid, Plane.META, seq).unlink()
    for seq in sorted(plan.missing_data):
        layout.segment_path(root, euid, Plane.DATA, seq).unlink()
    for seq in sorted(plan.corrupt_data):
        path = layout.segment_path(root, euid, Plane.DATA, seq)
        path.write_bytes(flip_byte(path.read_bytes()))
