"""``publisher.cursor``: the last shipped sequence per plane of one stream.

A single line of canonical JSON, written whole through a temp file and renamed
into place (never appended), so it is always either the old or the new cursor::

    {"data":120,"format":"baml-publisher-cursor-v1","meta":41}

Absent means nothing shipped yet (0, 0). Sequences are integers in 0..2^64-1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from formats.errors import MalformedError, UnsupportedVersionError

CURSOR_FORMAT = "baml-publisher-cursor-v1"
_MAX = 2**64 - 1


@dataclass(frozen=True)
class Cursor:
    meta: int = 0
    data: int = 0

    def __post_init__(self) -> None:
        for name, value in (("meta", self.meta), ("data", self.data)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX:
                raise ValueError(f"cursor {name} must be an integer in 0..2^64-1")


def encode_cursor(cursor: Cursor) -> bytes:
    doc = {"format": CURSOR_FORMAT, "meta": cursor.meta, "data": cursor.data}
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")


def decode_cursor(data: bytes, *, file: str | None = None) -> Cursor:
    try:
        doc = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedError("publisher cursor is not ASCII JSON", file=file) from exc
    if not isinstance(doc, dict):
        raise MalformedError("publisher cursor is not a JSON object", file=file)
    if doc.get("format") != CURSOR_FORMAT:
        raise UnsupportedVersionError("publisher cursor has an unknown format", file=file)
    try:
        return Cursor(meta=doc.get("meta"), data=doc.get("data"))  # type: ignore[arg-type]
    except ValueError as exc:
        raise MalformedError(str(exc), file=file) from exc
