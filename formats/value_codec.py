"""Codec-1 value bodies: one protobuf ``BamlOutboundValue`` <-> a small typed tree.

Contract: :func:`decode_value` returns a :data:`Value` or raises a
:class:`formats.errors.FormatError` subclass (``MalformedError`` for bytes that are
not a valid message, ``LimitExceededError`` for nesting beyond the cap); nothing
else escapes. :func:`encode_value` writes the bytes the engine's trace encoder
(``bex_engine/src/trace_value_encode.rs``) writes for the same value.

Wire facts the decoder honours (checked against the real source):

* The oneof tags the trace encoder emits are 2, 3, 4, 5, 6, 7, 8, 11, 12, 17, 19, 20.
  Any other field is skipped under proto3 rules; a message whose oneof holds no
  known variant decodes to :class:`Unknown` (a newer producer), never an error.
* ``bigint_value`` is **base-16** text with an optional leading ``-`` (the guide
  says decimal; the encoder and the bridge schema say hex). :class:`BigInt` keeps
  the wire text and converts on demand.
* Omitted subtrees are a class named ``baml.trace.OmittedValue`` with exactly two
  string fields, ``reason`` then ``message``. Only that exact shape becomes
  :class:`Omitted`, so any other class of that name still round-trips unchanged.
* A map or class entry without a value reads as :class:`Null`.
* protobuf (upb here, prost in the engine) refuses messages nested deeper than
  100 levels; a list level costs 2 levels and a class/map level 3.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, TypeAlias

from google.protobuf.message import DecodeError

from formats.errors import LimitExceededError, MalformedError
from formats.proto import baml_outbound_pb2 as pb

OMITTED_CLASS = "baml.trace.OmittedValue"
# protobuf's own nesting limit (upb and prost both default to 100 messages).
PROTOBUF_MAX_DEPTH = 100
# Default cap on value levels (a value inside a list inside a class is depth 3).
DEFAULT_MAX_DEPTH = 64

MediaSource = Literal["url", "base64", "file"]
MEDIA_KIND_NAMES = {0: "unspecified", 1: "image", 2: "audio", 3: "pdf", 4: "video", 5: "other"}
_HEX_RE = re.compile(r"-?[0-9a-fA-F]+")


@dataclass(frozen=True, slots=True)
class Null:
    pass


@dataclass(frozen=True, slots=True)
class String:
    value: str


@dataclass(frozen=True, slots=True)
class Int:
    """A signed 64-bit integer."""

    value: int


@dataclass(frozen=True, slots=True)
class Float:
    """A double kept as its IEEE-754 bits, so NaN payloads and -0.0 survive and compare exactly."""

    bits: int

    @classmethod
    def of(cls, value: float) -> Float:
        return cls(struct.unpack(">Q", struct.pack(">d", value))[0])

    @property
    def value(self) -> float:
        return float(struct.unpack(">d", struct.pack(">Q", self.bits))[0])


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool


@dataclass(frozen=True, slots=True)
class Class:
    """A BAML class instance. ``type_args`` are the raw ``BamlTy`` messages of a generic instance."""

    name: str
    fields: tuple[tuple[str, Value], ...]
    type_args: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class Enum:
    name: str
    value: str
    is_dynamic: bool = False


@dataclass(frozen=True, slots=True)
class List:
    items: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Map:
    entries: tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Media:
    """A media reference. ``kind`` is the ``MediaTypeEnum`` number (an open enum: unknown numbers kept)."""

    kind: int
    mime_type: str | None
    source: MediaSource | None
    content: str = ""

    @property
    def kind_name(self) -> str:
        return MEDIA_KIND_NAMES.get(self.kind, f"kind_{self.kind}")


@dataclass(frozen=True, slots=True)
class Bytes:
    value: bytes


@dataclass(frozen=True, slots=True)
class BigInt:
    """A big integer, kept as the wire's base-16 text (``-`` prefix for negatives)."""

    text: str

    @classmethod
    def from_int(cls, value: int) -> BigInt:
        return cls(f"-{-value:x}" if value < 0 else f"{value:x}")

    def as_int(self) -> int | None:
        """The integer, or None when the producer wrote text that is not base-16."""
        if not _HEX_RE.fullmatch(self.text):
            return None
        return int(self.text, 16)

    @property
    def decimal(self) -> str:
        """Minimal decimal text; falls back to the wire text like the reference decoder."""
        number = self.as_int()
        return self.text if number is None else str(number)


