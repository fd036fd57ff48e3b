"""Function table (codec 2 body)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from prof_strategies import function_tables

from formats.cas import CODEC_FUNCTION_TABLE, decode_cas_object, encode_cas_object
from formats.errors import (
    FormatError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    UnsupportedVersionError,
)
from formats.function_table import (
    FunctionEntry,
    FunctionFile,
    FunctionKind,
    FunctionOrigin,
    FunctionTable,
    decode_function_table,
    encode_function_table,
)
from formats.wire import EncodeError


@settings(max_examples=80, deadline=None)
@given(function_tables())
def test_round_trip_byte_exact(table: FunctionTable) -> None:
    data = encode_function_table(table)
    out = decode_function_table(data)
    assert out == table
    assert encode_function_table(out) == data


def test_unknown_codes_decode_to_none_and_keep_their_byte() -> None:
    entry = FunctionEntry(1, "a", "a", kind_code=9, origin_code=255)
    out = decode_function_table(encode_function_table(FunctionTable((entry,)))).functions[0]
    assert out.kind is None and out.origin is None and out.kind_code == 9
    assert FunctionEntry(2, "b", "b", kind_code=1, origin_code=3).kind is FunctionKind.SYS_OP
    assert FunctionEntry(2, "b", "b", kind_code=1, origin_code=3).origin is FunctionOrigin.BUILTIN


def test_inside_a_cas_object() -> None:
    table = FunctionTable((FunctionEntry(1, "app.F", "F"),), (FunctionFile(1, "main.baml"),))
    obj = decode_cas_object(encode_cas_object(CODEC_FUNCTION_TABLE, encode_function_table(table)))
    assert decode_function_table(obj.body) == table
    assert table.function(1) is not None and table.file_path(1) == "main.baml" and table.file_path(2) is None


def test_bad_input() -> None:
    good = encode_function_table(FunctionTable((FunctionEntry(1, "a", "a"), FunctionEntry(2, "b", "b"))))
    with pytest.raises(UnsupportedVersionError):
        decode_function_table(b"\x00\x02" + good[2:])
    for cut in range(len(good)):
        with pytest.raises(FormatError):
            decode_function_table(good[:cut])
    with pytest.raises(TrailingBytesError):
        decode_function_table(good + b"\x00")
    unordered = encode_function_table(FunctionTable((FunctionEntry(2, "a", "a"), FunctionEntry(1, "b", "b"))))
    with pytest.raises(MalformedError) as e:
        decode_function_table(unordered)
    assert e.value.reason == "unordered"
    files = encode_function_table(FunctionTable((), (FunctionFile(3, "x"), FunctionFile(3, "y"))))
    with pytest.raises(MalformedError):
        decode_function_table(files)
    with pytest.raises(LimitExceededError):
        decode_function_table(b"\x00\x01" + struct.pack(">I", 10**6))
    long_path = b"\x00\x01" + struct.pack(">II", 0, 1) + struct.pack(">II", 1, 70000) + b"a" * 70000
    with pytest.raises(LimitExceededError) as e2:
        decode_function_table(long_path)
    assert e2.value.reason == "string_too_long"
    with pytest.raises(EncodeError):
        encode_function_table(FunctionTable((), (FunctionFile(1, "a" * 70000),)))
    bad_utf8 = b"\x00\x01" + struct.pack(">II", 0, 1) + struct.pack(">II", 1, 1) + b"\xc3"
    with pytest.raises(MalformedError) as e3:
        decode_function_table(bad_utf8)
    assert e3.value.reason == "bad_utf8"
