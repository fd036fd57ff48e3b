"""Goldens pinned by the real profiler source's unit tests, rebuilt from our encoders.

Each test reconstructs the upstream fixture with the same inputs and asserts the
digest or hex string the upstream test asserts (BoundaryML/baml,
``baml_language/crates/bex_prof_store/src``). A mismatch means our bytes differ
from the real profiler's.
"""

from __future__ import annotations

import hashlib

from formats.cas import value_cid
from formats.cct import CctCounters, CctPayload, ContextDelta, CounterHealth, encode_cct_payload
from formats.data_segment import DataGroup, DataSegment, decode_data_segment, encode_data_segment
from formats.evidence import (
    CallScope,
    ErrorCapture,
    ErrorCaptureId,
    ErrorSource,
    ErrorUnwindKind,
    FunctionEndStatus,
    NormalContext,
    OverflowContext,
    OverflowReasonTag,
    RuntimeIdAnnotation,
    SpanEnd,
    SpanRuntimeId,
    SpanStart,
    TerminalErrorRef,
    ThreadEnd,
    ThreadEndStatus,
    ThreadStart,
    ThreadStartKind,
    ThrowSite,
    ValueAvailable,
    ValueLossReason,
    ValueLost,
    ValueOccurrence,
    ValueRole,
    decode_evidence_payload,
    encode_error_capture,
    encode_evidence_payload,
    encode_fact,
    encode_terminal_error_ref,
)
from formats.function_table import (
    FunctionEntry,
    FunctionFile,
    FunctionKind,
    FunctionOrigin,
    FunctionSpan,
    FunctionTable,
    decode_function_table,
    encode_function_table,
)
from formats.ids import (
    CallRef,
    CallSite,
    ContextTuple,
    EdgeKind,
    ThreadRef,
    context_key,
    decode_boundary_id,
    encode_boundary_id,
    uuid7_bytes,
)
from formats.meta_segment import (
    EngineStarted,
    ExecutionEndStatus,
    MetaSegment,
    RootEnded,
    RootStarted,
    StreamStarted,
    decode_meta_segment,
    encode_meta_segment,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- store.rs: segment_encodings_have_cross_platform_goldens ----------------------------

STREAM = bytes([9]) * 16


def _thread(thread_id: int) -> ThreadRef:
    return ThreadRef(STREAM, 1, thread_id)


def test_store_meta_segment_golden() -> None:
    records = (
        StreamStarted(42, 1_000, "golden", "test-arch"),
        EngineStarted(1, bytes([2]) * 16, bytes([3]) * 32, "rev", None),
        RootStarted(_thread(3), 10, bytes([9]) * 16),
        RootEnded(_thread(3), 20, ExecutionEndStatus.SUCCEEDED, 0, 1, 1, 1),
    )
    meta = encode_meta_segment(MetaSegment(1, STREAM, 7, records))
    assert sha(meta) == "ccb40cc7dcccdd402a626c422db29fce4dbf36e789f839dcf492dc4309f57b4d"
    assert decode_meta_segment(meta, expected_euid=STREAM, expected_sequence=1).records == records


def test_store_data_segment_golden() -> None:
    cct_only = DataGroup(_thread(1), CounterHealth(), 1, b"stand-in-cct-payload", 0, b"")
    evidence_only = DataGroup(_thread(2), CounterHealth(), 0, b"", 2, b"stand-in-evidence-payload")
    data = encode_data_segment(DataSegment(1, STREAM, (cct_only, evidence_only)))
    assert sha(data) == "e67d72a47ffeb03c6f1f6a0be573a952fea0f0603a2c7c94b8f598195388e8bd"
    assert decode_data_segment(data, expected_euid=STREAM).groups == (cct_only, evidence_only)


# -- cct_codec.rs: cct_payload_golden_checksum_is_cross_platform ------------------------


def test_cct_payload_golden() -> None:
    # One root call of function 7 at site (1,2,3,4): started selected, ended Ok
    # after 100 ns with 20 ns awaited over 2 awaits (the upstream epoch fixture).
    t = ContextTuple(bytes([0x11]) * 16, None, 7, CallSite(1, 2, 3, 4), EdgeKind.ROOT)
    counters = CctCounters(
        invocations_started=1, spans_selected=1, completed_ok=1, inclusive_ns=100, await_ns=20, await_count=2
    )
    payload = CctPayload((ContextDelta.for_tuple(t, counters),))
    encoded = encode_cct_payload(payload)
    assert sha(encoded) == "571002989e5472f82280e134f87406b886f9348b4af4304e65ab88742ec8dd7f"
    assert payload.record_count == 1
    assert CounterHealth().to_byte() == 0


# -- evidence_codec.rs: evidence_payload_golden_checksum_is_cross_platform --------------


def _evidence_fixture() -> list:
    call_ref = CallRef(bytes([1]) * 16, 2, 3, 4)
    thread_ref = call_ref.thread
    ctx = NormalContext(bytes([5]) * 32)
    error_id = ErrorCaptureId(thread_ref, 6)
    return [
        SpanStart(
            call_ref,
            None,
            thread_ref,
            ctx,
            8,
            CallSite(9, 10, 11, 12),
            EdgeKind.ROOT,
            13,
            1,
            7,
            RuntimeIdAnnotation(0, bytes([14]) * 16),
        ),
        SpanRuntimeId(call_ref, 1, bytes([15]) * 16),
        ValueOccurrence(call_ref, ctx, ValueRole.INPUT, ValueLost(ValueLossReason.VALUE_MEMORY_EXCEEDED)),
        ErrorCapture(
            error_id,
            call_ref,
            OverflowContext(OverflowReasonTag.INVALID_PARENT_CONTEXT, EdgeKind.CALL),
            8,
            None,
            ErrorUnwindKind.FRESH,
            ErrorSource.BYTECODE,
            ValueLost(ValueLossReason.COPY_FAILED),
        ),
        TerminalErrorRef(call_ref, error_id),
        SpanEnd(call_ref, 20, FunctionEndStatus.ERRORED, 7),
        ThreadStart(thread_ref, None, None, None, 5, ThreadStartKind.ROOT, ""),
        ThreadStart(
            ThreadRef(thread_ref.euid, thread_ref.engine_id, 9),
            thread_ref,
            call_ref,
            CallSite(1, 2, 3, 4),
            6,
            ThreadStartKind.SPAWN,
            "worker",
        ),
        ThreadEnd(thread_ref, 30, ThreadEndStatus.COMPLETED),
    ]


def test_evidence_payload_golden() -> None:
    facts = _evidence_fixture()
    encoded = encode_evidence_payload(facts)
    assert sha(encoded) == "9464a212e3c41a28b0e7ba4e16330855b373fbcb9c367fd0b479eba0daaa2559"
    assert len(facts) == 9
    assert decode_evidence_payload(encoded, 9) == facts


def test_evidence_call_scope_body_golden() -> None:
    tag, body = encode_fact(
        CallScope(CallRef(bytes([1]) * 16, 2, 3, 4), None, ValueLost(ValueLossReason.ENCODE_FAILED))
    )
    assert tag == 9
    assert (
        body.hex() == "01010101010101010101010101010101000000000000000200000000000000030000000000000004000105"
    )


# -- evidence.rs: error_record_codecs_have_cross_platform_goldens -----------------------


def _capture() -> ErrorCapture:
    thread_ref = ThreadRef(bytes([1]) * 16, 2, 3)
    return ErrorCapture(
        ErrorCaptureId(thread_ref, 4),
        CallRef(thread_ref.euid, 2, 3, 6),
        NormalContext(bytes([7]) * 32),
        8,
        ThrowSite(file_id=9, line=10, start_offset=11, end_offset=12),
        ErrorUnwindKind.RETHROW,
        ErrorSource.FUTURE_RESUME,
        ValueAvailable(bytes([13]) * 32, 14, 15),
    )


def test_error_capture_record_golden() -> None:
    assert encode_error_capture(_capture()).hex() == (
        "42414d4c4552523100010101010101010101010101010101010100000000000000020000000000000003000000000000"
        "000401010101010101010101010101010101000000000000000200000000000000030000000000000006000707070707"
        "0707070707070707070707070707070707070707070707070707070000000801000000090000000a0000000b0000000c"
        "0103000d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d000e000000000000000f"
    )


def test_terminal_error_record_golden() -> None:
    record = TerminalErrorRef(CallRef(bytes([1]) * 16, 2, 3, 20), _capture().id)
    assert encode_terminal_error_ref(record).hex() == (
        "42414d4c544552310001010101010101010101010101010101010000000000000002000000000000000300000000000000140001"
        "010101010101010101010101010101000000000000000200000000000000030000000000000004"
    )


# -- function_table.rs: function_table_golden_checksum_is_cross_platform ----------------


def test_function_table_golden() -> None:
    table = FunctionTable(
        (
            FunctionEntry(
                1,
                "app.Score",
                "Score",
                "function:app.Score",
                FunctionKind.BYTECODE,
                None,
                FunctionOrigin.USER_DEFINED,
                "app.baml",
                FunctionSpan(3, 10, 90),
                "app",
                ("inner",),
            ),
            FunctionEntry(
                2, "baml.sys.print", "print", None, FunctionKind.SYS_OP, "print", FunctionOrigin.BUILTIN
            ),
        ),
        (FunctionFile(3, "app.baml"),),
    )
    encoded = encode_function_table(table)
    assert sha(encoded) == "2df672d2dcdd5170932c4e167ae9f4608a6ae6015172231406b3fc7f2084912e"
    assert decode_function_table(encoded) == table


# -- domain.rs: context_key_golden_is_stable, value_cid_golden_and_domain_separation ----


def test_context_key_golden() -> None:
    t = ContextTuple(bytes([0x11]) * 16, bytes([0x22]) * 32, 0x01020304, CallSite(5, 6, 7, 8), EdgeKind.SPAWN)
    assert context_key(t).hex() == "a7ae20370bed3ef26edf6a067c9b14dae5feba1bc870eb5a4e4be55616034d9b"


def test_value_cid_golden() -> None:
    body = b"\x00baml-value-body\xff"
    assert value_cid(1, body).hex() == "fe620b74bb3027bd1bba4d70cde577cb5b4e0238398f1d97df27dbcb14b29944"
    assert value_cid(2, body) != value_cid(1, body)


# -- ids.rs: boundary_id_round_trips_with_existing_wire_shape ---------------------------


def test_boundary_id_wire_string_golden() -> None:
    raw = bytes([11]) * 16
    assert encode_boundary_id(raw) == "baml_id_1_CwsLCwsLCwsLCwsLCwsLCw"
    assert decode_boundary_id("baml_id_1_CwsLCwsLCwsLCwsLCwsLCw") == raw


def test_zero_random_uuid_v7_golden() -> None:
    assert uuid7_bytes(0x0123_4567_89AB, bytes(10)) == bytes(
        [1, 0x23, 0x45, 0x67, 0x89, 0xAB, 0x70, 0, 0x80, 0, 0, 0, 0, 0, 0, 0]
    )
