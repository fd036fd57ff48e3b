"""The projection queue's message shapes: S3 ObjectCreated notifications and the replay tool's.

Both are the standard S3 event document (``{"Records": [{"s3": {"bucket": {"name"}, "object":
{"key"}}}]}``); S3 (and moto) URL-encode the key with ``quote_plus``, so keys are always decoded
with ``unquote_plus``. The replay tool writes the same shape with ``eventName``
``ObjectCreated:Replay`` (:func:`replay_event`), so the bridge has one parser. S3's
``s3:TestEvent`` (sent when a notification configuration is set) has no ``Records``: it parses
to an empty, ``test_event`` message that the bridge deletes.

Contract: :func:`parse_message` returns a :class:`QueueMessage` or raises
:class:`MessageFormatError` naming what was wrong (never echoing the body).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, unquote_plus

REPLAY_EVENT_NAME = "ObjectCreated:Replay"
TEST_EVENT = "s3:TestEvent"


class MessageFormatError(ValueError):
    """A queue message body is not an S3 event document; the message says which part is wrong."""


@dataclass(frozen=True)
class ObjectEvent:
    bucket: str
    key: str  # decoded
    event_name: str


@dataclass(frozen=True)
class QueueMessage:
    events: tuple[ObjectEvent, ...]
    test_event: bool = False


def _field(obj: Any, name: str, where: str) -> Any:
    if not isinstance(obj, dict) or name not in obj:
        raise MessageFormatError(f"{where}: missing '{name}'")
    return obj[name]


def parse_message(body: str | bytes) -> QueueMessage:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise MessageFormatError("body is not JSON") from None
    if not isinstance(doc, dict):
        raise MessageFormatError("body is not a JSON object")
    if doc.get("Event") == TEST_EVENT:
        return QueueMessage((), test_event=True)
    records = _field(doc, "Records", "body")
    if not isinstance(records, list):
        raise MessageFormatError("body: 'Records' is not a list")
    events: list[ObjectEvent] = []
    for i, record in enumerate(records):
        where = f"Records[{i}]"
        name = _field(record, "eventName", where)
        s3 = _field(record, "s3", where)
        bucket = _field(_field(s3, "bucket", where + ".s3"), "name", where + ".s3.bucket")
        raw_key = _field(_field(s3, "object", where + ".s3"), "key", where + ".s3.object")
        if not all(isinstance(v, str) and v for v in (name, bucket, raw_key)):
            raise MessageFormatError(f"{where}: eventName, bucket name and key must be non-empty strings")
        if not name.startswith("ObjectCreated:"):
            continue  # removals and other events name nothing to project
        events.append(ObjectEvent(bucket, unquote_plus(raw_key), name))
    return QueueMessage(tuple(events))


def replay_event(bucket: str, key: str) -> dict[str, Any]:
    """One replay message for ``key``: S3's notification shape, key encoded as S3 encodes it."""
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "eventName": REPLAY_EVENT_NAME,
                "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(key)}},
            }
        ]
    }


def replay_body(bucket: str, key: str) -> str:
    return json.dumps(replay_event(bucket, key), sort_keys=True)
