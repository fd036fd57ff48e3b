"""Decode throughput of profiler data segments against raw SHA-256 over the same bytes.

Builds about 50 MB of realistic data segments with our encoders (executions with
a CCT payload and evidence for selected calls: spans, value occurrences,
threads, an error), then measures in the same run:

- full decode (frame + every group's CCT and evidence payloads), MB/s;
- structural decode (frame and groups, payloads kept as bytes), MB/s;
- ``hashlib.sha256`` over the same bytes, MB/s (the floor every decoder pays,
  since each file is verified against its trailing SHA-256);
- the ratio of each decode rate to the SHA-256 rate.

Run: ``.venv/bin/python bench/decode.py [target_mb]``
"""

from __future__ import annotations

import hashlib
import random
import sys
import time

from formats.cct import CctCounters, CctPayload, ContextDelta
from formats.data_segment import DataGroup, DataSegment, decode_data_segment, encode_data_segment
from formats.evidence import (
    ErrorCapture,
    ErrorCaptureId,
    ErrorSource,
    ErrorUnwindKind,
    EvidenceFact,
    FunctionEndStatus,
    NormalContext,
    SpanEnd,
    SpanStart,
    TerminalErrorRef,
    ThreadEnd,
    ThreadEndStatus,
    ThreadStart,
    ThreadStartKind,
    ValueAvailable,
    ValueOccurrence,
    ValueRole,
)
from formats.ids import CallRef, CallSite, ContextTuple, EdgeKind, ThreadRef, new_euid

CALLS_PER_EXECUTION = 10
EXECUTIONS_PER_SEGMENT = 200


def execution(rng: random.Random, root: ThreadRef, program: bytes) -> DataGroup:
    contexts = []
    facts: list[EvidenceFact] = [ThreadStart(root, None, None, None, 0, ThreadStartKind.ROOT, "")]
    parent_key: bytes | None = None
    parent_call: CallRef | None = None
    t = 0
    for call_id in range(1, CALLS_PER_EXECUTION + 1):
        site = CallSite(1, rng.randrange(10_000), rng.randrange(10_000), rng.randrange(500))
        tup = ContextTuple(
            program, parent_key, rng.randrange(1, 200), site, EdgeKind.ROOT if call_id == 1 else EdgeKind.CALL
        )
        dur = rng.randrange(1_000, 5_000_000)
        delta = ContextDelta.for_tuple(tup, CctCounters(1, 1, 1, 0, 0, 0, dur, dur // 3, 0, 0))
        contexts.append(delta)
        call = CallRef(root.euid, root.engine_id, root.thread_id, call_id)
        ctx = NormalContext(delta.key)
        facts.append(SpanStart(call, parent_call, root, ctx, tup.function_id, site, tup.edge_kind, t, 1, 7))
        for role in (ValueRole.INPUT, ValueRole.OUTPUT):
            cid = rng.randbytes(32)
            facts.append(ValueOccurrence(call, ctx, role, ValueAvailable(cid, 1, rng.randrange(50, 5000))))
        status = FunctionEndStatus.OK
        if call_id == CALLS_PER_EXECUTION and rng.random() < 0.1:
            status = FunctionEndStatus.ERRORED
            eid = ErrorCaptureId(root, 1)
            facts.append(
                ErrorCapture(
                    eid,
                    call,
                    ctx,
                    tup.function_id,
                    None,
                    ErrorUnwindKind.FRESH,
                    ErrorSource.BYTECODE,
                    ValueAvailable(rng.randbytes(32), 1, 100),
                )
            )
            facts.append(TerminalErrorRef(call, eid))
        facts.append(SpanEnd(call, t + dur, status, dur))
        parent_key, parent_call, t = delta.key, call, t + dur
    facts.append(ThreadEnd(root, t, ThreadEndStatus.COMPLETED))
    contexts.sort(key=lambda c: c.key)
    return DataGroup.build(root, cct=CctPayload(tuple(contexts)), facts=facts)


def build(target_bytes: int) -> list[bytes]:
    rng = random.Random(7)
    euid = new_euid()
    program = rng.randbytes(16)
    files: list[bytes] = []
    total, seq, thread = 0, 0, 0
    while total < target_bytes:
        seq += 1
        groups = []
        for _ in range(EXECUTIONS_PER_SEGMENT):
            thread += 1
            groups.append(execution(rng, ThreadRef(euid, 1, thread), program))
        data = encode_data_segment(DataSegment(seq, euid, tuple(groups)))
        files.append(data)
        total += len(data)
    return files


def best_of(runs: int, fn) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    target_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 50.0
    start = time.perf_counter()
    files = build(int(target_mb * 1_000_000))
    build_s = time.perf_counter() - start
    total = sum(len(f) for f in files)
    mb = total / 1_000_000
    executions = len(files) * EXECUTIONS_PER_SEGMENT

    def full() -> None:
        for f in files:
            decode_data_segment(f, deep=True)

    def structural() -> None:
        for f in files:
            decode_data_segment(f)

    def sha() -> None:
        for f in files:
            hashlib.sha256(f).digest()

    sha_s = best_of(3, sha)
    struct_s = best_of(3, structural)
    full_s = best_of(1, full)
    sha_rate, struct_rate, full_rate = mb / sha_s, mb / struct_s, mb / full_s
    print(
        f"corpus: {len(files)} data segments, {mb:.1f} MB, {executions} executions "
        f"({CALLS_PER_EXECUTION} calls each); built in {build_s:.1f} s ({mb / build_s:.1f} MB/s encode)"
    )
    print(f"sha256 baseline        : {sha_rate:9.1f} MB/s")
    print(f"structural decode      : {struct_rate:9.1f} MB/s  ratio to sha256 {struct_rate / sha_rate:.3f}")
    print(
        f"full decode (deep=True): {full_rate:9.1f} MB/s  ratio to sha256 {full_rate / sha_rate:.3f}  "
        f"({executions / full_s:,.0f} executions/s)"
    )


if __name__ == "__main__":
    main()
