"""Big-endian wire primitives shared by the profiler-store codecs.

Contract: :class:`Reader` returns values or raises a :mod:`formats.errors`
subclass naming the file, the absolute byte offset and a stable reason.
:class:`Writer` builds byte strings and raises :class:`EncodeError` (a
``ValueError``) when an object cannot be encoded (a field out of range, a string
over the 64 KiB cap).

Conventions (publisher guide, "Conventions"; real source ``store.rs``):

- integers are unsigned big-endian (``u8``, ``u16``, ``u32``, ``u64``, ``u128``);
- a string is ``u32 length`` + UTF-8, capped at 64 KiB by the writer;
- an optional field is a ``u8`` presence flag (0 or 1) followed by the field.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, NoReturn, TypeVar

from formats.errors import (
    FormatError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
)

MAX_STRING_BYTES = 64 * 1024
"""The store's string cap (``MAX_ENCODED_STRING`` in ``store.rs`` and ``function_table.rs``)."""

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U128 = struct.Struct(">QQ")
_TAG_LEN = struct.Struct(">BI")

E = TypeVar("E", bound=enum.IntEnum)

U64_MAX = (1 << 64) - 1
U128_MAX = (1 << 128) - 1


def enum_members(cls: type[E]) -> tuple[E, ...]:
    """An int enum's members indexed by value (values 0..n-1): a tuple index is much cheaper
    than ``cls(value)`` in hot decoders, after :meth:`Reader.tag` has checked the range."""
    members = tuple(cls)
    if [int(m) for m in members] != list(range(len(members))):  # type: ignore[call-overload]
        raise ValueError(f"{cls.__name__} values are not 0..{len(members) - 1}")
    return members


class EncodeError(ValueError):
    """An object cannot be encoded (out-of-range field, string over the cap...)."""


