"""Pure rules of ``POST /v1/uploads/authorize``: keys from the authenticated scope, limits, states.

Contract: :func:`plan_objects` turns a validated request into one :class:`PlannedObject` per
entry, in request order, or raises the problem the guide's status table names (413 for too many
entries or an oversize object, 400 for entries that name one key with different bytes).
:func:`decide_state` compares what S3 holds at a key with what the publisher wants to write.
No I/O here: the S3 calls live in :mod:`api.gateway.evidence_store`.

Every key comes from ``formats.object_keys`` with the scope of the caller's token; nothing in
the request body can name a tenant, project, environment or key.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from enum import Enum

from api.common.errors import BadRequest, PayloadTooLarge
from formats import object_keys as keys
from formats import upload_wire as uw


@dataclass(frozen=True, slots=True)
class PlannedObject:
    index: int
    entry: uw.SegmentObject | uw.PackObject | uw.CasObject
    key: str

    @property
    def size_bytes(self) -> int:
        return self.entry.size_bytes

    @property
    def checksum_sha256(self) -> str:
        return self.entry.checksum_sha256


@dataclass(frozen=True, slots=True)
class StoredObject:
    """What a HEAD says about an existing key. ``sha256_b64`` is None when S3 holds no full-object
    SHA-256 for it (uploaded without one, or a multipart composite checksum)."""

    size_bytes: int
    sha256_b64: str | None


class Verdict(Enum):
    UPLOAD_REQUIRED = "upload_required"
    STORED = "stored"
    CONFLICT = "conflict"
    NEEDS_HASH = "needs_hash"  # same size, no checksum to compare: read the object and hash it


def object_key(scope: keys.Scope, request: uw.AuthorizeRequest, entry: uw.UploadObject) -> str:
    if isinstance(entry, uw.SegmentObject):
        build = keys.meta_segment_key if entry.kind == "meta_segment" else keys.data_segment_key
        return build(scope, request.process_euid, entry.sequence)
    if isinstance(entry, uw.PackObject):
        return keys.value_pack_key(scope, request.process_euid, request.flush_id)
    if entry.kind == "value":
        return keys.large_value_key(scope, entry.cid)
    return keys.table_key(scope, entry.cid)


def plan_objects(
    scope: keys.Scope, request: uw.AuthorizeRequest, *, max_objects: int, max_object_bytes: int
) -> list[PlannedObject]:
    count = len(request.objects)
    if count > max_objects:
        raise PayloadTooLarge(
            f"the request lists {count} objects; max_objects_per_authorize is {max_objects}",
            code="too_many_objects",
            remedy="Split the objects over several authorize calls.",
        )
    planned: list[PlannedObject] = []
    seen: dict[str, PlannedObject] = {}
    for index, entry in enumerate(request.objects):
        if entry.size_bytes > max_object_bytes:
            raise PayloadTooLarge(
                f"objects[{index}] ({entry.kind}) is {entry.size_bytes} bytes; "
                f"max_object_bytes is {max_object_bytes}",
                code="object_too_large",
                remedy="Do not ship this object; report it.",
            )
        item = PlannedObject(index, entry, object_key(scope, request, entry))
        first = seen.setdefault(item.key, item)
        if first is not item and (first.size_bytes, first.checksum_sha256) != (
            item.size_bytes,
            item.checksum_sha256,
        ):
            raise BadRequest(
                f"objects[{first.index}] and objects[{index}] name the same object with different "
                "sizes or checksums",
                code="duplicate_object",
                remedy="List each object once per request.",
            )
        planned.append(item)
    return planned


def sha256_b64(checksum_hex: str) -> str:
    return uw.checksum_header_value(checksum_hex)


def full_object_sha256(value: str | None) -> str | None:
    """A stored ``ChecksumSHA256`` if it is a full-object digest (a composite ends ``-<parts>``)."""
    if not value or "-" in value:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        return None
    return value if len(raw) == 32 else None


def decide_state(stored: StoredObject | None, size_bytes: int, checksum_hex: str) -> Verdict:
    if stored is None:
        return Verdict.UPLOAD_REQUIRED
    if stored.size_bytes != size_bytes:
        return Verdict.CONFLICT  # different length: different bytes, no need to read it
    if stored.sha256_b64 is None:
        return Verdict.NEEDS_HASH
    return Verdict.STORED if stored.sha256_b64 == sha256_b64(checksum_hex) else Verdict.CONFLICT


def identity_fields(entry: uw.UploadObject) -> dict[str, int | str]:
    """The sequence or CID a response entry repeats (packs have neither)."""
    if isinstance(entry, uw.SegmentObject):
        return {"sequence": entry.sequence}
    if isinstance(entry, uw.CasObject):
        return {"cid": entry.cid}
    return {}
