"""Collect one flush from the profile store: read, verify, compress, checksum, build packs.

Reads only what the guide allows: a segment's magic, version, sequence and euid (plus the meta
header's ``data_high_water``, which gates meta PUTs), a CAS header's version, codec and CID, and
every file's trailing SHA-256. Payloads are never parsed and bytes are never changed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from formats import cas
from formats.errors import FormatError, UnsupportedVersionError
from formats.integrity import verify_trailer
from formats.profile_store import Plane, ProfileStore
from formats.profile_store.cursor import Cursor
from formats.profile_store.store import CasFile
from formats.segment_names import read_segment_header
from formats.upload_wire import (
    CasObject,
    ObjectKind,
    PackObject,
    PublisherConfig,
    SegmentObject,
)
from formats.value_pack import build_pack, pack_flush_ids
from formats.zstd_frame import compress_object
from publisher import plan
from publisher.cas_scan import PendingCasIndex
from publisher.pipeline import ordered_map
from publisher.plan import SegmentVerdict

_META_DATA_HIGH_WATER = struct.Struct(">Q")
_META_DATA_HIGH_WATER_OFFSET = 34  # magic 8 + version 2 + sequence 8 + euid 16


@dataclass
class ShipObject:
    """One object this flush wants in the bucket. ``body`` is the zstd frame."""

    kind: ObjectKind
    euid: str  # the stream whose authorize request carries it
    flush_id: str  # the request's flush id (pack i: flush id + i)
    body: bytes
    original_size: int
    checksum: str = ""
    sequence: int | None = None
    cid: str | None = None
    codec: int | None = None
    entry_count: int | None = None
    data_high_water: int = 0  # meta only
    cas_paths: tuple[Path, ...] = ()  # value/table: its file; pack: every entry's file

    def __post_init__(self) -> None:
        if not self.checksum:
            self.checksum = hashlib.sha256(self.body).hexdigest()

    @property
    def size(self) -> int:
        return len(self.body)

    def label(self) -> str:
        """Identity for logs and reports: kind and sequence or CID, never content."""
        if self.sequence is not None:
            return f"{self.kind}:{self.euid}:{self.sequence}"
        if self.cid is not None:
            return f"{self.kind}:{self.cid}"
        return f"{self.kind}:{self.euid}:{self.flush_id}"

    def to_wire(self) -> SegmentObject | PackObject | CasObject:
        if self.kind in ("meta_segment", "data_segment"):
            assert self.sequence is not None
            return SegmentObject(
                kind=self.kind,  # type: ignore[arg-type]
                sequence=self.sequence,
                size_bytes=self.size,
                checksum_sha256=self.checksum,
            )
        if self.kind == "value_pack":
            assert self.entry_count is not None
            return PackObject(
                kind="value_pack",
                size_bytes=self.size,
                checksum_sha256=self.checksum,
                entry_count=self.entry_count,
            )
        assert self.cid is not None and self.codec is not None
        return CasObject(
            kind=self.kind,  # type: ignore[arg-type]
            cid=self.cid,
            codec=self.codec,
            size_bytes=self.size,
            checksum_sha256=self.checksum,
        )


@dataclass
class PlanePlan:
    euid: str
    plane: Plane
    cursor: int
    high_water: int
    selection: plan.PlaneSelection
    objects: list[ShipObject]  # in ascending sequence, the ``ship`` part of ``selection``
    verdicts: dict[int, SegmentVerdict] = field(default_factory=dict)
    oldest_unshipped_mtime: float | None = None
    truncated: bool = False  # stopped early at the flush byte cap


@dataclass
class Skip:
    """An item not shipped this flush, with its reason (counted and reported)."""

    reason: str
    what: str  # "data_segment:<euid>:<seq>" or "value:<path name>": never content


@dataclass
class Collected:
    flush_id: str
    planes: list[PlanePlan]
    cas_objects: list[ShipObject]  # tables, large values, packs
    skips: list[Skip]
    pending_values: int = 0
    pending_tables: int = 0
    more: bool = False  # the byte cap left work for an immediate next flush


def _segment_verdict(
    raw: bytes, *, path: Path, euid: str, plane: Plane, seq: int, config: PublisherConfig
) -> SegmentVerdict:
    try:
        verify_trailer(raw, file=path.name)
        header = read_segment_header(raw, file=path.name, plane=plane)
    except UnsupportedVersionError:
        return SegmentVerdict.UNSUPPORTED_VERSION
    except FormatError as exc:
        return SegmentVerdict.BAD_CHECKSUM if exc.reason == "checksum_mismatch" else SegmentVerdict.MALFORMED
    if header.version not in config.supported_segment_versions:
        return SegmentVerdict.UNSUPPORTED_VERSION
    if header.sequence != seq or header.euid.hex() != euid:
        return SegmentVerdict.MALFORMED
    return SegmentVerdict.OK


@dataclass
class _Prepared:
    """One segment file after the worker's pass: read, verified, compressed, hashed."""

    verdict: SegmentVerdict
    raw_size: int = 0
    body: bytes = b""
    checksum: str = ""
    data_high_water: int = 0
    mtime: float | None = None