class Reader:
    """A bounds-checked cursor over ``data[start:end]``.

    Offsets in errors are absolute: ``base`` is the offset of ``data[0]`` in
    the named file, so nested payload readers still point at the right byte.
    """

    __slots__ = ("_data", "_end", "_pos", "base", "file")

    def __init__(
        self,
        data: bytes,
        *,
        file: str | None = None,
        start: int = 0,
        end: int | None = None,
        base: int = 0,
    ) -> None:
        self._data = data
        self._pos = start
        self._end = len(data) if end is None else end
        self.file = file
        self.base = base

    # -- position ---------------------------------------------------------
    @property
    def pos(self) -> int:
        """Position inside ``data`` (not absolute)."""
        return self._pos

    @property
    def offset(self) -> int:
        """Absolute offset of the next byte in the file."""
        return self.base + self._pos

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def at_end(self) -> bool:
        return self._pos == self._end

    # -- failures ---------------------------------------------------------
    def fail(
        self, cls: type[FormatError], message: str, *, reason: str | None = None, at: int | None = None
    ) -> NoReturn:
        offset = self.offset if at is None else self.base + at
        raise cls(message, file=self.file, offset=offset, reason=reason)

    def _need(self, n: int, what: str) -> None:
        if n > self._end - self._pos:
            self.fail(TruncatedError, f"{what}: needs {n} bytes, {self._end - self._pos} left")

    # -- fixed-width fields -----------------------------------------------
    def u8(self, what: str = "u8") -> int:
        if self._pos >= self._end:
            self.fail(TruncatedError, f"{what}: needs 1 byte, 0 left")
        value = self._data[self._pos]
        self._pos += 1
        return value

    def u16(self, what: str = "u16") -> int:
        self._need(2, what)
        (value,) = _U16.unpack_from(self._data, self._pos)
        self._pos += 2
        return int(value)

    def u32(self, what: str = "u32") -> int:
        self._need(4, what)
        (value,) = _U32.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(value)

    def u64(self, what: str = "u64") -> int:
        self._need(8, what)
        (value,) = _U64.unpack_from(self._data, self._pos)
        self._pos += 8
        return int(value)

    def u128(self, what: str = "u128") -> int:
        self._need(16, what)
        high, low = _U128.unpack_from(self._data, self._pos)
        self._pos += 16
        return (int(high) << 64) | int(low)

    def fixed(self, n: int, what: str) -> bytes:
        """Exactly ``n`` bytes of a fixed-width field (an id, a digest)."""
        self._need(n, what)
        start = self._pos
        self._pos = start + n
        return bytes(self._data[start : start + n])

    def unpack(self, layout: struct.Struct, what: str) -> tuple[Any, ...]:
        """Several fixed-width fields at once, integers and ids as bytes (speed: one ``unpack_from``)."""
        self._need(layout.size, what)
        values = layout.unpack_from(self._data, self._pos)
        self._pos += layout.size
        return values

    def framed(self, tag_what: str, len_what: str, body_what: str) -> tuple[int, Reader]:
        """``u8 tag ‖ u32 body_len ‖ body``: the tag and a reader over the body.

        The same checks and errors as ``u8``, ``u32`` then ``sub``, with one unpack when the
        five header bytes are there (the common case)."""
        pos = self._pos
        if self._end - pos >= 5:
            tag, n = _TAG_LEN.unpack_from(self._data, pos)
            self._pos = pos + 5
            return tag, self.sub(n, body_what)
        tag = self.u8(tag_what)
        return tag, self.sub(self.u32(len_what), body_what)

    def peek_rest(self, layout: struct.Struct) -> tuple[Any, ...] | None:
        """``layout`` unpacked over exactly the bytes left, without consuming them; None when
        the sizes differ. For decoders' fast paths: on a hit they check the values and
        :meth:`skip_rest`, else they decode field by field (which raises the precise error)."""
        if self._end - self._pos != layout.size:
            return None
        return layout.unpack_from(self._data, self._pos)

    def skip_rest(self) -> None:
        self._pos = self._end

    # -- declared lengths ----------------------------------------------------
    def check_length(self, n: int, what: str) -> None:
        """A declared length must fit in the bytes left of its region."""
        if n > self._end - self._pos:
            self.fail(
                LimitExceededError,
                f"{what}: declared length {n} exceeds the {self._end - self._pos} bytes left",
                reason="oversize_length",
            )

    def check_count(self, count: int, min_item_size: int, what: str) -> None:
        """A declared item count must fit: ``count * min_item_size <= bytes left``."""
        if count * min_item_size > self._end - self._pos:
            self.fail(
                LimitExceededError,
                f"{what}: {count} items of at least {min_item_size} bytes cannot fit in "
                f"{self._end - self._pos} bytes",
                reason="oversize_length",
            )

    def region(self, n: int, what: str) -> tuple[int, int]:
        """Consume a declared-length region; return its (start, end) inside ``data``."""
        self.check_length(n, what)
        start = self._pos
        self._pos = start + n
        return start, start + n

    def sub(self, n: int, what: str) -> Reader:
        """A reader over the next ``n`` bytes (a length-prefixed body)."""
        start, end = self.region(n, what)
        return Reader(self._data, file=self.file, start=start, end=end, base=self.base)

    def _utf8(self, n: int, what: str, cap: int | None) -> str:
        if cap is not None and n > cap:
            self.fail(
                LimitExceededError,
                f"{what}: string of {n} bytes exceeds the {cap}-byte cap",
                reason="string_too_long",
            )
        start, end = self.region(n, what)
        try:
            return str(self._data[start:end], "utf-8")
        except UnicodeDecodeError:
            self.fail(MalformedError, f"{what}: not valid UTF-8", reason="bad_utf8", at=start)

    def string(self, what: str, *, cap: int | None = MAX_STRING_BYTES) -> str:
        """``u32 length`` + UTF-8."""
        return self._utf8(self.u32(f"{what} length"), what, cap)

    def string_u64(self, what: str, *, cap: int | None = None) -> str:
        """``u64 length`` + UTF-8 (the log-event and call-scope strings)."""
        return self._utf8(self.u64(f"{what} length"), what, cap)

    def flag(self, what: str) -> bool:
        """An optional field's presence byte: 0 or 1, anything else is malformed."""
        at = self._pos
        value = self.u8(what)
        if value > 1:
            self.fail(
                MalformedError, f"{what}: presence flag {value} is not 0 or 1", reason="unknown_tag", at=at
            )
        return value == 1

    def optional_string(self, what: str, *, cap: int | None = MAX_STRING_BYTES) -> str | None:
        return self.string(what, cap=cap) if self.flag(what) else None

    def optional_string_u64(self, what: str) -> str | None:
        return self.string_u64(what) if self.flag(what) else None

    def tag(self, what: str, limit: int) -> int:
        """A ``u8`` enum tag in ``range(limit)``; unknown tags are malformed."""
        at = self._pos
        value = self.u8(what)
        if value >= limit:
            self.fail(MalformedError, f"{what}: unknown tag {value}", reason="unknown_tag", at=at)
        return value

    def finish(self, what: str) -> None:
        if self._pos != self._end:
            self.fail(TrailingBytesError, f"{what}: {self._end - self._pos} unexpected trailing bytes")


