"""The MinIO-to-SQS relay of docker-compose, against a real (moto) SQS endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from moto.server import ThreadedMotoServer
from stack_fixtures import free_base_port

from api.dataplane.aws import aws_client
from worker.stack.minio_relay import RelaySettings, create_app


@pytest.fixture(scope="module")
def sqs_endpoint() -> Iterator[str]:
    port = free_base_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_minio_event_records_reach_the_queue_as_s3_event_json(sqs_endpoint: str) -> None:
    sqs = aws_client("sqs", sqs_endpoint, "us-east-1", "test", "test")
    url = sqs.create_queue(QueueName="relay-q")["QueueUrl"]
    client = TestClient(create_app(RelaySettings(sqs_endpoint_url=sqs_endpoint, queue_name="relay-q")))
    record = {"eventName": "s3:ObjectCreated:Put", "s3": {"object": {"key": "a%2Fb.bamlmeta.zst"}}}
    answer = client.post(
        "/events", json={"EventName": "s3:ObjectCreated:Put", "Key": "b/a", "Records": [record]}
    )
    assert answer.json() == {"sent": 1}
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert json.loads(messages[0]["Body"]) == {"Records": [record]}


def test_probe_without_records_sends_nothing_and_bad_json_is_400(sqs_endpoint: str) -> None:
    client = TestClient(create_app(RelaySettings(sqs_endpoint_url=sqs_endpoint, queue_name="relay-q")))
    assert client.post("/events", json={}).json() == {"sent": 0}
    assert client.post("/events", content=b"not json").status_code == 400


def test_unreachable_queue_answers_503_so_minio_retries() -> None:
    client = TestClient(create_app(RelaySettings(sqs_endpoint_url="http://127.0.0.1:1", queue_name="q")))
    answer = client.post("/events", json={"Records": [{"eventName": "x"}]})
    assert answer.status_code == 503
