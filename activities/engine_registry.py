"""The engine registry: every stream's ``EngineStarted`` records, one small object per engine.

The real writer emits ``EngineStarted`` once per engine, at profiler activation, so a process
that runs for days has its engines tens of thousands of meta objects behind its newest
RootEnded, far past the 2,000-object walk-back. Projection records the engines of every meta
object it reads here, and the walk looks an engine up here when it does not reach it.

Layout: ``derived/v1/<scope>/engines/<euid>/<engine_id20>.json``
(:func:`formats.object_keys.engine_registry_key`), in the customer's bucket beside the Lance
datasets. Like everything derived it is rebuilt from the bucket: ``replay`` (and ``rebuild``,
which shares its scan) registers the engines of every meta object it reads before it enqueues
anything, and erasure deletes a stream's entries with its evidence.

Entries are written create-only: an engine's record never changes, so a repeat (redelivery,
replay) is a no-op, and a lookup is one GET by key, cached per worker: O(1) whatever the
stream's length. A miss is never cached (the engine may be registered a moment later by the
projection of an earlier meta object that arrived late).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from activities.evidence_reader import EvidenceReader, already_exists
from api.common.lru import LruCache
from formats import meta_segment as ms
from formats import object_keys
from formats.object_keys import Scope

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("baml_studio.engine_registry")

_CACHE = 100_000  # engines (a few hundred bytes each)


def encode_entry(engine: ms.EngineStarted, meta_sequence: int) -> bytes:
    """The registry object of one engine (canonical JSON: equal records give equal bytes)."""
    body = {
        "engine_id": engine.engine_id,
        "program_id": engine.program_id.hex(),
        "function_table_cid": engine.function_table_cid.hex() if engine.function_table_cid else None,
        "revision_label": engine.revision_label,
        "source_label": engine.source_label,
        "meta_sequence": meta_sequence,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode_entry(data: bytes) -> tuple[ms.EngineStarted, int]:
    body = json.loads(data)
    table = body.get("function_table_cid")
    engine = ms.EngineStarted(
        engine_id=int(body["engine_id"]),
        program_id=bytes.fromhex(body["program_id"]),
        function_table_cid=bytes.fromhex(table) if table else None,
        revision_label=body.get("revision_label"),
        source_label=body.get("source_label"),
    )
    return engine, int(body["meta_sequence"])


class EngineRegistry:
    def __init__(self, s3: S3Client, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self._known: LruCache[str, ms.EngineStarted] = LruCache(_CACHE)

    def register(self, scope: Scope, euid: str, segment: ms.MetaSegment) -> int:
        """Record the EngineStarted records of one meta segment; returns how many were new here."""
        written = 0
        for record in segment.records:
            if not isinstance(record, ms.EngineStarted):
                continue
            key = object_keys.engine_registry_key(scope, euid, record.engine_id)
            if self._known.get(key) is not None:
                continue
            try:
                self.s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=encode_entry(record, segment.sequence),
                    ContentType="application/json",
                    IfNoneMatch="*",
                )
                written += 1
            except ClientError as exc:
                if not already_exists(exc):
                    raise
                # Already registered (a redelivery, a replay, or a second EngineStarted for one
                # engine id, which the writer never emits): the first record stands.
            self._known.put(key, record)
        return written

    def lookup(self, scope: Scope, euid: str, engine_id: int) -> ms.EngineStarted | None:
        key = object_keys.engine_registry_key(scope, euid, engine_id)
        hit = self._known.get(key)
        if hit is not None:
            return hit
        data = EvidenceReader(self.s3, self.bucket).get_raw(key)
        if data is None:
            return None
        engine, _ = decode_entry(data)
        self._known.put(key, engine)
        return engine
