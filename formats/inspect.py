"""Decode a profile directory, one stream, or one file into execution records.

Pure decoding over files (no network); the CLI ``baml-studio inspect`` prints what this
returns. It reads as the upstream reader does (``StreamReader::open``, ``summarize``,
``ExecutionReader::load``), with the index rules of :mod:`formats.reader_rules`. One execution
record per root ThreadRef that a decodable meta segment names (RootStarted or RootEnded)::

    {"stream", "execution_id", "status", "index_state", "started_unix_ns", "ended_unix_ns",
     "data_first_seq", "data_last_seq",
     "spans": [{"call_id", "parent_call_id", "function", "status", "started_ns", "ended_ns",
                "values": [{"role", "state", "cid"(, "json")}]}]
     (, "data_issues": ["missing_data_segment 7", ...])}

* ``status``: from RootEnded (succeeded|failed|cancelled|panicked|abandoned); without
  one, ``running`` while the stream's ``stream.lock`` is held, else ``abandoned``.
* ``index_state``: :func:`formats.reader_rules.index_state` over the meta sequences holding the
  RootStarted/RootEnded, the stream's index gaps and whether every data segment of the
  RootEnded range is present and verified.
* Damaged executions keep what survives: a missing or corrupt data segment of the range is
  skipped and named in ``data_issues``; a span is listed whenever any fact about its call
  survives (fields its lost SpanStart would have given are null).
* Timestamps: ``started_unix_ns = StreamStarted.zero_unix_ns + RootStarted.started_ns``
  (the real clock rebases every disk timestamp on the stream's wall-clock origin).
* A span's ``error`` value is the ErrorCapture its TerminalErrorRef points at.

One stream record per stream (``InspectReport.streams``): liveness, high waters, index gaps and
orphan roots (roots seen only in data groups). A file that fails to decode, and a missing
sequence, is reported as a bad file ``{"bad_file": path, "reason", "offset", "message",
"stream"}`` and decoding carries on.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import cas, evidence, function_table, reader_rules, value_json, value_pack
from formats import meta_segment as ms
from formats.data_segment import DataGroup, decode_data_segment
from formats.errors import FormatError, MalformedError
from formats.ids import CallRef, ThreadRef
from formats.profile_store import layout
from formats.profile_store.locks import is_held_by_someone
from formats.segment_names import parse_segment_path
from formats.value_codec import decode_value
from formats.zstd_frame import decompress_object

ROLE_NAMES = {evidence.ValueRole.INPUT: "input", evidence.ValueRole.OUTPUT: "output"}
ROLE_ORDER = {"input": 0, "output": 1, "error": 2}
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class InspectReport:
    executions: list[dict[str, Any]] = field(default_factory=list)
    bad_files: list[dict[str, Any]] = field(default_factory=list)
    streams: list[dict[str, Any]] = field(default_factory=list)


def read_profile_file(path: Path) -> bytes:
    """The raw profiler bytes of ``path``, decompressing a ``.zst`` object."""
    data = path.read_bytes()
    if path.suffix == ".zst" or data[:4] == ZSTD_MAGIC:
        return decompress_object(data, file=str(path))
    return data


def state_name(state: evidence.ValueState) -> str:
    if isinstance(state, evidence.ValueAvailable):
        return "available"
    return f"lost:{state.reason.name.lower()}"


def _seq_files(plane_dir: Path, ext: str) -> dict[int, Path]:
    out: dict[int, Path] = {}
    if not plane_dir.is_dir():
        return out
    for p in plane_dir.iterdir():
        name = p.name.removesuffix(".zst")
        stem, dot, suffix = name.partition(".")
        if dot and suffix == ext and len(stem) == 20 and stem.isdigit():
            out[int(stem)] = p
    return out


class _Cas:
    """Reads function tables and values from the profile root's CAS, caching tables."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._tables: dict[bytes, function_table.FunctionTable | None] = {}

    def _body(self, cid: bytes, codec: int) -> bytes | None:
        if self.root is None:
            return None
        path = layout.cas_path(self.root, cid)
        if not path.exists():
            return None
        obj = cas.decode_cas_object(path.read_bytes(), file=str(path), expected_cid=cid, expected_codec=codec)
        return obj.body

    def table(self, cid: bytes | None) -> function_table.FunctionTable | None:
        if cid is None:
            return None
        if cid not in self._tables:
            try:
                body = self._body(cid, cas.CODEC_FUNCTION_TABLE)
                self._tables[cid] = function_table.decode_function_table(body) if body is not None else None
            except FormatError:
                self._tables[cid] = None
        return self._tables[cid]

    def value_json(self, cid: bytes) -> Any:
        body = self._body(cid, cas.CODEC_VALUE)
        return None if body is None else value_json.to_json_obj(decode_value(body))


