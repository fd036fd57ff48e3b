"""Stop moto from parsing its own timestamps back with dateutil for every key it lists.

moto keeps an object's ``LastModified`` as the ISO 8601 text it formatted (``...T10:43:08.000Z``),
and its response serializer turns that text back into a datetime with botocore's
``parse_to_aware_datetime``, which hands it to dateutil's general parser, before formatting it
again. A listing serializes one timestamp per key. Lance lists a dataset's ``_versions/`` at every
commit, and a dataset committed once a second keeps ten minutes of versions, so each commit's
listing carries hundreds of keys: sampled with py-spy while a committer took 1,000 commits on the
stack's moto, 87% of moto's CPU was ``ListObjectsV2`` and 34% those timestamp parses.

:func:`apply` gives moto's serializer a parse that reads an ISO 8601 text with a ``Z`` or an
offset with ``datetime.fromisoformat`` (C code) and leaves every other value (datetimes, epoch
numbers, dates without a zone) to botocore's function, as before. Both give the same instant in
UTC, and the serializer only formats it: the same response bytes, checked against the original by
tests/stack/test_moto_timestamp_speedup.py. Only the stack's moto process applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

_applied = False


def aware_datetime(original: Callable[[Any], datetime]) -> Callable[[Any], datetime]:
    """``original`` (botocore's ``parse_to_aware_datetime``) with a fast path for zoned ISO text."""

    def parse(value: Any) -> datetime:
        if isinstance(value, str) and len(value) > 19 and value[10:11] == "T":
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return original(value)
            if parsed.tzinfo is not None:
                return parsed.astimezone(UTC)  # as botocore's: the same instant, in UTC
        return original(value)

    return parse


def apply() -> None:
    """Patch moto's response serializer in this process (idempotent)."""
    global _applied
    if _applied:
        return
    from moto.core import serialize

    serialize.parse_to_aware_datetime = aware_datetime(serialize.parse_to_aware_datetime)  # type: ignore[assignment]
    _applied = True
