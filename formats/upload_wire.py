"""Bodies of the two publisher endpoints: one typed definition for the publisher and the gateway.

- ``GET /v1/publisher/config`` answers :class:`PublisherConfig`.
- ``POST /v1/uploads/authorize`` takes :class:`AuthorizeRequest` and answers :class:`AuthorizeResponse`.

Facts from the publisher guide ("The two endpoints", "The S3 PUT") and the contract ("Publisher
configuration", "Authorize request and response"). Requests are strict (unknown fields are a 400);
responses ignore unknown fields so an older publisher keeps working after the gateway adds one.
Nothing here carries a value body: only kinds, sizes, checksums, CIDs, sequences, keys and states.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

CONFIG_PATH = "/v1/publisher/config"
AUTHORIZE_PATH = "/v1/uploads/authorize"
CONFIG_CACHE_CONTROL = "max-age=300"
"""The config response's ``Cache-Control``; the publisher refreshes at this period."""

PACK_MAX_ENTRIES = 100_000
"""Entries per value pack: fixed by the contract, not by config."""

ObjectKind = Literal["meta_segment", "data_segment", "value_pack", "value", "table"]
OBJECT_KINDS: tuple[ObjectKind, ...] = ("meta_segment", "data_segment", "value_pack", "value", "table")
UploadState = Literal["upload_required", "stored", "conflict"]
UPLOAD_STATES: tuple[UploadState, ...] = ("upload_required", "stored", "conflict")

CODEC_VALUE = 1
CODEC_TABLE = 2

HEADER_IF_NONE_MATCH = "If-None-Match"
HEADER_CHECKSUM = "x-amz-checksum-sha256"
HEADER_CONTENT_LENGTH = "Content-Length"

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the zstd object, hex")]
Cid = Annotated[str, Field(pattern=r"^bamlv_1_[0-9a-f]{64}$", description="bamlv_1_ + 64 hex")]
Euid = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$", description="process euid, 32 lowercase hex")]
FlushId = Annotated[str, Field(pattern=r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$", description="26-character ULID")]
Sequence = Annotated[int, Field(ge=1, le=2**64 - 1)]
SizeBytes = Annotated[int, Field(ge=1, le=2**63 - 1)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- GET /v1/publisher/config ----------------------------------------------------------------------


class PublisherConfig(_Out):
    """Gateway-owned publisher settings. Each field's default is the guide's built-in default."""

    capture_enabled: bool = True
    supported_segment_versions: list[int] = Field(default_factory=lambda: [2])
    supported_cas_versions: list[int] = Field(default_factory=lambda: [1])
    flush_interval_seconds: float = Field(default=5, gt=0, le=3600)
    max_objects_per_authorize: int = Field(default=100, ge=1, le=10_000)
    large_value_threshold_bytes: int = Field(default=32 * 1024, ge=1)
    max_object_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    pack_max_entry_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    shipped_value_retention_seconds: float = Field(default=3600, ge=0)
    upload_url_ttl_seconds: int = Field(default=900, ge=1)

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "capture_enabled": True,
                    "supported_segment_versions": [2],
                    "supported_cas_versions": [1],
                    "flush_interval_seconds": 5,
                    "max_objects_per_authorize": 100,
                    "large_value_threshold_bytes": 32768,
                    "max_object_bytes": 268435456,
                    "pack_max_entry_bytes": 8388608,
                    "shipped_value_retention_seconds": 3600,
                    "upload_url_ttl_seconds": 900,
                }
            ]
        },
    )


# --- POST /v1/uploads/authorize: request -------------------------------------------------------------


class SegmentObject(_In):
    """A meta or data segment of the caller's stream."""

    kind: Literal["meta_segment", "data_segment"]
    sequence: Sequence
    size_bytes: SizeBytes
    checksum_sha256: Sha256Hex


class PackObject(_In):
    """The value pack of this flush (its key uses the request's ``flush_id``)."""

    kind: Literal["value_pack"]
    size_bytes: SizeBytes
    checksum_sha256: Sha256Hex
    entry_count: int = Field(ge=1, le=PACK_MAX_ENTRIES)


class CasObject(_In):
    """A large value (codec 1) or a function table (codec 2), keyed by CID."""

    kind: Literal["value", "table"]
    cid: Cid
    codec: int
    size_bytes: SizeBytes
    checksum_sha256: Sha256Hex

    @model_validator(mode="after")
    def _codec_matches_kind(self) -> CasObject:
        expected = CODEC_VALUE if self.kind == "value" else CODEC_TABLE
        if self.codec != expected:
            raise ValueError(f"a {self.kind} has codec {expected}, not {self.codec}")
        return self


