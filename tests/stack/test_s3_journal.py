"""The stack's S3 survives a restart: ``python -m worker.stack.moto_store`` over HTTP, killed with
SIGKILL and started again on the same journal, serves the same versions, delete markers, bodies
and notifications configuration; ids recorded before the restart keep working after it."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from worker.stack.s3_journal import Entry, IdMap, read_entries, rewrite, whole_length

BUCKET = "baml-evidence"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Store:
    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.journal.parent / "moto.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "worker.stack.moto_store",
                "--port",
                str(self.port),
                "--journal",
                str(self.journal),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("moto_store did not start")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def s3(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(s3={"addressing_style": "path"}),
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "s3" / "journal")
    s.journal.parent.mkdir()
    s.start()
    yield s
    if s.process and s.process.poll() is None:
        s.kill()


def _versions(s3: Any) -> list[tuple[str, bool, bool, int]]:
    page = s3.list_object_versions(Bucket=BUCKET)
    out = [(v["Key"], False, v["IsLatest"], v["Size"]) for v in page.get("Versions", [])]
    out += [(m["Key"], True, m["IsLatest"], 0) for m in page.get("DeleteMarkers", [])]
    return sorted(out)


def test_versions_markers_multipart_and_create_only_puts_survive_a_kill(store: Store) -> None:
    s3 = store.s3()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="a/one", Body=b"v1")
    s3.put_object(Bucket=BUCKET, Key="a/one", Body=b"v2")
    s3.put_object(Bucket=BUCKET, Key="a/gone", Body=b"x")
    s3.delete_object(Bucket=BUCKET, Key="a/gone")  # a delete marker
    # A create-only presigned PUT, as the gateway hands out.
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "a/presigned"}, ExpiresIn=60
    )
    assert httpx.put(url, content=b"p", headers={"If-None-Match": "*"}).status_code == 200
    assert httpx.put(url, content=b"q", headers={"If-None-Match": "*"}).status_code == 412
    # A multipart upload (Lance writes large files so).
    part = os.urandom(5 * 1024 * 1024)
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="big")["UploadId"]
    etags = [
        s3.upload_part(Bucket=BUCKET, Key="big", UploadId=up, PartNumber=n, Body=part)["ETag"] for n in (1, 2)
    ]
    s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key="big",
        UploadId=up,
        MultipartUpload={"Parts": [{"ETag": e, "PartNumber": n} for n, e in zip((1, 2), etags, strict=True)]},
    )
    before = _versions(s3)

    store.kill()
    store.start()
    s3 = store.s3()
    assert _versions(s3) == before
    assert s3.get_object(Bucket=BUCKET, Key="a/one")["Body"].read() == b"v2"
    assert s3.get_object(Bucket=BUCKET, Key="a/presigned")["Body"].read() == b"p"
    big = s3.get_object(Bucket=BUCKET, Key="big")["Body"].read()
    assert hashlib.sha256(big).digest() == hashlib.sha256(part + part).digest()
    assert s3.get_bucket_versioning(Bucket=BUCKET)["Status"] == "Enabled"
    # The create-only PUT still refuses an existing key after the restart.
    assert httpx.put(url, content=b"r", headers={"If-None-Match": "*"}).status_code == 412

    # An erasure after the restart deletes every version by its (new) id; a second restart keeps
    # it deleted: the journal carries the ids the replay gave, not the first run's.
    listing = s3.list_object_versions(Bucket=BUCKET, Prefix="a/")
    targets = [
        {"Key": v["Key"], "VersionId": v["VersionId"]} for v in listing["Versions"] + listing["DeleteMarkers"]
    ]
    assert not s3.delete_objects(Bucket=BUCKET, Delete={"Objects": targets, "Quiet": True}).get("Errors")
    assert [k for k in _versions(s3) if k[0].startswith("a/")] == []
    store.kill()
    store.start()
    assert [k for k in _versions(store.s3()) if k[0].startswith("a/")] == []
    assert len(_versions(store.s3())) == 1  # "big"
    # The request log names paths, never a presigned URL's query (credential, signature).
    assert "X-Amz-Signature" not in (store.journal.parent / "moto.log").read_text()


def test_an_erasure_recorded_before_the_restart_stays_applied(store: Store) -> None:
    s3 = store.s3()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    for body in (b"1", b"2", b"3"):
        s3.put_object(Bucket=BUCKET, Key="private", Body=body)
    listing = s3.list_object_versions(Bucket=BUCKET)["Versions"]
    older = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in listing if not v["IsLatest"]]
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": older, "Quiet": True})
    only = s3.list_object_versions(Bucket=BUCKET)["Versions"][0]["VersionId"]
    s3.delete_object(Bucket=BUCKET, Key="private", VersionId=only)
    assert _versions(s3) == []
    store.kill()
    store.start()
    assert _versions(store.s3()) == []


def test_a_torn_last_entry_is_cut_and_the_rest_restored(store: Store) -> None:
    s3 = store.s3()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="kept", Body=b"k")
    store.kill()
    whole = whole_length(store.journal)
    with open(store.journal, "ab") as handle:
        handle.write(b'{"m":"PUT","p":"/baml-evidence/torn","q":"","h":{},"n":100,"ids":[]}\nonly part')
    store.start()
    s3 = store.s3()
    assert s3.get_object(Bucket=BUCKET, Key="kept")["Body"].read() == b"k"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="torn")
    assert whole_length(store.journal) == store.journal.stat().st_size
    assert [e.path for _, e in read_entries(store.journal)] == [f"/{BUCKET}", f"/{BUCKET}/kept"]
    assert whole > 0


def test_sqs_requests_are_not_journaled(store: Store) -> None:
    sqs = boto3.client(
        "sqs",
        endpoint_url=store.url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
    )
    sqs.create_queue(QueueName="q")
    store.s3().create_bucket(Bucket=BUCKET)
    methods = [(e.method, e.path) for _, e in read_entries(store.journal)]
    assert methods == [("PUT", f"/{BUCKET}")]


def test_rewrite_maps_recorded_ids_and_signs_by_header() -> None:
    ids = IdMap({"old-v": "new-v", "old-u": "new-u"})
    entry = Entry(
        "POST",
        "/b/k",
        "uploadId=old-u&X-Amz-Signature=abc&X-Amz-Credential=x%2F2020%2Fus-east-1%2Fs3%2Faws4_request",
        {"HTTP_CONTENT_MD5": "xx", "HTTP_X_AMZ_COPY_SOURCE": "b/src?versionId=old-v", "CONTENT_LENGTH": "1"},
        b"<Delete><Object><Key>k</Key><VersionId>old-v</VersionId></Object></Delete>",
    )
    out = rewrite(entry, ids, "us-east-1")
    assert out.query == "uploadId=new-u"
    assert out.headers["HTTP_X_AMZ_COPY_SOURCE"] == "b/src?versionId=new-v"
    assert b"<VersionId>new-v</VersionId>" in out.body and "HTTP_CONTENT_MD5" not in out.headers
    assert out.headers["CONTENT_LENGTH"] == str(len(out.body))
    assert "/s3/aws4_request" in out.headers["HTTP_AUTHORIZATION"]
    assert not ids.learn(["a"], ["b", "c"])  # a response of another shape pairs nothing
