"""Identities: ThreadRef/CallRef bytes and strings, boundary ids, euids, context keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from prof_strategies import b16, call_refs, thread_refs

from formats.errors import MalformedError, UnsupportedVersionError
from formats.ids import (
    CallRef,
    CallSite,
    ContextTuple,
    EdgeKind,
    ThreadRef,
    context_key,
    decode_boundary_id,
    decode_runtime_id,
    encode_boundary_id,
    euid_hex,
    is_uuid7,
    new_euid,
    parse_euid_hex,
)


@settings(max_examples=100, deadline=None)
@given(thread_refs, call_refs, b16)
def test_round_trips(t: ThreadRef, c: CallRef, raw: bytes) -> None:
    assert ThreadRef.from_bytes(t.to_bytes()) == t and len(t.to_bytes()) == 32
    assert ThreadRef.decode_string(t.encode_string()) == t
    assert CallRef.from_bytes(c.to_bytes()) == c and len(c.to_bytes()) == 40
    assert CallRef.decode_string(c.encode_string()) == c
    assert decode_boundary_id(encode_boundary_id(raw)) == raw
    assert decode_runtime_id(c.encode_string()) == c
    assert decode_runtime_id(encode_boundary_id(raw)) == raw


def test_execution_id_is_hex_of_root_thread_ref() -> None:
    root = ThreadRef(bytes(range(16)), 1, 2)
    assert root.execution_id == bytes(range(16)).hex() + "0000000000000001" + "0000000000000002"


def test_thread_ref_orders_by_bytes() -> None:
    a, b = ThreadRef(bytes(16), 1, 2**63), ThreadRef(bytes(16), 2, 0)
    assert a.to_bytes() < b.to_bytes()


def test_string_forms_reject_malformed_input() -> None:
    t = ThreadRef(bytes([9]) * 16, 10, 11)
    with pytest.raises(MalformedError) as e:
        CallRef.decode_string(t.encode_string())
    assert e.value.reason == "invalid_prefix"
    with pytest.raises(MalformedError) as e:
        ThreadRef.decode_string("baml_thread_1_!")
    assert e.value.reason == "invalid_base64"
    with pytest.raises(MalformedError) as e:
        decode_boundary_id(encode_boundary_id(bytes(16))[:-2])
    assert e.value.reason in {"invalid_length", "invalid_base64"}
    with pytest.raises(MalformedError):
        decode_boundary_id("baml_id_1_AAAAAAAAAAAAAAAAAAAAAA==")
    with pytest.raises(MalformedError):
        decode_runtime_id(t.encode_string())
    import base64

    bad_version = "baml_thread_1_" + base64.urlsafe_b64encode(bytes([99]) + bytes(32)).rstrip(b"=").decode()
    with pytest.raises(UnsupportedVersionError):
        ThreadRef.decode_string(bad_version)


def test_euids() -> None:
    euid = new_euid()
    assert is_uuid7(euid) and new_euid() != euid
    assert parse_euid_hex(euid_hex(euid)) == euid
    for bad in ("A" * 32, "0" * 31, "zz" * 16):
        with pytest.raises(MalformedError):
            parse_euid_hex(bad)


def test_context_key_depends_on_every_field() -> None:
    base = ContextTuple(bytes(16), None, 1, CallSite(1, 2, 3, 4), EdgeKind.CALL)
    keys = {
        context_key(base),
        context_key(ContextTuple(bytes([1]) * 16, None, 1, CallSite(1, 2, 3, 4), EdgeKind.CALL)),
        context_key(ContextTuple(bytes(16), bytes(32), 1, CallSite(1, 2, 3, 4), EdgeKind.CALL)),
        context_key(ContextTuple(bytes(16), None, 2, CallSite(1, 2, 3, 4), EdgeKind.CALL)),
        context_key(ContextTuple(bytes(16), None, 1, None, EdgeKind.CALL)),
        context_key(ContextTuple(bytes(16), None, 1, CallSite(1, 2, 3, 5), EdgeKind.CALL)),
        context_key(ContextTuple(bytes(16), None, 1, CallSite(1, 2, 3, 4), EdgeKind.SPAWN)),
    }
    assert len(keys) == 7 and base.key() == context_key(base)