def _example_segment(kind: str, sequence: int, size: int, fill: str) -> dict[str, JsonValue]:
    return {"kind": kind, "sequence": sequence, "size_bytes": size, "checksum_sha256": fill * 64}


UploadObject = Annotated[SegmentObject | PackObject | CasObject, Field(discriminator="kind")]


class AuthorizeRequest(_In):
    """Objects one flush wants to write (at most ``max_objects_per_authorize`` per call).

    A pack's key is built from the request's ``flush_id``, so a request holds at most one pack: when a
    flush builds several packs, pack ``i`` goes in a request whose ``flush_id`` is the flush id plus ``i``
    (``formats.value_pack.pack_flush_ids``).
    """

    process_euid: Euid
    flush_id: FlushId
    objects: list[UploadObject] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_pack_per_flush(self) -> AuthorizeRequest:
        # The pack key is a function of (stream, flush_id): two packs in one request would collide.
        if sum(1 for o in self.objects if o.kind == "value_pack") > 1:
            raise ValueError("at most one value_pack per flush_id")
        return self

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "process_euid": "0192f0c1a2b34c5d8e9f00112233aabb",
                    "flush_id": "01J9ZK3Q4X5Y6Z7A8B9C0D1E2F",
                    "objects": [
                        _example_segment("meta_segment", 41, 1234, "a"),
                        _example_segment("data_segment", 120, 880123, "b"),
                        {
                            "kind": "value_pack",
                            "size_bytes": 410000,
                            "checksum_sha256": "c" * 64,
                            "entry_count": 812,
                        },
                        {
                            "kind": "value",
                            "cid": "bamlv_1_" + "d" * 64,
                            "codec": 1,
                            "size_bytes": 71000,
                            "checksum_sha256": "e" * 64,
                        },
                        {
                            "kind": "table",
                            "cid": "bamlv_1_" + "f" * 64,
                            "codec": 2,
                            "size_bytes": 30000,
                            "checksum_sha256": "0" * 64,
                        },
                    ],
                }
            ]
        },
    )


# --- POST /v1/uploads/authorize: response ------------------------------------------------------------


class AuthorizedObject(_Out):
    """The gateway's answer for one requested object, in request order.

    ``upload_url``, ``required_headers`` and ``expires_at`` are present exactly when ``state`` is
    ``upload_required``. The URL is a credential: never log it.
    """

    kind: ObjectKind
    sequence: int | None = None
    cid: str | None = None
    key: str
    state: UploadState
    upload_url: str | None = Field(default=None, repr=False)
    required_headers: dict[str, str] | None = None
    expires_at: dt.datetime | None = None

    @model_validator(mode="after")
    def _url_iff_upload_required(self) -> AuthorizedObject:
        needs = self.state == "upload_required"
        if needs and (self.upload_url is None or self.required_headers is None or self.expires_at is None):
            raise ValueError("upload_required needs upload_url, required_headers and expires_at")
        if not needs and self.upload_url is not None:
            raise ValueError(f"state {self.state} carries no upload_url")
        return self


class AuthorizeResponse(_Out):
    flush_id: str
    objects: list[AuthorizedObject]


# --- helpers both sides use ---------------------------------------------------------------------------


def checksum_header_value(checksum_sha256_hex: str) -> str:
    """``x-amz-checksum-sha256`` is the base64 of the raw digest, not of its hex."""
    return base64.b64encode(bytes.fromhex(checksum_sha256_hex)).decode("ascii")


def required_headers_for(size_bytes: int, checksum_sha256_hex: str) -> dict[str, str]:
    """The exact headers a create-only presigned PUT is bound to (guide, "The S3 PUT")."""
    return {
        HEADER_IF_NONE_MATCH: "*",
        HEADER_CHECKSUM: checksum_header_value(checksum_sha256_hex),
        HEADER_CONTENT_LENGTH: str(size_bytes),
    }


def object_identity(obj: SegmentObject | PackObject | CasObject | AuthorizedObject) -> tuple[str, str]:
    """(kind, sequence-or-cid) used to match a response entry to its request entry."""
    if isinstance(obj, SegmentObject) or obj.kind in ("meta_segment", "data_segment"):
        return obj.kind, str(getattr(obj, "sequence", None))
    if obj.kind == "value_pack":
        return obj.kind, ""
    return obj.kind, str(getattr(obj, "cid", None))
