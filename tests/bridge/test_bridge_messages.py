"""The bridge's pure parts: message parsing (moto's exact bodies), routing by suffix, disposition."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.maintenance_activities import s3_event
from formats.contracts import ids
from formats.contracts import projection as c
from worker.bridge.disposition import ObjectResult, decide
from worker.bridge.messages import (
    REPLAY_EVENT_NAME,
    MessageFormatError,
    parse_message,
    replay_body,
    replay_event,
)
from worker.bridge.routing import route

META = "evidence/v1/t1/p1/e1/streams/" + "a" * 32 + "/meta/" + "0" * 19 + "7.bamlmeta.zst"
PACK = "evidence/v1/t1/p1/e1/streams/" + "a" * 32 + "/values/01HZZZZZZZZZZZZZZZZZZZZZZZ.bamlpack.zst"

# Recorded from moto 5.2.5 (PLATFORM.md section 2): the key is quote_plus-encoded.
MOTO_BODY = json.dumps(
    {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": "2026-11-30T10:29:50.111Z",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "Cwpg4MXtxtJ",
                    "bucket": {"name": "calls", "arn": "arn:aws:s3:::calls"},
                    "object": {
                        "key": "tenant+a%2F2024-01-01%2Fcall%2B1+%C3%A9%3Dx.bamlmeta.zst",
                        "size": 4,
                        "eTag": "8d777f385d3dfec8815d20f7496026dc",
                    },
                },
            }
        ]
    }
)


def test_parse_moto_notification_decodes_the_key() -> None:
    msg = parse_message(MOTO_BODY)
    assert not msg.test_event
    assert [(e.bucket, e.key, e.event_name) for e in msg.events] == [
        ("calls", "tenant a/2024-01-01/call+1 é=x.bamlmeta.zst", "ObjectCreated:Put")
    ]


def test_parse_unencoded_slashes_as_real_s3_may_send() -> None:
    body = json.loads(MOTO_BODY)
    body["Records"][0]["s3"]["object"]["key"] = META
    assert parse_message(json.dumps(body)).events[0].key == META


def test_parse_test_event_is_empty() -> None:
    body = json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "calls"})
    msg = parse_message(body)
    assert msg.test_event and msg.events == ()


def test_parse_skips_non_create_events() -> None:
    body = json.loads(MOTO_BODY)
    body["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    assert parse_message(json.dumps(body)).events == ()


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b"\xff\xfe", "not JSON"),
        ("[]", "not a JSON object"),
        ("{}", "missing 'Records'"),
        ('{"Records": {}}', "not a list"),
        ('{"Records": [{"eventName": "ObjectCreated:Put"}]}', "missing 's3'"),
        ('{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}}}]}', "'object'"),
        (
            '{"Records": [{"eventName": "ObjectCreated:Put", '
            '"s3": {"bucket": {"name": "b"}, "object": {"key": ""}}}]}',
            "non-empty",
        ),
    ],
)
def test_parse_bad_bodies_name_the_problem(body: str | bytes, names: str) -> None:
    with pytest.raises(MessageFormatError, match=names):
        parse_message(body)


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=80))
def test_replay_shape_round_trips_any_key(key: str) -> None:
    msg = parse_message(replay_body("bucket-x", key))
    assert [(e.bucket, e.key, e.event_name) for e in msg.events] == [("bucket-x", key, REPLAY_EVENT_NAME)]


def test_projection_enqueue_shape_is_the_same_as_the_replay_shape() -> None:
    # enqueue_replay (activities/) writes its own copy of the shape: it must parse the same.
    assert parse_message(json.dumps(s3_event("b", META))) == parse_message(
        json.dumps(replay_event("b", META))
    )


def test_route_by_suffix_uses_the_workflow_ids() -> None:
    meta = route(META, 3)
    assert meta is not None and meta.workflow_type == ids.PROJECT_META
    assert meta.workflow_id == ids.project_meta_id(3, META) and meta.generation == 3
    pack = route(PACK)
    assert pack is not None and pack.workflow_type == ids.INGEST_PACK
    assert pack.workflow_id == ids.ingest_pack_id(PACK)
    assert route(META.replace("meta/", "data/").replace(".bamlmeta.", ".bamldata.")) is None
    with pytest.raises(ValueError, match="generation"):
        route(META)


def test_disposition() -> None:
    done = ObjectResult(META, True)
    assert decide([done]).action == "delete"
    assert decide([done, ObjectResult(PACK, False)]).action == "retry"
    assert decide([ObjectResult(META, False, error="TimeoutError")]).action == "retry"
    bad = decide([ObjectResult(META, True, quarantined="checksum_mismatch")])
    assert bad.action == "dead_letter"
    assert bad.quarantined == ((f"quarantine/{META}.quarantine", "checksum_mismatch"),)
    assert c.PENDING not in c.DONE_OUTCOMES
