"""Whole values by CID: the disk cache, then ``values_v1``, then the CAS prefix for large values.

Spec ("Private execution over Lance"): a call's value is read from the values dataset by CID, or
from the CAS prefix by key when it is a large value. Order of a read:

1. the local disk cache (:class:`~api.coordinator.value_cache.DiskValueCache`), verified by CID;
2. ``values_v1`` at the query's bound version: one index lookup on ``cid`` for codec and locator,
   then the bodies of the small values;
3. a value whose locator is a large-value key (``.../cas/values/<hex2>/<hex64>...``), or that is
   not in ``values_v1`` at all, is read from ``evidence/v1/<scope>/cas/values/<hex2>/<hex64>.bamlvalue.zst``:
   one zstd frame (formats.zstd_frame) around a ``BAMLVAL1`` CAS object (formats.cas), checked
   against the CID.

Every body is verified against its CID before it is used or cached, and rendered with
formats.value_json exactly as the projector renders it. Values up to the profiler's 16 MiB limit
come back whole. Renderings of values are kept in a bounded in-memory LRU (a CID's rendering never
changes). Nothing here logs a value.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import lance

from api.coordinator.value_cache import DiskValueCache
from formats import cas, value_json, zstd_frame
from formats.errors import FormatError
from formats.object_keys import Scope, large_value_key
from formats.value_codec import decode_value

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_s3 import S3Client

_IN_CHUNK = 500
_RENDER_CACHE_CHARS = 64 << 20


class ObjectSource(Protocol):
    """Immutable evidence objects by bucket key; None when absent."""

    def get(self, key: str) -> bytes | None: ...


class S3Objects:
    """The evidence bucket through a boto3 client."""

    def __init__(self, client: S3Client, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return data


class DirObjects:
    """Evidence objects under a local directory, by key (the local-root layout of the stack and tests)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None


def is_large_locator(locator: str | None) -> bool:
    """Whether a values_v1 locator names a large-value object (``cas/values/``), not a pack entry."""
    return locator is not None and ("/" + locator).find("/cas/values/") >= 0


class _Renderings:
    """CID -> JSON rendering (None: undecodable), bounded by total characters."""

    def __init__(self, max_chars: int) -> None:
        self._data: OrderedDict[str, str | None] = OrderedDict()
        self._chars = 0
        self._max = max_chars
        self._lock = threading.Lock()

    def get(self, cid_hex: str) -> tuple[bool, str | None]:
        with self._lock:
            if cid_hex not in self._data:
                return False, None
            self._data.move_to_end(cid_hex)
            return True, self._data[cid_hex]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._chars = 0

    def put(self, cid_hex: str, text: str | None) -> None:
        size = len(text or "")
        if size > self._max // 8:
            return  # very large renderings would evict everything else
        with self._lock:
            if cid_hex in self._data:
                return
            self._data[cid_hex] = text
            self._chars += size
            while self._chars > self._max and self._data:
                _, old = self._data.popitem(last=False)
                self._chars -= len(old or "")


RENDERINGS = _Renderings(_RENDER_CACHE_CHARS)


def render(codec: int, body: bytes) -> str | None:
    """The project's JSON rendering of a value body; None when it is not a decodable value."""
    if codec != cas.CODEC_VALUE:
        return None
    try:
        return value_json.to_json_text(decode_value(body))
    except FormatError:
        return None


def _quoted(cids: Iterable[str]) -> str:
    # CIDs are 64 lowercase hex (validated by the caller): no quoting hazards.
    return ", ".join(f"'{c}'" for c in cids)


def _is_cid_hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