def _bad(report: InspectReport, path: Path, stream: str, exc: FormatError) -> None:
    report.bad_files.append(
        {
            "bad_file": str(path),
            "stream": stream,
            "reason": exc.reason,
            "offset": exc.offset,
            "message": exc.message,
        }
    )


def inspect_path(path: Path | str, *, values: bool = False, issues: bool = False) -> InspectReport:
    """A profile directory (has ``streams/``) or one stream directory (has ``meta/`` or ``data/``).

    ``issues`` adds each execution's ``data_issues``; without it an execution record has exactly
    the ground truth's shape (``formats.synth``'s ``TruthExecution.to_json``).
    """
    path = Path(path)
    report = InspectReport()
    if (path / layout.STREAMS_DIR).is_dir():
        cas_root = path
        streams = sorted(p for p in (path / layout.STREAMS_DIR).iterdir() if layout.is_euid_dir_name(p.name))
    elif (path / "meta").is_dir() or (path / "data").is_dir():
        cas_root = path.parent.parent
        streams = [path]
    else:
        raise MalformedError(
            f"{path} is neither a profile directory nor a stream directory",
            file=str(path),
            reason="not_a_profile",
        )
    cas_reader = _Cas(cas_root if (cas_root / "cas").is_dir() else None)
    for stream_dir in streams:
        _inspect_stream(stream_dir, cas_reader, report, values=values, issues=issues)
    return report


@dataclass
class _Root:
    """What the meta plane says about one root: its records and the sequences holding them."""

    started: ms.RootStarted | None = None
    started_seq: int | None = None
    started_high_water: int = 0  # data_high_water of the RootStarted's meta segment
    ended: ms.RootEnded | None = None
    ended_seq: int | None = None


def _inspect_stream(
    stream_dir: Path, cas_reader: _Cas, report: InspectReport, *, values: bool, issues: bool
) -> None:
    stream = stream_dir.name
    euid = bytes.fromhex(stream)
    live = is_held_by_someone(stream_dir / layout.STREAM_LOCK)

    zero_unix_ns: int | None = None
    engines: dict[int, ms.EngineStarted] = {}
    roots: dict[bytes, _Root] = {}
    meta_files = _seq_files(stream_dir / "meta", "bamlmeta")
    for seq in _gaps(meta_files):
        report.bad_files.append(_missing(stream_dir / "meta" / f"{seq:020d}.bamlmeta", stream))
    decoded_meta: set[int] = set()
    for seq in sorted(meta_files):
        path = meta_files[seq]
        try:
            segment = ms.decode_meta_segment(
                read_profile_file(path), file=str(path), expected_euid=euid, expected_sequence=seq
            )
        except FormatError as exc:
            _bad(report, path, stream, exc)
            continue
        decoded_meta.add(seq)
        for record in segment.records:
            if isinstance(record, ms.StreamStarted):
                zero_unix_ns = record.zero_unix_ns
            elif isinstance(record, ms.EngineStarted):
                engines[record.engine_id] = record
            elif isinstance(record, ms.RootStarted):
                entry = roots.setdefault(record.root.to_bytes(), _Root())
                entry.started, entry.started_seq = record, seq
                entry.started_high_water = segment.data_high_water
            elif isinstance(record, ms.RootEnded):
                entry = roots.setdefault(record.root.to_bytes(), _Root())
                entry.ended, entry.ended_seq = record, seq
    meta_max = max(meta_files, default=0)
    gaps = reader_rules.index_gaps(meta_max, decoded_meta, meta_files, alive=live)

    data_files = _seq_files(stream_dir / "data", "bamldata")
    for seq in _gaps(data_files):
        report.bad_files.append(_missing(stream_dir / "data" / f"{seq:020d}.bamldata", stream))
    valid: set[int] = set()
    groups: dict[bytes, dict[int, list[DataGroup]]] = {}
    for seq in sorted(data_files):
        path = data_files[seq]
        try:
            data_seg = decode_data_segment(
                read_profile_file(path), file=str(path), expected_euid=euid, expected_sequence=seq, deep=True
            )
        except FormatError as exc:
            _bad(report, path, stream, exc)
            continue
        valid.add(seq)
        for group in data_seg.groups:
            groups.setdefault(group.root.to_bytes(), {}).setdefault(seq, []).append(group)
    data_max = max(data_files, default=0)

    # Like the upstream reader, only roots the meta plane names are executions; a root seen only in
    # data groups (its meta batch was lost) is an orphan, listed on the stream record.
    orphans = sorted(set(groups) - set(roots))
    report.streams.append(
        {
            "stream": stream,
            "alive": live,
            "meta_high_water": max(decoded_meta, default=0),
            "data_high_water": data_max,
            "index_gaps": gaps,
            "orphan_roots": [ThreadRef.from_bytes(r).execution_id for r in orphans],
        }
    )

    for root_bytes in sorted(roots):
        entry = roots[root_bytes]
        root = ThreadRef.from_bytes(root_bytes)
        start, end = entry.started, entry.ended
        data_issues: list[str] = []
        expected: int | None
        if end is not None:
            if end.data_segment_count == 0 or end.data_first_seq == 0:
                in_range, expected = range(0), 0
            else:
                in_range, expected = range(end.data_first_seq, end.data_last_seq + 1), end.data_segment_count
        else:
            # Without RootEnded the execution's groups lie above its RootStarted segment's data
            # high water, up to the stream's newest data sequence (the upstream reader's range).
            data_issues.append("no_root_ended")
            lower = entry.started_high_water + 1 if start is not None else 1
            in_range, expected = range(lower, data_max + 1), None
        its_groups: list[tuple[int, DataGroup]] = []
        intact = True
        own = groups.get(root_bytes, {})
        for seq in in_range:
            if seq not in data_files:
                data_issues.append(f"missing_data_segment {seq}")
                intact = False
            elif seq not in valid:
                data_issues.append(f"corrupt_data_segment {seq}")
                intact = False
            else:
                its_groups.extend((seq, g) for g in own.get(seq, []))
        if expected is not None and expected != len(its_groups):
            data_issues.append(f"group_count_mismatch expected={expected} found={len(its_groups)}")
        index_state = reader_rules.index_state(
            started_seq=entry.started_seq,
            ended_seq=entry.ended_seq,
            root_started_lost=end is not None and end.root_started_lost,
            gaps=gaps,
            data_intact=intact,
        )
        if end is not None:
            status = end.status.name.lower()
            first, last = (end.data_first_seq, end.data_last_seq) if expected else (None, None)
        else:
            status = reader_rules.open_status(live)
            seqs = [s for s, _ in its_groups]
            first, last = (min(seqs), max(seqs)) if seqs else (None, None)
        engine = engines.get(root.engine_id)
        table = cas_reader.table(engine.function_table_cid if engine else None)
        spans, dangling = _spans(its_groups, table, cas_reader, values=values)
        execution: dict[str, Any] = {
            "stream": stream,
            "execution_id": root.execution_id,
            "status": status,
            "index_state": index_state,
            "started_unix_ns": zero_unix_ns + start.started_ns
            if zero_unix_ns is not None and start
            else None,
            "ended_unix_ns": zero_unix_ns + end.ended_ns if zero_unix_ns is not None and end else None,
            "data_first_seq": first,
            "data_last_seq": last,
            "spans": spans,
        }
        if issues:
            execution["data_issues"] = data_issues + dangling
        report.executions.append(execution)


