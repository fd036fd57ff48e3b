"""The stack's moto listing patch answers every listing as moto's own code does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.s3.models import S3Backend
from stack_fixtures import in_stack_moto

from worker.stack import moto_listing_speedup

ORIGINAL = S3Backend.list_objects
KEYS = [
    "evidence/a/meta/0001",
    "evidence/a/meta/0002",
    "evidence/a/data/0001",
    "evidence/ab/meta/0001",
    "lance/calls_v1.lance/_versions/18446744073709551614.manifest",
    "lance/calls_v1.lance/_versions/18446744073709551613.manifest",
    "lance/calls_v1.lance/data/x.lance",
    "lance/values_v1.lance/_versions/18446744073709551614.manifest",
    "top",
    "top/",
    "t%op/é",
]
PREFIXES = [
    None,
    "",
    "e",
    "evidence/",
    "evidence/a",
    "evidence/a/",
    "lance/calls_v1.lance/_versions/",
    "top",
    "zz",
]


@pytest.fixture
def restore() -> Iterator[None]:
    yield
    S3Backend.list_objects = ORIGINAL  # type: ignore[method-assign]
    moto_listing_speedup._applied = False


def _listings(s3: Any, bucket: str) -> list[Any]:
    out: list[Any] = []
    for prefix in PREFIXES:
        for delimiter in (None, "/"):
            for max_keys in (1000, 2):
                kwargs: dict[str, Any] = {"Bucket": bucket, "MaxKeys": max_keys}
                if prefix is not None:
                    kwargs["Prefix"] = prefix
                if delimiter:
                    kwargs["Delimiter"] = delimiter
                pages = s3.get_paginator("list_objects_v2").paginate(**kwargs)
                out.append([_strip(p) for p in pages])
                pages = s3.get_paginator("list_objects").paginate(**kwargs)
                out.append([_strip(p) for p in pages])
        if prefix:
            page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, StartAfter=prefix + "/")
            out.append(_strip(page))
    return out


def _strip(page: dict[str, Any]) -> dict[str, Any]:
    page = dict(page)
    page.pop("ResponseMetadata", None)
    return page


def _fill(s3: Any) -> None:
    s3.create_bucket(Bucket="plain")
    s3.create_bucket(Bucket="versioned")
    s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
    for bucket in ("plain", "versioned"):
        for key in KEYS:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
        s3.put_object(Bucket=bucket, Key=KEYS[0], Body=b"a second version")
        s3.delete_object(Bucket=bucket, Key=KEYS[1])  # a delete marker where versioned


def test_every_listing_answers_as_before(restore: None) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        _fill(s3)
        before = {b: _listings(s3, b) for b in ("plain", "versioned")}
        moto_listing_speedup.apply()
        assert S3Backend.list_objects is not ORIGINAL
        after = {b: _listings(s3, b) for b in ("plain", "versioned")}
    assert after == before
    # the comparison saw what it compares: pages, folders and a delete marker's absence
    flat = repr(before["versioned"])
    assert "CommonPrefixes" in flat and "NextContinuationToken" in flat
    assert KEYS[1] not in flat and KEYS[2] in flat


def test_a_prefix_reads_only_the_keys_under_it(restore: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        _fill(s3)
        moto_listing_speedup.apply()
        looked_up: list[str] = []
        from moto.s3.utils import _VersionedKeyStore

        getitem = _VersionedKeyStore.__getitem__

        def counting(self: Any, key: str) -> Any:
            looked_up.append(key)
            return getitem(self, key)

        monkeypatch.setattr(_VersionedKeyStore, "__getitem__", counting)
        page = s3.list_objects_v2(Bucket="plain", Prefix="lance/calls_v1.lance/_versions/")
        listed = list(looked_up)  # before mock_aws's teardown, which reads every key
    assert [o["Key"] for o in page["Contents"]] == sorted(KEYS[4:6])
    assert sorted(listed) == sorted(KEYS[4:6])


def test_the_stacks_moto_applies_it() -> None:
    qualname = in_stack_moto("from moto.s3.models import S3Backend", "S3Backend.list_objects.__qualname__")
    assert qualname == "prefixed.<locals>.list_objects"
