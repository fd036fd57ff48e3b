"""Codec-1 value bodies: round trips, golden wire bytes, proto3 rules and every bad-input reason."""

from __future__ import annotations

import contextlib
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import value_codec as vc
from formats.errors import FormatError, LimitExceededError, MalformedError
from formats.proto import baml_outbound_pb2 as pb

try:
    from value_strategies import values
except ImportError:  # tests collected as a package
    from tests.formats.value_strategies import values


def _len(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payloads here stay under 128 bytes)."""
    assert len(payload) < 128
    tag = (field << 3) | 2
    tag_bytes = bytes([tag]) if tag < 128 else bytes([(tag & 0x7F) | 0x80, tag >> 7])
    return tag_bytes + bytes([len(payload)]) + payload


# (value, the bytes prost writes for it) -- built by hand from the protobuf wire rules.
GOLDEN = [
    (vc.Null(), bytes.fromhex("1200")),
    (vc.String("hi"), bytes.fromhex("1a026869")),
    (vc.String(""), bytes.fromhex("1a00")),  # a set oneof member is written even when empty
    (vc.Int(7), bytes.fromhex("2007")),
    (vc.Int(0), bytes.fromhex("2000")),
    (vc.Int(-1), bytes.fromhex("20ffffffffffffffffff01")),
    (vc.Float.of(1.5), b"\x29" + struct.pack("<d", 1.5)),
    (vc.Bool(True), bytes.fromhex("3001")),
    (vc.Bool(False), bytes.fromhex("3000")),
    (vc.Bytes(b"\x00\xff"), bytes.fromhex("9a010200ff")),
    (vc.BigInt("ff"), bytes.fromhex("a201026666")),
    (vc.List((vc.Int(1), vc.Int(2))), _len(11, _len(2, b"\x20\x01") + _len(2, b"\x20\x02"))),
    (vc.List(()), bytes.fromhex("5a00")),
    (vc.Map((("a", vc.Int(1)),)), _len(12, _len(3, _len(1, b"a") + _len(2, b"\x20\x01")))),
    (
        vc.Class("user.Person", (("name", vc.String("ada")),)),
        _len(7, _len(1, b"user.Person") + _len(2, _len(1, b"name") + _len(2, _len(3, b"ada")))),
    ),
    (vc.Class("", (("", vc.Int(1)),)), _len(7, _len(2, _len(2, b"\x20\x01")))),  # proto3 omits empty strings
    (vc.Enum("Color", "RED"), _len(8, _len(1, b"Color") + _len(2, b"RED"))),  # is_dynamic false omitted
    (vc.Enum("Color", "RED", True), _len(8, _len(1, b"Color") + _len(2, b"RED") + b"\x18\x01")),
    (
        vc.Media(1, "image/png", "base64", "aW1n"),
        _len(17, b"\x08\x01" + _len(2, b"image/png") + _len(4, b"aW1n")),
    ),
    (vc.Media(0, "", "url", "u"), _len(17, _len(2, b"") + _len(3, b"u"))),  # an optional mime type is kept
    (vc.Media(5, None, "file", "a.pdf"), _len(17, b"\x08\x05" + _len(5, b"a.pdf"))),
    (
        vc.Omitted("hostOwnedValue", "host-owned callable"),
        _len(
            7,
            _len(1, b"baml.trace.OmittedValue")
            + _len(2, _len(1, b"reason") + _len(2, _len(3, b"hostOwnedValue")))
            + _len(2, _len(1, b"message") + _len(2, _len(3, b"host-owned callable"))),
        ),
    ),
    (vc.Unknown(), b""),
]


@pytest.mark.parametrize(("value", "wire"), GOLDEN, ids=[type(v).__name__ for v, _ in GOLDEN])
def test_golden_wire_bytes_encode_and_decode(value: vc.Value, wire: bytes) -> None:
    assert vc.encode_value(value) == wire
    assert vc.decode_value(wire) == value


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip_of_random_nested_values(value: vc.Value) -> None:
    body = vc.encode_value(value)
    assert vc.decode_value(body) == value
    # The protobuf runtime re-serializes our bytes unchanged: field order and omissions are canonical.
    assert pb.BamlOutboundValue.FromString(body).SerializeToString(deterministic=True) == body


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_float_bits_survive_exactly(bits: int) -> None:
    value = vc.Float(bits)
    decoded = vc.decode_value(vc.encode_value(value))
    assert isinstance(decoded, vc.Float) and decoded.bits == bits


def test_negative_zero_and_nan_keep_their_bits() -> None:
    assert vc.decode_value(vc.encode_value(vc.Float.of(-0.0))) == vc.Float(0x8000000000000000)
    nan = vc.decode_value(vc.encode_value(vc.Float(0x7FF8000000000001)))
    assert isinstance(nan, vc.Float) and math.isnan(nan.value) and nan.bits == 0x7FF8000000000001


def test_bigint_wire_text_is_base16() -> None:
    # The engine writes format!("{:x}") of the BigInt; the reference decoder reads ff -> 255, -a -> -10.
    assert vc.BigInt.from_int(255).text == "ff"
    assert vc.BigInt.from_int(-10).text == "-a"
    assert vc.BigInt.from_int(0).text == "0"
    assert vc.BigInt("ff").decimal == "255"
    assert vc.BigInt("-a").decimal == "-10"
    assert vc.BigInt("-a").as_int() == -10
    # Text the engine could not parse as a bigint is passed through; keep it as is.
    assert vc.BigInt("not hex").as_int() is None
    assert vc.BigInt("not hex").decimal == "not hex"
    assert vc.BigInt("0x10").as_int() is None  # no Python-only prefixes
    assert vc.decode_value(bytes.fromhex("a2010d") + b"-123456789abc") == vc.BigInt("-123456789abc")


def test_unknown_fields_are_skipped() -> None:
    unknown_varint = bytes([(99 << 3) & 0x7F | 0x80, 99 >> 4]) + b"\x05"  # field 99, varint 5
    assert vc.decode_value(b"\x20\x07" + unknown_varint) == vc.Int(7)
    assert vc.decode_value(unknown_varint + b"\x20\x07") == vc.Int(7)
    # An unknown field inside a nested message (class field 9) is skipped too.
    body = _len(7, _len(1, b"C") + b"\x48\x01" + _len(2, _len(1, b"k") + _len(2, b"\x20\x01")))
    assert vc.decode_value(body) == vc.Class("C", (("k", vc.Int(1)),))
    # List/map element types (field 1 of list and map) are not modelled: skipped.
    assert vc.decode_value(_len(11, _len(1, b"\x08\x01") + _len(2, b"\x20\x02"))) == vc.List((vc.Int(2),))


def test_a_variant_unknown_to_this_decoder_reads_as_unknown() -> None:
    literal_value = _len(9, _len(1, b"lit"))  # BamlLiteralValue, which the trace encoder never writes
    assert vc.decode_value(literal_value) == vc.Unknown()
    assert vc.decode_value(_len(11, _len(2, literal_value))) == vc.List((vc.Unknown(),))
    assert vc.decode_value(b"") == vc.Unknown()


def test_entry_without_a_value_reads_as_null() -> None:
    assert vc.decode_value(_len(12, _len(3, _len(1, b"k")))) == vc.Map((("k", vc.Null()),))


def test_last_oneof_member_wins_like_protobuf() -> None:
    assert vc.decode_value(b"\x20\x07" + _len(3, b"x")) == vc.String("x")


def test_omitted_needs_the_exact_engine_shape() -> None:
    other = vc.Class(vc.OMITTED_CLASS, (("reason", vc.String("r")),))
    assert vc.decode_value(vc.encode_value(other)) == other
    swapped = vc.Class(vc.OMITTED_CLASS, (("message", vc.String("m")), ("reason", vc.String("r"))))
    assert vc.decode_value(vc.encode_value(swapped)) == swapped
    exact = vc.Class(vc.OMITTED_CLASS, (("reason", vc.String("r")), ("message", vc.String("m"))))
    assert vc.decode_value(vc.encode_value(exact)) == vc.Omitted("r", "m")


def test_type_args_are_kept_verbatim() -> None:
    generic = vc.Class("Box", (("x", vc.Int(1)),), (b"\x0a\x02\x08\x02",))
    assert vc.decode_value(vc.encode_value(generic)) == generic


def _nested_lists(levels: int) -> bytes:
    body = b"\x20\x01"
    for _ in range(levels):
        item = _varint_len(2, body)
        body = _varint_len(11, item)
    return body


def _varint_len(field: int, payload: bytes) -> bytes:
    n, length = len(payload), bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        length.append(byte | (0x80 if n else 0))
        if not n:
            break
    return bytes([(field << 3) | 2]) + bytes(length) + payload


def test_depth_beyond_protobufs_limit_is_a_typed_error() -> None:
    ok = _nested_lists(49)  # 49 lists = 99 nested messages, within prost's and upb's limits
    assert vc.message_depth(vc.decode_value(ok, max_depth=1000)) == 99
    with pytest.raises(LimitExceededError) as info:
        vc.decode_value(_nested_lists(51), max_depth=1000, file="k")  # 103 messages: upb refuses
    assert info.value.reason == "limit_exceeded" and info.value.file == "k"


def test_depth_cap_is_a_typed_error() -> None:
    with pytest.raises(LimitExceededError):
        vc.decode_value(_nested_lists(10), max_depth=10)
    assert vc.decode_value(_nested_lists(10), max_depth=11) is not None


def test_encoding_too_deep_a_value_is_a_typed_error() -> None:
    value: vc.Value = vc.Int(1)
    for _ in range(49):
        value = vc.List((value,))
    assert vc.message_depth(value) == 99
    vc.encode_value(value)
    with pytest.raises(LimitExceededError):
        vc.encode_value(vc.List((value,)))  # 101 messages: more than prost would read back


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff",  # not a tag
        b"\x1a\x05ab",  # string runs past the end
        b"\x1a\x02\xff\xfe",  # string is not UTF-8
        b"\x20",  # varint missing
        b"\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # varint longer than 10 bytes
        _len(7, b"\x0a\x05ab"),  # nested message cut short
        b"\x00",  # field number 0
    ],
)
def test_bad_bodies_are_malformed(body: bytes) -> None:
    with pytest.raises(MalformedError) as info:
        vc.decode_value(body, file="cas/ab/x.bamlvalue")
    assert info.value.reason == "malformed" and info.value.file == "cas/ab/x.bamlvalue"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_give_a_value_or_a_format_error(body: bytes) -> None:
    with contextlib.suppress(FormatError):
        vc.decode_value(body)


@settings(max_examples=100, deadline=None)
@given(values, st.data())
def test_corrupted_bodies_never_escape_the_error_family(value: vc.Value, data: st.DataObject) -> None:
    body = bytearray(vc.encode_value(value))
    if body:
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(FormatError):
        vc.decode_value(bytes(body))
