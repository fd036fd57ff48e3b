"""Reads evidence objects from the bucket by key, verified and decoded (S3 I/O, no projection logic).

Every read decompresses the one zstd frame and verifies the file's own trailing SHA-256 and
identity (euid, sequence, CID) through the ``formats`` decoders; a failure comes back as a
typed problem (:data:`PROBLEM_MISSING` / :data:`PROBLEM_CORRUPT`) the projection core
understands, or as a :class:`formats.errors.FormatError` for the object that triggered the work.
Decoded segments are cached per reader, so one meta object's executions share their reads (and
:meth:`EvidenceReader.prefetch_data` fetches a meta object's data range concurrently); function
tables are content-addressed, so verified ones are also cached process-wide by (scope, CID).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from activities.projection.model import PROBLEM_CORRUPT, PROBLEM_MISSING, MetaProblem, ResolvedValue
from api.common.lru import LruCache
from formats import cas, object_keys
from formats import meta_segment as ms
from formats.data_segment import DataGroup, DataSegment, decode_data_segment
from formats.errors import FormatError
from formats.function_table import FunctionTable, decode_function_table
from formats.object_keys import Scope
from formats.zstd_frame import decompress_object

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


# Verified function tables by (scope, CID): a CID names immutable bytes, and the scope in the key
# keeps one tenant's table from answering another's lookup.
FUNCTION_TABLES: LruCache[tuple[Scope, bytes], FunctionTable] = LruCache(256)


def is_missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code")) in _MISSING_CODES


def already_exists(exc: ClientError) -> bool:
    """A create-only PUT (``If-None-Match: *``) found the key taken."""
    return str(exc.response.get("Error", {}).get("Code")) in ("PreconditionFailed", "412")


@dataclass(frozen=True, slots=True)
class ListedObject:
    key: str
    last_modified: dt.datetime
    size: int


class EvidenceReader:
    """One stream-scoped view of the bucket for one activity run (not shared across threads)."""

    def __init__(self, s3: S3Client, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self._meta: dict[str, ms.MetaSegment | MetaProblem] = {}
        self._data: dict[str, DataSegment | str] = {}
        self._groups: dict[str, dict[bytes, DataGroup]] = {}
        self._raw: dict[str, bytes | None] = {}

    # --- raw ---------------------------------------------------------------------------------

    def get_raw(self, key: str) -> bytes | None:
        if key in self._raw:  # prefetched
            return self._raw.pop(key)
        return self._fetch(key)

    def _fetch(self, key: str) -> bytes | None:
        try:
            resp = self.s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise
        return bytes(resp["Body"].read())

    def get_file(self, key: str) -> bytes | None:
        """The original file behind ``key`` (decompressed), None when absent; FormatError when corrupt."""
        raw = self.get_raw(key)
        if raw is None:
            return None
        return decompress_object(raw, file=key)

    def list_objects(self, prefix: str, start_after: str | None = None) -> Iterator[ListedObject]:
        """The objects under ``prefix`` in key order (only those after ``start_after``, if given)."""
        paginator = self.s3.get_paginator("list_objects_v2")
        pages = (
            paginator.paginate(Bucket=self.bucket, Prefix=prefix, StartAfter=start_after)
            if start_after
            else paginator.paginate(Bucket=self.bucket, Prefix=prefix)
        )
        for page in pages:
            for obj in page.get("Contents", []):
                yield ListedObject(obj["Key"], obj["LastModified"], int(obj["Size"]))

    def list_prefixes(self, prefix: str) -> list[str]:
        out: list[str] = []
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            out.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        return out

    # --- segments ----------------------------------------------------------------------------

    def meta_strict(self, key: str) -> ms.MetaSegment:
        """The triggering meta object: missing or corrupt raises (FormatError or LookupError)."""
        parsed = object_keys.parse_evidence_key(key)
        assert parsed.euid is not None
        data = self.get_file(key)
        if data is None:
            raise LookupError(f"meta object {key} does not exist")
        seg = ms.decode_meta_segment(
            data, file=key, expected_euid=bytes.fromhex(parsed.euid), expected_sequence=parsed.sequence
        )
        self._meta[key] = seg
        return seg

    def meta(self, scope: Scope, euid: str, sequence: int) -> ms.MetaSegment | MetaProblem:
        key = object_keys.meta_segment_key(scope, euid, sequence)
        hit = self._meta.get(key)
        if hit is not None:
            return hit
        result: ms.MetaSegment | MetaProblem
        try:
            data = self.get_file(key)
            if data is None:
                result = MetaProblem(sequence, PROBLEM_MISSING)
            else:
                result = ms.decode_meta_segment(
                    data, file=key, expected_euid=bytes.fromhex(euid), expected_sequence=sequence
                )
        except FormatError:
            result = MetaProblem(sequence, PROBLEM_CORRUPT)
        self._meta[key] = result
        return result

    def data(self, scope: Scope, euid: str, sequence: int) -> DataSegment | str:
        """The decoded data segment, or the problem (missing / corrupt) as a string."""
        key = object_keys.data_segment_key(scope, euid, sequence)
        hit = self._data.get(key)
        if hit is not None:
            return hit
        result: DataSegment | str
        try:
            data = self.get_file(key)
            if data is None:
                result = PROBLEM_MISSING
            else:
                result = decode_data_segment(
                    data, file=key, expected_euid=bytes.fromhex(euid), expected_sequence=sequence
                )
        except FormatError:
            result = PROBLEM_CORRUPT
        self._data[key] = result
        return result

    def group(self, scope: Scope, euid: str, sequence: int, root: bytes) -> DataGroup | None:
        """This root's group in a decoded data segment (indexed once per segment), else None."""
        key = object_keys.data_segment_key(scope, euid, sequence)
        index = self._groups.get(key)
        if index is None:
            seg = self._data.get(key)
            index = {g.root.to_bytes(): g for g in seg.groups} if isinstance(seg, DataSegment) else {}
            self._groups[key] = index
        return index.get(root)

    def prefetch_data(self, scope: Scope, euid: str, sequences: Iterable[int], pool: Executor) -> None:
        """GET the data segments concurrently (I/O in ``pool``); decoding stays on this thread."""
        keys = [
            k
            for k in (object_keys.data_segment_key(scope, euid, s) for s in sorted(set(sequences)))
            if k not in self._data and k not in self._raw
        ]
        for key, raw in zip(keys, pool.map(self._fetch, keys), strict=True):
            self._raw[key] = raw

    # --- CAS ---------------------------------------------------------------------------------

    def function_table(self, scope: Scope, cid: bytes) -> FunctionTable | None:
        """The table by CID from ``cas/tables/``; None when absent or failing verification."""
        cached = FUNCTION_TABLES.get((scope, cid))
        if cached is not None:
            return cached
        key = object_keys.table_key(scope, cid)
        try:
            data = self.get_file(key)
            if data is None:
                return None
            obj = cas.decode_cas_object(
                data, file=key, expected_cid=cid, expected_codec=cas.CODEC_FUNCTION_TABLE
            )
            table = decode_function_table(obj.body, file=key)
        except FormatError:
            return None
        FUNCTION_TABLES.put((scope, cid), table)
        return table

    def large_value(self, scope: Scope, cid: bytes) -> ResolvedValue | None:
        """A large value by CID from ``cas/values/``; None when absent or failing verification."""
        key = object_keys.large_value_key(scope, cid)
        try:
            data = self.get_file(key)
            if data is None:
                return None
            obj = cas.decode_cas_object(data, file=key, expected_cid=cid)
        except FormatError:
            return None
        return ResolvedValue(obj.body, obj.codec, key)
