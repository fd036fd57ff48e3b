"""A small world for exact private numbers: one execution whose LLM calls output chosen numbers.

It lives in its own Boundary environment (its own user token), so the synthetic corpus the other
coordinator tests compare with ground truth is untouched. The execution is built from typed
evidence records through the real encoders and projected by the real projector
(``assemble_execution``); public facts go to the real Boundary, private rows to the same Lance
store the coordinator reads.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from coordinator_corpus import commit_private, publish_public
from coordinator_world import BoundaryServer

from activities.projection.assemble import assemble_execution
from activities.projection.model import DataRead, ExecutionInput, ExecutionProjection, ResolvedValue
from activities.projection.walk import find_root_context, plan_meta_walk
from api.boundary.metastore import Metastore
from api.common.auth import Permission, TokenKind
from api.dataplane.lance_store import LanceStore
from formats import evidence as ev
from formats import value_codec as vc
from formats.cas import CODEC_VALUE, value_cid
from formats.cct import CctCounters, CctPayload, ContextDelta
from formats.data_segment import DataGroup, DataSegment, decode_data_segment, encode_data_segment
from formats.ids import CallRef, EdgeKind
from formats.meta_segment import (
    EngineStarted,
    ExecutionEndStatus,
    HealthSnapshot,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
)
from formats.object_keys import Scope

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projection"))
from projection_builders import EUID, K_CHILD, K_ROOT, PROGRAM, ROOT, T_CHILD, T_ROOT, TABLE, TABLE_CID, ZERO

LLM_FUNCTION = "app.llm.Extract"
Number = int | float


def _call(n: int) -> CallRef:
    return CallRef(ROOT.euid, ROOT.engine_id, ROOT.thread_id, n)


def _number(x: Number) -> vc.Value:
    if isinstance(x, float):
        return vc.Float.of(x)
    return vc.Int(x) if -(2**63) <= x < 2**63 else vc.BigInt.from_int(x)


def _output(fields: dict[str, Number]) -> vc.Value:
    return vc.Class("Numbers", tuple((name, _number(x)) for name, x in fields.items()))


def numbers_execution(outputs: list[dict[str, Number]]) -> tuple[ExecutionInput, dict[bytes, ResolvedValue]]:
    """One root (call 1) with one LLM call per entry of ``outputs`` (calls 2, 3, ...)."""
    values = {ARGS_CID: ResolvedValue(ARGS_BODY, CODEC_VALUE, locator="test")}
    ctx_root, ctx_child = ev.NormalContext(K_ROOT), ev.NormalContext(K_CHILD)
    first: list[ev.EvidenceFact] = [
        ev.ThreadStart(ROOT, None, None, None, 1_000, ev.ThreadStartKind.ROOT),
        ev.SpanStart(
            _call(1), None, ROOT, ctx_root, 0, None, EdgeKind.ROOT, 1_000, ev.SELECTED_ROOT, ev.ROLES_ALL
        ),
        ev.ValueOccurrence(
            _call(1), ctx_root, ev.ValueRole.INPUT, ev.ValueAvailable(ARGS_CID, CODEC_VALUE, len(ARGS_BODY))
        ),
    ]
    second: list[ev.EvidenceFact] = []
    for i, fields in enumerate(outputs):
        call = _call(i + 2)
        body = vc.encode_value(_output(fields))
        cid = value_cid(CODEC_VALUE, body)
        values[cid] = ResolvedValue(body, CODEC_VALUE, locator="test")
        first.append(
            ev.SpanStart(
                call, _call(1), ROOT, ctx_child, 1, T_CHILD.call_site, EdgeKind.CALL, 2_000 + i,
                ev.SELECTED_LLM, ev.ROLES_ALL,
            )
        )  # fmt: skip
        second += [
            ev.SpanEnd(call, 5_000 + i, ev.FunctionEndStatus.OK, 3_000),
            ev.ValueOccurrence(
                call, ctx_child, ev.ValueRole.OUTPUT, ev.ValueAvailable(cid, CODEC_VALUE, len(body))
            ),
        ]
    second += [
        ev.SpanEnd(_call(1), 9_000, ev.FunctionEndStatus.OK, 8_000),
        ev.ThreadEnd(ROOT, 9_500, ev.ThreadEndStatus.COMPLETED),
    ]
    n = len(outputs)
    cct_first = CctPayload(
        (
            ContextDelta(K_ROOT, T_ROOT, CctCounters(invocations_started=1, spans_selected=1)),
            ContextDelta(K_CHILD, T_CHILD, CctCounters(invocations_started=n, spans_selected=n)),
        )
    )
    cct_second = CctPayload(
        (
            ContextDelta(K_ROOT, None, CctCounters(completed_ok=1, inclusive_ns=8_000)),
            ContextDelta(K_CHILD, None, CctCounters(completed_ok=n, inclusive_ns=3_000 * n)),
        )
    )
    segments = [
        DataSegment(1, EUID, (DataGroup.build(ROOT, cct=cct_first, facts=first),)),
        DataSegment(2, EUID, (DataGroup.build(ROOT, cct=cct_second, facts=second),)),
    ]
    decoded = [decode_data_segment(encode_data_segment(s), expected_euid=EUID) for s in segments]
    ended = RootEnded(ROOT, 9_600, ExecutionEndStatus.SUCCEEDED, 0, 1, 2, 2, HealthSnapshot())
    metas = {
        1: MetaSegment(
            1,
            EUID,
            0,
            (
                StreamStarted(4242, ZERO, "0.0.0-test", "linux-x86_64"),
                EngineStarted(1, PROGRAM, TABLE_CID, None, "ab" * 32),
                RootStarted(ROOT, 900, b"\x05" * 16),
            ),
        ),
        2: MetaSegment(2, EUID, 2, (ended,)),
    }
    ctx = find_root_context(
        (metas[s] for s in plan_meta_walk(2, 2000)), ROOT, need_root_started=True, max_walk=2000
    )
    reads = tuple(DataRead(s.sequence, s.groups[0]) for s in decoded)
    stream = metas[1].records[0]
    assert isinstance(stream, StreamStarted)
    return ExecutionInput(EUID, stream, ctx, ended, reads, TABLE, root_ended_seq=2), values


ARGS_BODY = vc.encode_value(vc.Map((("n", vc.Int(1)),)))
ARGS_CID = value_cid(CODEC_VALUE, ARGS_BODY)


@dataclass
class NumbersWorld:
    user_headers: dict[str, str]
    projection: ExecutionProjection
    scope: Scope


def build_numbers_world(
    boundary: BoundaryServer, lance: LanceStore, outputs: list[dict[str, Number]], environment: str
) -> NumbersWorld:
    """Project the execution into a new environment ``environment`` and return its user's headers."""
    ms = Metastore(boundary.metastore_url)
    try:
        env, _ = ms.create_environment(boundary.boot.project_id, environment)
        issued = ms.issue_token(
            kind=TokenKind.USER,
            name=f"{environment}-user",
            tenant_id=boundary.boot.tenant_id,
            project_id=boundary.boot.project_id,
            environment_id=env.id,
            permissions=[Permission.QUERY.value],
            expires_at=None,
            created_by="tests",
        )
    finally:
        ms.close()
    assert issued.secret is not None
    inp, values = numbers_execution(outputs)
    projection = assemble_execution(inp, values.get)
    assert isinstance(projection, ExecutionProjection)
    scope = Scope(boundary.boot.tenant_id, boundary.boot.project_id, env.id)
    publish_public(boundary.client, scope, 1, [projection])
    commit_private(lance, scope, 1, [projection])
    return NumbersWorld({"Authorization": f"Bearer {issued.secret}"}, projection, scope)