class ValueReader:
    """Reads bodies by CID for one query, at the query's bound ``values_v1`` version."""

    def __init__(
        self,
        scope: Scope,
        values: lance.LanceDataset | None,
        *,
        cache: DiskValueCache | None,
        objects: ObjectSource | None,
        count: Callable[[int], None] = lambda n: None,
    ) -> None:
        self.scope = scope
        self.values = values
        self.cache = cache
        self.objects = objects
        self._count = count
        self.sources = {"cache": 0, "values_v1": 0, "cas": 0, "missing": 0}

    def bodies(self, cids: Iterable[str]) -> dict[str, tuple[int, bytes]]:
        """(codec, body) per CID found; a CID neither in values_v1 nor under cas/values/ is left out."""
        wanted = sorted({c for c in cids if _is_cid_hex(c)})
        out: dict[str, tuple[int, bytes]] = {}
        misses: list[str] = []
        for cid_hex in wanted:
            hit = self.cache.get(cid_hex) if self.cache is not None else None
            if hit is not None:
                out[cid_hex] = hit
                self.sources["cache"] += 1
                self._count(len(hit[1]))
            else:
                misses.append(cid_hex)
        if not misses:
            return out
        large: list[str] = []
        small: dict[str, int] = {}
        listed: set[str] = set()
        if self.values is not None:
            for start in range(0, len(misses), _IN_CHUNK):
                chunk = misses[start : start + _IN_CHUNK]
                meta = self.values.to_table(
                    columns=["cid", "codec", "locator"], filter=f"cid IN ({_quoted(chunk)})"
                )
                for cid_hex, codec, locator in zip(
                    meta["cid"].to_pylist(),
                    meta["codec"].to_pylist(),
                    meta["locator"].to_pylist(),
                    strict=True,
                ):
                    listed.add(cid_hex)
                    if is_large_locator(locator):
                        large.append(cid_hex)
                    else:
                        small[cid_hex] = int(codec)
            small_ids = sorted(small)
            for start in range(0, len(small_ids), _IN_CHUNK):
                chunk = small_ids[start : start + _IN_CHUNK]
                table = self.values.to_table(columns=["cid", "body"], filter=f"cid IN ({_quoted(chunk)})")
                for cid_hex, body in zip(table["cid"].to_pylist(), table["body"].to_pylist(), strict=True):
                    if self._accept(out, cid_hex, small[cid_hex], bytes(body)):
                        self.sources["values_v1"] += 1
        large.extend(c for c in misses if c not in listed)
        for cid_hex in sorted(large):
            found = self._large(cid_hex)
            if found is None:
                self.sources["missing"] += 1
                continue
            if self._accept(out, cid_hex, found[0], found[1]):
                self.sources["cas"] += 1
        return out

    def _accept(self, out: dict[str, tuple[int, bytes]], cid_hex: str, codec: int, body: bytes) -> bool:
        if cas.value_cid(codec, body).hex() != cid_hex:
            return False  # never serve a body that is not the one its CID names
        out[cid_hex] = (codec, body)
        self._count(len(body))
        if self.cache is not None:
            self.cache.put(cid_hex, codec, body)
        return True

    def _large(self, cid_hex: str) -> tuple[int, bytes] | None:
        if self.objects is None:
            return None
        key = large_value_key(self.scope, cid_hex)
        data = self.objects.get(key)
        if data is None:
            return None
        try:
            raw = zstd_frame.decompress_object(data, file=key)
            obj = cas.decode_cas_object(raw, file=key, expected_cid=bytes.fromhex(cid_hex))
        except FormatError:
            return None
        return obj.codec, obj.body

    def json_texts(self, cids: Iterable[str]) -> dict[str, str | None]:
        """CID -> JSON rendering (None when undecodable); CIDs with no body are left out."""
        out: dict[str, str | None] = {}
        todo: list[str] = []
        for cid_hex in {c for c in cids if c}:
            known, text = RENDERINGS.get(cid_hex)
            if known:
                out[cid_hex] = text
            else:
                todo.append(cid_hex)
        for cid_hex, (codec, body) in self.bodies(todo).items():
            text = render(codec, body)
            RENDERINGS.put(cid_hex, text)
            out[cid_hex] = text
        return out