@dataclass(frozen=True, slots=True)
class Omitted:
    """A subtree the engine dropped (``reason`` is e.g. ``hostOwnedValue``)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """A message whose oneof carried no variant this decoder knows (written by a newer producer)."""


Value: TypeAlias = (
    Null
    | String
    | Int
    | Float
    | Bool
    | Class
    | Enum
    | List
    | Map
    | Media
    | Bytes
    | BigInt
    | Omitted
    | Unknown
)


# --- decode -----------------------------------------------------------------------------------------


def decode_value(
    body: bytes | bytearray | memoryview, *, file: str | None = None, max_depth: int = DEFAULT_MAX_DEPTH
) -> Value:
    """Decode one codec-1 body (the CAS object's body, without the frame)."""
    try:
        message = pb.BamlOutboundValue.FromString(bytes(body))
    except DecodeError as exc:
        if "depth" in str(exc).lower():
            raise LimitExceededError(
                f"value nests deeper than protobuf's {PROTOBUF_MAX_DEPTH}-message limit", file=file
            ) from None
        raise MalformedError("body is not a valid BamlOutboundValue message", file=file) from None
    return _from_pb(message, max_depth, file)


def _from_pb(message: pb.BamlOutboundValue, depth_left: int, file: str | None) -> Value:
    if depth_left <= 0:
        raise LimitExceededError("value nests deeper than the decoder's depth cap", file=file)
    nxt = depth_left - 1
    kind = message.WhichOneof("value")
    if kind is None:
        return Unknown()
    if kind == "null_value":
        return Null()
    if kind == "string_value":
        return String(message.string_value)
    if kind == "int_value":
        return Int(message.int_value)
    if kind == "float_value":
        return Float.of(message.float_value)
    if kind == "bool_value":
        return Bool(message.bool_value)
    if kind == "uint8array_value":
        return Bytes(message.uint8array_value)
    if kind == "bigint_value":
        return BigInt(message.bigint_value)
    if kind == "list_value":
        return List(tuple(_from_pb(item, nxt, file) for item in message.list_value.items))
    if kind == "map_value":
        return Map(_entries(message.map_value.entries, nxt, file))
    if kind == "enum_value":
        e = message.enum_value
        return Enum(e.name, e.value, e.is_dynamic)
    if kind == "media_value":
        m = message.media_value
        source = m.WhichOneof("value")
        content = getattr(m, source) if source is not None else ""
        mime = m.mime_type if m.HasField("mime_type") else None
        return Media(int(m.media), mime, source, content)  # type: ignore[arg-type]
    if kind == "class_value":
        c = message.class_value
        fields = _entries(c.fields, nxt, file)
        type_args = tuple(c.type_args)
        omitted = _as_omitted(c.name, fields, type_args)
        return omitted if omitted is not None else Class(c.name, fields, type_args)
    raise MalformedError(f"unhandled variant {kind}", file=file)  # unreachable with this schema


def _entries(entries: object, depth_left: int, file: str | None) -> tuple[tuple[str, Value], ...]:
    out: list[tuple[str, Value]] = []
    for entry in entries:  # type: ignore[attr-defined]
        if entry.HasField("value"):
            out.append((entry.key, _from_pb(entry.value, depth_left, file)))
        else:
            out.append((entry.key, Null()))
    return tuple(out)


def _as_omitted(
    name: str, fields: tuple[tuple[str, Value], ...], type_args: tuple[bytes, ...]
) -> Omitted | None:
    if name != OMITTED_CLASS or type_args or len(fields) != 2:
        return None
    (k1, v1), (k2, v2) = fields
    if k1 == "reason" and k2 == "message" and isinstance(v1, String) and isinstance(v2, String):
        return Omitted(v1.value, v2.value)
    return None


# --- encode -----------------------------------------------------------------------------------------


def encode_value(value: Value) -> bytes:
    """Serialize ``value`` as the engine's trace encoder would (fields in order, proto3 defaults omitted).

    Raises LimitExceededError when the value nests deeper than protobuf can carry.
    """
    if message_depth(value) > PROTOBUF_MAX_DEPTH:
        raise LimitExceededError(f"value nests deeper than protobuf's {PROTOBUF_MAX_DEPTH}-message limit")
    message = pb.BamlOutboundValue()
    _fill(message, value)
    return message.SerializeToString(deterministic=True)


def _fill(message: pb.BamlOutboundValue, value: Value) -> None:
    # Filled top-down through add()/mutable fields: appending finished sub-messages would copy them.
    if isinstance(value, Null):
        message.null_value.SetInParent()
    elif isinstance(value, String):
        message.string_value = value.value
    elif isinstance(value, Bool):  # before Int: bool is not an Int here, but keep the order obvious
        message.bool_value = value.value
    elif isinstance(value, Int):
        message.int_value = value.value
    elif isinstance(value, Float):
        message.float_value = value.value
    elif isinstance(value, Bytes):
        message.uint8array_value = value.value
    elif isinstance(value, BigInt):
        message.bigint_value = value.text
    elif isinstance(value, List):
        message.list_value.SetInParent()
        for item in value.items:
            _fill(message.list_value.items.add(), item)
    elif isinstance(value, Map):
        message.map_value.SetInParent()
        for key, item in value.entries:
            entry = message.map_value.entries.add()
            entry.key = key
            entry.value.SetInParent()  # an Unknown item is an empty but present message
            _fill(entry.value, item)
    elif isinstance(value, Class):
        message.class_value.SetInParent()
        message.class_value.name = value.name
        for key, item in value.fields:
            entry = message.class_value.fields.add()
            entry.key = key
            entry.value.SetInParent()  # an Unknown item is an empty but present message
            _fill(entry.value, item)
        message.class_value.type_args.extend(value.type_args)
    elif isinstance(value, Omitted):
        _fill(
            message,
            Class(OMITTED_CLASS, (("reason", String(value.reason)), ("message", String(value.message)))),
        )
    elif isinstance(value, Enum):
        message.enum_value.SetInParent()
        message.enum_value.name = value.name
        message.enum_value.value = value.value
        message.enum_value.is_dynamic = value.is_dynamic
    elif isinstance(value, Media):
        media = message.media_value
        media.SetInParent()
        media.media = value.kind  # type: ignore[assignment]
        if value.mime_type is not None:
            media.mime_type = value.mime_type
        if value.source is not None:
            setattr(media, value.source, value.content)
    elif isinstance(value, Unknown):
        pass  # an empty message: the oneof unset
    else:
        raise TypeError(f"not a codec-1 value: {type(value).__name__}")


# --- helpers ----------------------------------------------------------------------------------------


def children(value: Value) -> Iterator[tuple[str | int, Value]]:
    """Direct children with their key (field/map key) or list index."""
    if isinstance(value, List):
        yield from enumerate(value.items)
    elif isinstance(value, Class):
        yield from value.fields
    elif isinstance(value, Map):
        yield from value.entries


def message_depth(value: Value) -> int:
    """Protobuf messages on the deepest path of this value's encoding (iterative: no recursion limit)."""
    best = 0
    stack: list[tuple[Value, int]] = [(value, 0)]  # (node, messages above its BamlOutboundValue)
    while stack:
        node, above = stack.pop()
        if isinstance(node, List):
            best = max(best, above + 2)
            stack.extend((item, above + 2) for item in node.items)
        elif isinstance(node, (Class, Map)):
            best = max(best, above + 2)
            stack.extend((child, above + 3) for _, child in children(node))
        elif isinstance(node, Omitted):
            best = max(best, above + 4)
        elif isinstance(node, (Null, Enum, Media)):
            best = max(best, above + 2)
        else:
            best = max(best, above + 1)
    return best
