"""The gateway's S3 calls: does a bucket exist, HEAD a key, hash an object, presign a create-only PUT.

Contract: every method returns its answer or raises :class:`EvidenceStoreUnavailable` (a 503
problem) when S3 cannot be reached or refuses the gateway's own credentials. A missing key is
an answer (None), not an error. Nothing here logs a presigned URL, and errors name the bucket
and the S3 error code only.

Checksums: the presigned PUT signs ``x-amz-sdk-checksum-algorithm: SHA256`` beside
``x-amz-checksum-sha256``. Real S3 verifies the digest either way; the algorithm header also makes
S3-compatible stores that only record a checksum when it is present (moto) keep it, so a later
HEAD with ``ChecksumMode=ENABLED`` can answer ``stored`` or ``conflict`` without reading bytes.
An object that HEAD shows without a full-object SHA-256 is read and hashed (up to a bound).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from api.common.errors import ServiceUnavailable
from api.dataplane.aws import aws_client
from api.gateway.object_plan import StoredObject, full_object_sha256
from api.gateway.settings import GatewaySettings
from formats import upload_wire as uw

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_s3 import S3Client

HEADER_SDK_CHECKSUM_ALGORITHM = "x-amz-sdk-checksum-algorithm"
_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
_NO_BUCKET = frozenset({"NoSuchBucket"})
_READ_CHUNK = 1024 * 1024

_log = logging.getLogger(__name__)


class EvidenceStoreUnavailable(ServiceUnavailable):
    code = "evidence_store_unavailable"
    title = "Evidence store unavailable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


def required_headers(size_bytes: int, checksum_hex: str) -> dict[str, str]:
    """Headers the PUT must carry: the guide's three plus the checksum algorithm (see module doc)."""
    return {**uw.required_headers_for(size_bytes, checksum_hex), HEADER_SDK_CHECKSUM_ALGORITHM: "SHA256"}


def _client(settings: GatewaySettings, endpoint_url: str | None) -> S3Client:
    return aws_client(
        "s3",
        endpoint_url,
        settings.aws_region,
        settings.aws_access_key_id,
        settings.aws_secret_access_key,
        connect_timeout=settings.s3_connect_timeout_seconds,
        read_timeout=settings.s3_read_timeout_seconds,
        max_attempts=settings.s3_max_attempts,
        max_pool_connections=settings.head_concurrency + 4,
    )


def _unavailable(bucket: str, exc: Exception) -> EvidenceStoreUnavailable:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", "unknown"))
    else:
        code = type(exc).__name__
    _log.warning("s3 call failed bucket=%s error=%s", bucket, code)
    return EvidenceStoreUnavailable(
        f"the evidence store did not answer for bucket {bucket} ({code})",
        remedy="Back off with jitter and retry.",
    )


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


class EvidenceStore:
    def __init__(self, settings: GatewaySettings) -> None:
        self.s3 = _client(settings, settings.s3_endpoint_url)
        presign_endpoint = settings.s3_presign_endpoint_url or settings.s3_endpoint_url
        self._presigner = (
            self.s3 if presign_endpoint == settings.s3_endpoint_url else _client(settings, presign_endpoint)
        )
        self._bucket_ttl = settings.bucket_check_seconds
        self._buckets_seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def bucket_exists(self, bucket: str) -> bool:
        with self._lock:
            until = self._buckets_seen.get(bucket)
        if until is not None and until > time.monotonic():
            return True
        try:
            self.s3.head_bucket(Bucket=bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _MISSING or code in _NO_BUCKET:
                return False
            raise _unavailable(bucket, exc) from None
        except BotoCoreError as exc:
            raise _unavailable(bucket, exc) from None
        with self._lock:
            self._buckets_seen[bucket] = time.monotonic() + self._bucket_ttl
        return True

    def head(self, bucket: str, key: str) -> StoredObject | None:
        try:
            resp = self.s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _MISSING:
                return None
            raise _unavailable(bucket, exc) from None
        except BotoCoreError as exc:
            raise _unavailable(bucket, exc) from None
        return StoredObject(int(resp["ContentLength"]), full_object_sha256(resp.get("ChecksumSHA256")))

    def keys_between(self, bucket: str, first_key: str, last_key: str) -> set[str]:
        """Every key in ``[first_key, last_key]`` (lexicographic), by ListObjectsV2 pages of 1,000."""
        prefix = first_key[: len(_common_prefix(first_key, last_key))]
        found: set[str] = set()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "StartAfter": first_key[:-1]}
        try:
            while True:
                resp = self.s3.list_objects_v2(**kwargs)
                listed = [str(o["Key"]) for o in resp.get("Contents", [])]
                found.update(k for k in listed if first_key <= k <= last_key)
                if not resp.get("IsTruncated") or not listed or listed[-1] >= last_key:
                    return found
                kwargs["ContinuationToken"] = resp["NextContinuationToken"]
        except ClientError as exc:
            raise _unavailable(bucket, exc) from None
        except BotoCoreError as exc:
            raise _unavailable(bucket, exc) from None

    def sha256_b64(self, bucket: str, key: str, max_bytes: int) -> str | None:
        """SHA-256 (base64) of the object's bytes, or None if it is gone or larger than ``max_bytes``."""
        digest = hashlib.sha256()
        try:
            resp = self.s3.get_object(Bucket=bucket, Key=key)
            if int(resp["ContentLength"]) > max_bytes:
                resp["Body"].close()
                return None
            for chunk in resp["Body"].iter_chunks(_READ_CHUNK):
                digest.update(chunk)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _MISSING:
                return None
            raise _unavailable(bucket, exc) from None
        except BotoCoreError as exc:
            raise _unavailable(bucket, exc) from None
        return base64.b64encode(digest.digest()).decode("ascii")

    def presign_put(self, bucket: str, key: str, size_bytes: int, checksum_hex: str, ttl_seconds: int) -> str:
        """A create-only PUT URL bound to ``key``, the size and the checksum (signing is local)."""
        url: str = self._presigner.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": bucket,
                "Key": key,
                "IfNoneMatch": "*",
                "ChecksumSHA256": uw.checksum_header_value(checksum_hex),
                "ChecksumAlgorithm": "SHA256",
                "ContentLength": size_bytes,
            },
            ExpiresIn=ttl_seconds,
            HttpMethod="PUT",
        )
        return url

    def close(self) -> None:
        self.s3.close()
        if self._presigner is not self.s3:
            self._presigner.close()
