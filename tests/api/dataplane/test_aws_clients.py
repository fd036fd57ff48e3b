"""The AWS client builders: each service's client is typed as that service's (boto3-stubs), so mypy
catches a call of the wrong service's method; and the built clients are the services asked for,
configured as documented (against a real moto server)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from api.dataplane.aws import aws_client, object_store_client

ROOT = Path(__file__).resolve().parents[3]

MISUSE = """\
from api.dataplane.aws import aws_client, object_store_client

class Access:
    s3_endpoint_url = None
    aws_region = "us-east-1"
    aws_access_key_id = "k"
    aws_secret_access_key = "s"

aws_client("s3", None, "us-east-1", "k", "s").send_message(QueueUrl="q", MessageBody="b")
aws_client("sqs", None, "us-east-1", "k", "s").get_object(Bucket="b", Key="k")
object_store_client(Access()).receive_message(QueueUrl="q")
object_store_client(Access(), "sqs").put_object(Bucket="b", Key="k")
"""


def test_mypy_sees_each_service_s_client(tmp_path: Path) -> None:
    pytest.importorskip("mypy_boto3_s3")  # the stubs are a dev dependency
    pytest.importorskip("mypy_boto3_sqs")
    snippet = tmp_path / "misuse.py"
    snippet.write_text(MISUSE)
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
         str(snippet)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    errors = [line.split(": error: ", 1)[1] for line in run.stdout.splitlines() if ": error: " in line]
    assert errors == [
        '"S3Client" has no attribute "send_message"  [attr-defined]',
        '"SQSClient" has no attribute "get_object"  [attr-defined]',
        '"S3Client" has no attribute "receive_message"  [attr-defined]',
        '"SQSClient" has no attribute "put_object"  [attr-defined]',
    ], run.stdout + run.stderr


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


class _Access:
    def __init__(self, url: str) -> None:
        self.s3_endpoint_url = url
        self.aws_region = "us-east-1"
        self.aws_access_key_id = "test"
        self.aws_secret_access_key = "test"


def test_the_builders_make_the_service_asked_for(moto_url: str) -> None:
    s3 = aws_client("s3", moto_url, "us-east-1", "test", "test", max_pool_connections=3)
    sqs = aws_client("sqs", moto_url, "us-east-1", "test", "test", read_timeout=25)
    assert s3.meta.service_model.service_name == "s3" and s3.meta.config.signature_version == "s3v4"
    assert s3.meta.config.max_pool_connections == 3
    assert sqs.meta.service_model.service_name == "sqs" and sqs.meta.config.read_timeout == 25
    s3.create_bucket(Bucket="typed-clients")
    assert "typed-clients" in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert sqs.create_queue(QueueName="typed-clients")["QueueUrl"].endswith("/typed-clients")

    worker_s3 = object_store_client(_Access(moto_url))
    worker_sqs = object_store_client(_Access(moto_url), "sqs")
    assert worker_s3.meta.service_model.service_name == "s3"
    assert worker_s3.meta.config.max_pool_connections == 32 and worker_s3.meta.config.read_timeout == 60
    assert worker_sqs.meta.service_model.service_name == "sqs"
    assert worker_s3.list_buckets()["Buckets"] and worker_sqs.list_queues()["QueueUrls"]
