"""Small hand-built executions (through the real encoders' typed records) for edge cases.

One root ``app.Main`` (call 1) calls ``app.llm.Extract`` (call 2, selected as LLM) and an
unselected helper (call 3, counters only). Facts are spread over two data segments: starts
in sequence 1, ends in sequence 2. Meta sequence 1 holds StreamStarted, EngineStarted and
RootStarted; meta sequence 2 holds RootEnded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from activities.projection.model import DataRead, ExecutionInput, ResolvedValue
from activities.projection.walk import find_root_context, plan_meta_walk
from formats import evidence as ev
from formats import value_codec as vc
from formats.cas import CODEC_FUNCTION_TABLE, CODEC_VALUE, value_cid
from formats.cct import CctCounters, CctPayload, ContextDelta
from formats.data_segment import DataGroup, DataSegment, decode_data_segment, encode_data_segment
from formats.function_table import (
    FunctionEntry,
    FunctionFile,
    FunctionSpan,
    FunctionTable,
    encode_function_table,
)
from formats.ids import CallRef, CallSite, ContextTuple, EdgeKind, ThreadRef
from formats.meta_segment import (
    EngineStarted,
    ExecutionEndStatus,
    HealthSnapshot,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
)

EUID = bytes.fromhex("01a22ee6b0007d9294313379f6da79f4")
ROOT = ThreadRef(EUID, 1, 7)
PROGRAM = bytes(range(16))
ZERO = 1_796_083_200_000_000_000
TABLE = FunctionTable(
    (
        FunctionEntry(0, "app.Main", "Main", source_span=FunctionSpan(0, 10, 90), source_file="main.baml"),
        FunctionEntry(1, "app.llm.Extract", "Extract", kind_detail="llm"),
        FunctionEntry(2, "app.Helper", "Helper"),
    ),
    (FunctionFile(0, "baml_src/secret/main.baml"),),
)
TABLE_BODY = encode_function_table(TABLE)
TABLE_CID = value_cid(CODEC_FUNCTION_TABLE, TABLE_BODY)

SECRET_ID = "INV-1042-secret"
ARGS = vc.Map(
    (("invoice", vc.Class("Invoice", (("id", vc.String(SECRET_ID)), ("total", vc.Float.of(12.5))))),)
)
OUTPUT = vc.Class(
    "Result", (("summary", vc.String("refund approved for customer Ada")), ("ok", vc.Bool(True)))
)
CHILD_ARGS = vc.Map((("text", vc.String("invoice text with a private address")),))
CHILD_OUTPUT = vc.List((vc.String("line one private"), vc.Int(42)))
ERROR = vc.Class("Error", (("message", vc.String("private failure detail")),))

T_ROOT = ContextTuple(PROGRAM, None, 0, None, EdgeKind.ROOT)
K_ROOT = T_ROOT.key()
T_CHILD = ContextTuple(PROGRAM, K_ROOT, 1, CallSite(0, 40, 60, 3), EdgeKind.CALL)
K_CHILD = T_CHILD.key()
T_HELPER = ContextTuple(PROGRAM, K_CHILD, 2, CallSite(0, 70, 80, 5), EdgeKind.CALL)
K_HELPER = T_HELPER.key()


def body(value: vc.Value) -> bytes:
    return vc.encode_value(value)


def cid_of(value: vc.Value) -> bytes:
    return value_cid(CODEC_VALUE, body(value))


def available(value: vc.Value) -> ev.ValueAvailable:
    b = body(value)
    return ev.ValueAvailable(value_cid(CODEC_VALUE, b), CODEC_VALUE, len(b))


def call(n: int) -> CallRef:
    return CallRef(ROOT.euid, ROOT.engine_id, ROOT.thread_id, n)


@dataclass
class Case:
    """Knobs for one hand-built execution."""

    child_output: ev.ValueState | None = field(default_factory=lambda: available(CHILD_OUTPUT))
    child_fails: bool = False
    child_roles: int = ev.ROLES_ALL
    root_started_lost: bool = False
    status: ExecutionEndStatus = ExecutionEndStatus.SUCCEEDED


def facts(case: Case) -> tuple[list[ev.EvidenceFact], list[ev.EvidenceFact]]:
    ctx_root, ctx_child = ev.NormalContext(K_ROOT), ev.NormalContext(K_CHILD)
    first: list[ev.EvidenceFact] = [
        ev.ThreadStart(ROOT, None, None, None, 1_000, ev.ThreadStartKind.ROOT),
        ev.SpanStart(
            call(1), None, ROOT, ctx_root, 0, None, EdgeKind.ROOT, 1_000, ev.SELECTED_ROOT, ev.ROLES_ALL
        ),
        ev.ValueOccurrence(call(1), ctx_root, ev.ValueRole.INPUT, available(ARGS)),
        ev.SpanStart(
            call(2),
            call(1),
            ROOT,
            ctx_child,
            1,
            T_CHILD.call_site,
            EdgeKind.CALL,
            2_000,
            ev.SELECTED_LLM,
            case.child_roles,
        ),
        ev.ValueOccurrence(call(2), ctx_child, ev.ValueRole.INPUT, available(CHILD_ARGS)),
    ]
    second: list[ev.EvidenceFact] = []
    if case.child_fails:
        error_id = ev.ErrorCaptureId(ROOT, 1)
        second += [
            ev.SpanEnd(call(2), 5_000, ev.FunctionEndStatus.ERRORED, 3_000),
            ev.ErrorCapture(
                error_id,
                call(2),
                ctx_child,
                1,
                ev.ThrowSite(0, 3, 40, 60),
                ev.ErrorUnwindKind.FRESH,
                ev.ErrorSource.ENGINE_CALL,
                available(ERROR),
            ),
            ev.TerminalErrorRef(call(2), error_id),
            ev.SpanEnd(call(1), 9_000, ev.FunctionEndStatus.ERRORED, 8_000),
            ev.TerminalErrorRef(call(1), error_id),
            ev.ThreadEnd(ROOT, 9_500, ev.ThreadEndStatus.ERRORED),
        ]
    else:
        second += [ev.SpanEnd(call(2), 5_000, ev.FunctionEndStatus.OK, 3_000)]
        if case.child_output is not None:
            second.append(ev.ValueOccurrence(call(2), ctx_child, ev.ValueRole.OUTPUT, case.child_output))
        second += [
            ev.SpanEnd(call(1), 9_000, ev.FunctionEndStatus.OK, 8_000),
            ev.ValueOccurrence(call(1), ctx_root, ev.ValueRole.OUTPUT, available(OUTPUT)),
            ev.ThreadEnd(ROOT, 9_500, ev.ThreadEndStatus.COMPLETED),
        ]
    return first, second


def cct(case: Case) -> tuple[CctPayload, CctPayload]:
    """Starts in segment 1, completions in segment 2; the tuples travel only with the first delta."""
    first = CctPayload(
        (
            ContextDelta(K_ROOT, T_ROOT, CctCounters(invocations_started=1, spans_selected=1)),
            ContextDelta(K_CHILD, T_CHILD, CctCounters(invocations_started=1, spans_selected=1)),
            ContextDelta(K_HELPER, T_HELPER, CctCounters(invocations_started=2)),
        )
    )
    child_done = (
        CctCounters(completed_error=1, inclusive_ns=3_000)
        if case.child_fails
        else CctCounters(completed_ok=1, inclusive_ns=3_000, direct_call_child_inclusive_ns=1_000)
    )
    second = CctPayload(
        (
            ContextDelta(K_ROOT, None, CctCounters(completed_ok=1, inclusive_ns=8_000)),
            ContextDelta(K_CHILD, None, child_done),
            ContextDelta(K_HELPER, None, CctCounters(completed_ok=2, inclusive_ns=700)),
        )
    )
    return first, second


def data_segments(case: Case) -> list[DataSegment]:
    f1, f2 = facts(case)
    c1, c2 = cct(case)
    segs = [
        DataSegment(1, EUID, (DataGroup.build(ROOT, cct=c1, facts=f1),)),
        DataSegment(2, EUID, (DataGroup.build(ROOT, cct=c2, facts=f2),)),
    ]
    # Through the real encoder and decoder, as the projector would read them.
    return [decode_data_segment(encode_data_segment(s), expected_euid=EUID) for s in segs]


def meta_segments(case: Case) -> list[MetaSegment]:
    health = (
        HealthSnapshot(
            applicable_error_unwinds=1,
            error_captures_queued=1,
            error_captures_committed=1,
            terminal_error_links_observed=2,
            terminal_error_links_queued=2,
            terminal_error_links_committed=2,
        )
        if case.child_fails
        else HealthSnapshot()
    )
    status = ExecutionEndStatus.FAILED if case.child_fails else case.status
    first = [
        StreamStarted(4242, ZERO, "0.0.0-test", "linux-x86_64"),
        EngineStarted(1, PROGRAM, TABLE_CID, None, "ab" * 32),
    ]
    if not case.root_started_lost:
        first.append(RootStarted(ROOT, 900, b"\x05" * 16))
    ended = RootEnded(ROOT, 9_600, status, int(case.root_started_lost), 1, 2, 2, health)
    return [MetaSegment(1, EUID, 0, tuple(first)), MetaSegment(2, EUID, 2, (ended,))]


def values() -> dict[bytes, ResolvedValue]:
    out = {}
    for v in (ARGS, OUTPUT, CHILD_ARGS, CHILD_OUTPUT, ERROR):
        out[cid_of(v)] = ResolvedValue(body(v), CODEC_VALUE, locator="test")
    return out


class Lookup:
    def __init__(self, hidden: set[bytes] | None = None) -> None:
        self.values = values()
        self.hidden = hidden or set()

    def __call__(self, cid: bytes) -> ResolvedValue | None:
        return None if cid in self.hidden else self.values.get(cid)


def execution_input(
    case: Case | None = None,
    *,
    drop_data: set[int] | None = None,
    max_walk: int = 2000,
    engine_lookup: Callable[[int], EngineStarted | None] | None = None,
) -> ExecutionInput:
    case = case or Case()
    metas = {m.sequence: m for m in meta_segments(case)}
    ended = metas[2].records[0]
    assert isinstance(ended, RootEnded)
    ctx = find_root_context(
        (metas[s] for s in plan_meta_walk(2, max_walk)),
        ROOT,
        need_root_started=not ended.root_started_lost,
        max_walk=max_walk,
        engine_lookup=engine_lookup,
    )
    reads = []
    for seg in data_segments(case):
        if drop_data and seg.sequence in drop_data:
            reads.append(DataRead(seg.sequence, None, "missing"))
        else:
            reads.append(DataRead(seg.sequence, seg.groups[0]))
    return ExecutionInput(EUID, metas[1].records[0], ctx, ended, tuple(reads), TABLE, 2)  # type: ignore[arg-type]
