"""The stack's moto timestamp patch serializes every timestamp as moto's own code does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from botocore.utils import parse_to_aware_datetime
from moto.core import serialize
from moto.core.serialize import TimestampSerializer
from moto.core.utils import iso_8601_datetime_with_milliseconds, iso_8601_datetime_without_milliseconds_s3

from worker.stack import moto_timestamp_speedup

FORMATS = ("iso8601", "iso8601_zeroed", "rfc822", "unixtimestamp")
WHEN = datetime(2026, 12, 4, 10, 43, 8, 123456)
VALUES: list[object] = [
    iso_8601_datetime_without_milliseconds_s3(WHEN),  # what moto keeps as an object's LastModified
    iso_8601_datetime_with_milliseconds(WHEN),
    "2026-12-04T10:43:08Z",
    "2026-12-04T10:43:08.000Z",
    "2026-12-04T12:43:08+02:00",
    "2026-12-04T10:43:08",  # no zone: botocore's (UTC assumed)
    "2026-12-04",
    "0",
    1_764_845_000,
    WHEN,
    WHEN.replace(tzinfo=UTC),
    WHEN.replace(tzinfo=timezone(timedelta(hours=-5))),
]


@pytest.fixture
def restore() -> Iterator[None]:
    yield
    serialize.parse_to_aware_datetime = parse_to_aware_datetime
    moto_timestamp_speedup._applied = False


def _serialized() -> list[object]:
    out: list[object] = []
    for fmt in FORMATS:
        serializer = TimestampSerializer(fmt)
        out += [serializer._convert_timestamp_to_str(v, fmt) for v in VALUES]  # type: ignore[arg-type]
    return out


def test_every_timestamp_serializes_as_before(restore: None) -> None:
    assert serialize.parse_to_aware_datetime is parse_to_aware_datetime  # moto's own, not a patch
    before = _serialized()
    moto_timestamp_speedup.apply()
    assert serialize.parse_to_aware_datetime is not parse_to_aware_datetime
    assert _serialized() == before


def test_motos_own_text_takes_the_fast_path(restore: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def counting(value: object) -> datetime:
        calls.append(value)
        return parse_to_aware_datetime(value)

    monkeypatch.setattr(serialize, "parse_to_aware_datetime", counting)
    moto_timestamp_speedup.apply()
    stamp = iso_8601_datetime_without_milliseconds_s3(WHEN)
    TimestampSerializer("iso8601")._convert_timestamp_to_str(stamp, "iso8601")
    assert calls == []  # parsed without botocore's (dateutil's) parser
    TimestampSerializer("iso8601")._convert_timestamp_to_str("2026-12-04", "iso8601")
    assert calls == ["2026-12-04"]