def _gaps(files: dict[int, Path]) -> list[int]:
    if not files:
        return []
    return [s for s in range(1, max(files) + 1) if s not in files]


def _missing(path: Path, stream: str) -> dict[str, Any]:
    return {
        "bad_file": str(path),
        "stream": stream,
        "reason": "missing_sequence",
        "offset": None,
        "message": "sequence gap: file is missing",
    }


def _new_span(call_ref: CallRef) -> dict[str, Any]:
    # A span exists as soon as any fact about its call survives; what its SpanStart would have
    # said (function, parent, start) stays null when that fact was in a lost segment.
    return {
        "call_id": call_ref.call_id,
        "parent_call_id": None,
        "function": None,
        "status": None,
        "started_ns": None,
        "ended_ns": None,
        "values": [],
    }


def _spans(
    groups: list[tuple[int, DataGroup]],
    table: function_table.FunctionTable | None,
    cas_reader: _Cas,
    *,
    values: bool,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The spans the surviving groups describe, and the dependencies they leave unresolved."""
    spans: dict[bytes, dict[str, Any]] = {}
    has_start: set[bytes] = set()
    captures: dict[tuple[bytes, int], evidence.ValueState] = {}
    links: list[tuple[bytes, evidence.TerminalErrorTarget]] = []
    pending_values: list[tuple[bytes, str, evidence.ValueState]] = []
    refs: dict[bytes, CallRef] = {}

    def span_of(call_ref: CallRef) -> tuple[bytes, dict[str, Any]]:
        key = call_ref.to_bytes()
        if key not in spans:
            spans[key] = _new_span(call_ref)
            refs[key] = call_ref
        return key, spans[key]

    for _, group in sorted(groups, key=lambda sg: sg[0]):
        for fact in group.evidence_facts():
            if isinstance(fact, evidence.SpanStart):
                key, span = span_of(fact.call_ref)
                has_start.add(key)
                entry = table.function(fact.function_id) if table is not None else None
                span["parent_call_id"] = fact.parent_call_ref.call_id if fact.parent_call_ref else None
                span["function"] = entry.fqn if entry is not None else None
                span["started_ns"] = fact.started_ns
            elif isinstance(fact, evidence.SpanEnd):
                _, span = span_of(fact.call_ref)
                span["status"] = fact.status.name.lower()
                span["ended_ns"] = fact.ended_ns
            elif isinstance(fact, evidence.SpanRuntimeId):
                span_of(fact.call_ref)
            elif isinstance(fact, evidence.ValueOccurrence):
                key, _ = span_of(fact.call_ref)
                pending_values.append((key, ROLE_NAMES[fact.role], fact.state))
            elif isinstance(fact, evidence.ErrorCapture):
                captures[(fact.id.thread_ref.to_bytes(), fact.id.unwind_ordinal)] = fact.value
            elif isinstance(fact, evidence.TerminalErrorRef):
                key, _ = span_of(fact.call_ref)
                links.append((key, fact.target))
    dangling = [
        f"unresolved_dependency span_start {refs[key].encode_string()}"
        for key in sorted(spans)
        if key not in has_start
    ]
    for key, target in links:
        if isinstance(target, evidence.ErrorCaptureId):
            state = captures.get((target.thread_ref.to_bytes(), target.unwind_ordinal))
            if state is not None:
                pending_values.append((key, "error", state))
            else:
                dangling.append(
                    "unresolved_dependency error_capture "
                    f"{target.thread_ref.encode_string()} {target.unwind_ordinal}"
                )
        else:
            pending_values.append(
                (key, "error", evidence.ValueLost(evidence.ValueLossReason.STORE_UNAVAILABLE))
            )
    for key, role, state in pending_values:
        item: dict[str, Any] = {
            "role": role,
            "state": state_name(state),
            "cid": cas.cid_to_string(state.cid) if isinstance(state, evidence.ValueAvailable) else None,
        }
        if values:
            item["json"] = _value_json(cas_reader, state)
        spans[key]["values"].append(item)
    out = [spans[k] for k in sorted(spans)]
    for span in out:
        span["values"].sort(key=lambda v: ROLE_ORDER[v["role"]])
    return out, dangling


def _value_json(cas_reader: _Cas, state: evidence.ValueState) -> Any:
    if not isinstance(state, evidence.ValueAvailable):
        return None
    try:
        return cas_reader.value_json(state.cid)
    except FormatError:
        return None


# -- one file ------------------------------------------------------------------------------------


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, bytes and ThreadRefs as plain JSON data (bytes as hex)."""
    if isinstance(obj, enum.Enum):
        return obj.name.lower()
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).hex()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"type": type(obj).__name__}
        for f in dataclasses.fields(obj):
            if f.name in ("file", "cct_offset", "evidence_offset"):
                continue
            out[f.name] = to_jsonable(getattr(obj, f.name))
        return out
    if isinstance(obj, list | tuple):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