@dataclass
class _CasRead:
    file: CasFile
    raw: bytes = b""
    reason: str | None = None  # why it cannot ship (bad checksum, malformed, version)
    codec: int = 0
    cid: bytes = b""
    vanished: bool = False


def _compress_and_hash(raw: bytes) -> tuple[bytes, str]:
    body = compress_object(raw)
    return body, hashlib.sha256(body).hexdigest()


class Collector:
    """Builds a :class:`Collected` from the store. Holds the block timers between flushes.

    Reading, verifying, compressing and hashing run on ``executor`` (a few threads; zstd and
    hashlib release the GIL) with a bounded look-ahead; decisions are taken in order here.
    """

    def __init__(
        self,
        store: ProfileStore,
        blocks: plan.PlaneBlocks,
        *,
        max_flush_bytes: int,
        max_flush_objects: int = 1 << 62,
        executor: Executor | None = None,
        window: int = 4,
    ) -> None:
        self.store = store
        self.blocks = blocks
        self.max_flush_bytes = max_flush_bytes
        self.max_flush_objects = max_flush_objects
        self.executor = executor
        self.window = window
        self._reported_cas: dict[str, str] = {}  # path name -> reason, so a bad file is counted once
        self.cas_index = PendingCasIndex(store)
        # Pipelined flushes (publisher/flush.py): where the previous flush, whose meta wave and
        # cursor write are still running, will have left each plane, and the CAS files it carries
        # (marked when it finishes). Collection starts there instead of re-reading them.
        self.assumed_starts: dict[tuple[str, Plane], int] = {}
        self.in_flight_cas: set[Path] = set()
        # Streams found fully shipped, with their plane directories' mtimes then: while those are
        # unchanged nothing was committed or released there, so the stream is skipped (dead
        # processes' streams stay in the root; they must not cost locks and listings every flush).
        self._idle_streams: dict[str, tuple[int, int]] = {}

    def collect(self, flush_id: str, config: PublisherConfig, *, now: float | None = None) -> Collected:
        mono = time.monotonic() if now is None else now
        budget = [self.max_flush_bytes]
        objects_left = self.max_flush_objects
        planes: list[PlanePlan] = []
        skips: list[Skip] = []
        more = False
        streams = self.store.list_streams()
        idle: dict[str, tuple[int, int]] = {}
        for euid in streams:
            stamps = self._plane_mtimes(euid)
            if stamps is not None and self._idle_streams.get(euid) == stamps:
                idle[euid] = stamps
                continue
            # One lock hold: the high-waters and the on-disk lists agree (no commit in between).
            snap = self.store.stream_snapshot(euid)
            cursor, meta_hw, data_hw = snap.cursor, snap.meta_high_water, snap.data_high_water
            cursor = Cursor(
                meta=max(cursor.meta, self.assumed_starts.get((euid, Plane.META), 0)),
                data=max(cursor.data, self.assumed_starts.get((euid, Plane.DATA), 0)),
            )
            data_cap, _ = plan.split_object_budget(
                objects_left,
                max(0, data_hw - cursor.data),
                max(0, meta_hw - cursor.meta),
                data_cursor=cursor.data,
                meta_data_high_water=functools.partial(self._peek_data_high_water, euid, cursor.meta),
            )
            data = self._collect_plane(
                flush_id,
                euid,
                Plane.DATA,
                cursor.data,
                data_hw,
                snap.data_on_disk,
                config,
                mono,
                budget,
                skips,
                max_objects=data_cap,
            )
            objects_left -= len(data.objects)
            # A data plane cut short by the budget: metas naming data beyond what this flush carries
            # would only wait (checklist item 12), so the meta plane stops before the first of them.
            data_limit = (data.objects[-1].sequence or cursor.data) if data.objects else cursor.data
            meta = self._collect_plane(
                flush_id,
                euid,
                Plane.META,
                cursor.meta,
                meta_hw,
                snap.meta_on_disk,
                config,
                mono,
                budget,
                skips,
                max_objects=objects_left,
                data_high_water_limit=data_limit if data.truncated else None,
            )
            objects_left -= len(meta.objects)
            for pp in (data, meta):
                more = more or pp.truncated
                planes.append(pp)
            caught_up = cursor.meta >= meta_hw and cursor.data >= data_hw
            blocked = any(key[0] == euid for key in self.blocks.blocked())
            if stamps is not None and caught_up and not blocked and self._settled(stamps):
                idle[euid] = stamps
        self._idle_streams = idle
        # Values after segments: a value a listed segment references was written before the segment.
        cas_objects, pending_values, pending_tables = self._collect_cas(
            flush_id, planes, streams, config, skips
        )
        return Collected(flush_id, planes, cas_objects, skips, pending_values, pending_tables, more)

    def _peek_data_high_water(self, euid: str, meta_cursor: int, k: int) -> int | None:
        """The k-th pending meta header's ``data_high_water``, to plan a bounded flush (unverified:
        the file is verified when collected; a wrong value here only makes a poorer split)."""
        end = _META_DATA_HIGH_WATER_OFFSET + _META_DATA_HIGH_WATER.size
        try:
            with open(self.store.segment_path(euid, Plane.META, meta_cursor + k), "rb") as f:
                head = f.read(end)
        except OSError:
            return None
        return (
            _META_DATA_HIGH_WATER.unpack_from(head, _META_DATA_HIGH_WATER_OFFSET)[0]
            if len(head) == end
            else None
        )

    def _plane_mtimes(self, euid: str) -> tuple[int, int] | None:
        try:
            return (
                os.stat(self.store.segment_path(euid, Plane.META, 1).parent).st_mtime_ns,
                os.stat(self.store.segment_path(euid, Plane.DATA, 1).parent).st_mtime_ns,
            )
        except OSError:
            return None

    @staticmethod
    def _settled(stamps: tuple[int, int]) -> bool:
        """Directory mtimes are coarse: one changed within the last second may change again within
        the same tick, so it is not trusted to detect the next commit."""
        return time.time_ns() - max(stamps) > 1_000_000_000

    def _prepare_segment(
        self, euid: str, plane: Plane, seq: int, config: PublisherConfig, want_mtime: bool
    ) -> _Prepared:
        path = self.store.segment_path(euid, plane, seq)
        try:
            raw = path.read_bytes()
            mtime = path.stat().st_mtime if want_mtime else None
        except FileNotFoundError:
            return _Prepared(SegmentVerdict.MISSING)
        verdict = _segment_verdict(raw, path=path, euid=euid, plane=plane, seq=seq, config=config)
        if verdict is not SegmentVerdict.OK:
            return _Prepared(verdict, len(raw), mtime=mtime)
        body, checksum = _compress_and_hash(raw)
        if len(body) > config.max_object_bytes:
            return _Prepared(SegmentVerdict.OVERSIZE, len(raw), mtime=mtime)
        dhw = (
            _META_DATA_HIGH_WATER.unpack_from(raw, _META_DATA_HIGH_WATER_OFFSET)[0]
            if plane is Plane.META
            else 0
        )
        return _Prepared(SegmentVerdict.OK, len(raw), body, checksum, dhw, mtime)

    def _collect_plane(
        self,
        flush_id: str,
        euid: str,
        plane: Plane,
        cursor: int,
        high: int,
        listed: list[int],
        config: PublisherConfig,
        now: float,
        budget: list[int],
        skips: list[Skip],
        *,
        max_objects: int,
        data_high_water_limit: int | None = None,
    ) -> PlanePlan:
        kind: ObjectKind = "meta_segment" if plane is Plane.META else "data_segment"
        verdicts: list[tuple[int, SegmentVerdict]] = []
        objects: dict[int, ShipObject] = {}
        may_skip: list[int] = []
        oldest: float | None = None
        truncated = False
        if high > cursor and max_objects <= 0:
            truncated = True  # the flush's object budget is spent: the next flush starts at once
        elif high > cursor:
            on_disk = {s for s in listed if s > cursor}
            first_on_disk = min(on_disk, default=None)

            def prepare(seq: int) -> _Prepared:
                if seq not in on_disk:
                    return _Prepared(SegmentVerdict.MISSING)
                return self._prepare_segment(euid, plane, seq, config, seq == first_on_disk)

            results = ordered_map(self.executor, prepare, range(cursor + 1, high + 1), self.window)
            try:
                for seq, prep in zip(range(cursor + 1, high + 1), results, strict=True):
                    if prep.mtime is not None:
                        oldest = prep.mtime
                    verdict = prep.verdict
                    if verdict is SegmentVerdict.OK and (
                        (budget[0] < prep.raw_size and objects)
                        or len(objects) >= max_objects
                        or (
                            data_high_water_limit is not None and prep.data_high_water > data_high_water_limit
                        )
                    ):
                        truncated = True  # the rest waits for the next flush, which starts at once
                        break
                    if verdict is not SegmentVerdict.OK:
                        if self.blocks.observe(euid, plane.value, seq, verdict, now):
                            may_skip.append(seq)
                            skips.append(Skip(f"{verdict.value}_skipped", f"{kind}:{euid}:{seq}"))
                        else:
                            skips.append(Skip(f"{verdict.value}_blocking", f"{kind}:{euid}:{seq}"))
                            verdicts.append((seq, verdict))
                            break
                        verdicts.append((seq, verdict))
                        continue
                    budget[0] -= prep.raw_size
                    objects[seq] = ShipObject(
                        kind=kind,
                        euid=euid,
                        flush_id=flush_id,
                        body=prep.body,
                        original_size=prep.raw_size,
                        checksum=prep.checksum,
                        sequence=seq,
                        data_high_water=prep.data_high_water,
                    )
                    verdicts.append((seq, verdict))
            finally:
                results.close()  # type: ignore[attr-defined]
        selection = plan.select_plane(cursor, verdicts, may_skip)
        if selection.blocked_at is None:
            self.blocks.clear(euid, plane.value)
        ordered = [objects[s] for s in selection.ship]
        return PlanePlan(euid, plane, cursor, high, selection, ordered, dict(verdicts), oldest, truncated)

    def _read_cas(self, f: CasFile, config: PublisherConfig) -> _CasRead:
        try:
            raw = f.path.read_bytes()
        except FileNotFoundError:
            return _CasRead(f, vanished=True)
        reason = self._check_cas(raw, f, config)
        if reason is not None:
            return _CasRead(f, reason=reason)
        header = cas.read_cas_header(raw)
        return _CasRead(f, raw, None, header.codec, header.cid)

    def _collect_cas(
        self,
        flush_id: str,
        planes: list[PlanePlan],
        streams: list[str],
        config: PublisherConfig,
        skips: list[Skip],
    ) -> tuple[list[ShipObject], int, int]:
        pending = self.cas_index.pending()
        small: list[tuple[CasFile, bytes]] = []
        own: list[tuple[_CasRead, plan.PackPart]] = []  # (file, "value" | "table")
        n_values = n_tables = 0
        owner = _pack_owner(planes, streams)
        # Reading and checking a CAS file is mostly per-file Python work (most are small values), which a
        # thread hop would only add to: inline. Large values and tables compress on the pool below.
        reads = (self._read_cas(f, config) for f in pending if f.path not in self.in_flight_cas)
        for item in reads:
            f = item.file
            if item.vanished:
                continue
            if item.reason is not None:
                if self._reported_cas.get(f.path.name) != item.reason:
                    self._reported_cas[f.path.name] = item.reason
                    if len(self._reported_cas) > 10_000:  # bounded memory
                        self._reported_cas.pop(next(iter(self._reported_cas)))
                    skips.append(Skip(item.reason, f"cas:{f.digest}"))
                continue
            part = plan.classify_cas(item.codec, len(item.raw), config.large_value_threshold_bytes)
            if part == "table":
                n_tables += 1
            else:
                n_values += 1
            if owner is None:
                continue  # no stream yet to carry the request: the values wait
            if part == "pack":
                small.append((f, item.raw))
            else:
                own.append((item, part))
        out: list[ShipObject] = []
        if owner is None:
            return out, n_values, n_tables
        compressed = ordered_map(self.executor, lambda it: _compress_and_hash(it[0].raw), own, self.window)
        for (item, part), (body, checksum) in zip(own, compressed, strict=True):
            if len(body) > config.max_object_bytes:
                skips.append(Skip("oversize", f"cas:{item.file.digest}"))
                continue
            out.append(
                ShipObject(
                    kind="table" if part == "table" else "value",
                    euid=owner,
                    flush_id=flush_id,
                    body=body,
                    original_size=len(item.raw),
                    checksum=checksum,
                    cid=cas.cid_to_string(item.cid),
                    codec=item.codec,
                    cas_paths=(item.file.path,),
                )
            )
        if small:
            out.extend(self._packs(flush_id, owner, small, config, skips))
        return out, n_values, n_tables

    def _check_cas(self, raw: bytes, f: CasFile, config: PublisherConfig) -> str | None:
        try:
            verify_trailer(raw, file=f.path.name)
            header = cas.read_cas_header(raw, file=f.path.name)
        except UnsupportedVersionError:
            return "unsupported_cas_version"
        except FormatError as exc:
            return "bad_checksum" if exc.reason == "checksum_mismatch" else "malformed_cas"
        if header.version not in config.supported_cas_versions:
            return "unsupported_cas_version"
        if header.cid.hex() != f.digest:
            return "malformed_cas"
        return None

    def _packs(
        self,
        flush_id: str,
        owner: str,
        small: list[tuple[CasFile, bytes]],
        config: PublisherConfig,
        skips: list[Skip],
    ) -> list[ShipObject]:
        groups = plan.split_packs([len(raw) for _, raw in small], config.pack_max_entry_bytes)
        ids = pack_flush_ids(flush_id, len(groups))

        def build(job: tuple[str, range]) -> tuple[int, bytes, str]:
            pack_id, group = job
            raw = build_pack([small[i][1] for i in group], flush_id=pack_id, process_euid=owner)
            body, checksum = _compress_and_hash(raw)
            return len(raw), body, checksum

        jobs = list(zip(ids, groups, strict=True))
        out: list[ShipObject] = []
        for (pack_id, group), (raw_size, body, checksum) in zip(
            jobs, ordered_map(self.executor, build, jobs, self.window), strict=True
        ):
            if len(body) > config.max_object_bytes:
                skips.append(Skip("oversize", f"value_pack:{owner}:{pack_id}"))
                continue
            out.append(
                ShipObject(
                    kind="value_pack",
                    euid=owner,
                    flush_id=pack_id,
                    body=body,
                    original_size=raw_size,
                    checksum=checksum,
                    entry_count=len(group),
                    cas_paths=tuple(small[i][0].path for i in group),
                )
            )
        return out


def _pack_owner(planes: list[PlanePlan], streams: list[str]) -> str | None:
    """The stream whose requests carry this flush's values: the first one shipping segments, else the
    first stream of the root. Values go bucket-wide before any segment, so the choice only names the
    pack's key; without any stream the values wait."""
    for pp in planes:
        if pp.objects:
            return pp.euid
    return streams[0] if streams else None