class Writer:
    """Appends big-endian fields to a ``bytearray``."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def fixed(self, data: bytes, n: int, what: str) -> None:
        if len(data) != n:
            raise EncodeError(f"{what} must be {n} bytes, got {len(data)}")
        self.buf += data

    def u8(self, value: int, what: str = "u8") -> None:
        if not 0 <= value <= 0xFF:
            raise EncodeError(f"{what} {value} does not fit in u8")
        self.buf.append(value)

    def u16(self, value: int, what: str = "u16") -> None:
        if not 0 <= value <= 0xFFFF:
            raise EncodeError(f"{what} {value} does not fit in u16")
        self.buf += _U16.pack(value)

    def u32(self, value: int, what: str = "u32") -> None:
        if not 0 <= value <= 0xFFFFFFFF:
            raise EncodeError(f"{what} {value} does not fit in u32")
        self.buf += _U32.pack(value)

    def u64(self, value: int, what: str = "u64") -> None:
        if not 0 <= value <= U64_MAX:
            raise EncodeError(f"{what} {value} does not fit in u64")
        self.buf += _U64.pack(value)

    def u128(self, value: int, what: str = "u128") -> None:
        if not 0 <= value <= U128_MAX:
            raise EncodeError(f"{what} {value} does not fit in u128")
        self.buf += _U128.pack(value >> 64, value & U64_MAX)

    def flag(self, present: bool) -> None:
        self.buf.append(1 if present else 0)

    def string(self, value: str, what: str, *, cap: int | None = MAX_STRING_BYTES) -> None:
        data = value.encode("utf-8")
        if cap is not None and len(data) > cap:
            raise EncodeError(f"{what}: {len(data)} bytes exceeds the {cap}-byte string cap")
        self.u32(len(data), f"{what} length")
        self.buf += data

    def string_u64(self, value: str) -> None:
        data = value.encode("utf-8")
        self.buf += _U64.pack(len(data))
        self.buf += data

    def optional_string(self, value: str | None, what: str, *, cap: int | None = MAX_STRING_BYTES) -> None:
        if value is None:
            self.buf.append(0)
        else:
            self.buf.append(1)
            self.string(value, what, cap=cap)

    def optional_string_u64(self, value: str | None) -> None:
        if value is None:
            self.buf.append(0)
        else:
            self.buf.append(1)
            self.string_u64(value)

    def length_prefixed_u32(self, body: bytes, what: str) -> None:
        self.u32(len(body), f"{what} length")
        self.buf += body