def decode_file(path: Path | str) -> dict[str, Any]:
    """Decode one profiler file (raw or ``.zst``) into its records, as JSON data."""
    path = Path(path)
    data = read_profile_file(path)
    name = str(path)
    magic = data[:8]
    expect: dict[str, Any] = {}
    try:
        loc = parse_segment_path(name)
        expect = {"expected_euid": loc.euid, "expected_sequence": loc.sequence}
    except FormatError:
        pass
    if magic == b"BAMLMET1":
        meta = ms.decode_meta_segment(data, file=name, **expect)
        return {"kind": "meta_segment", **to_jsonable(meta)}
    if magic == b"BAMLDAT1":
        seg = decode_data_segment(data, file=name, deep=True, **expect)
        groups = [
            {
                "root": g.root.execution_id,
                "cct_health": to_jsonable(g.cct_health),
                "cct": to_jsonable(g.cct_payload()),
                "facts": to_jsonable(g.evidence_facts()),
            }
            for g in seg.groups
        ]
        return {"kind": "data_segment", "sequence": seg.sequence, "euid": seg.euid.hex(), "groups": groups}
    if magic == b"BAMLVAL1":
        obj = cas.decode_cas_object(data, file=name)
        out: dict[str, Any] = {"kind": "cas_object", "codec": obj.codec, "cid": cas.cid_to_string(obj.cid)}
        if obj.codec == cas.CODEC_VALUE:
            out["value"] = value_json.to_json_obj(decode_value(obj.body, file=name))
        else:
            out["function_table"] = to_jsonable(function_table.decode_function_table(obj.body, file=name))
        return out
    if magic == b"BAMLPCK1":
        pack = value_pack.read_pack(data, file=name)
        return {"kind": "value_pack", **to_jsonable(pack.manifest)}
    raise MalformedError(f"unknown magic {magic!r}", file=name, offset=0, reason="bad_magic")
