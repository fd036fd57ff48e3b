"""Bucket object keys: pure functions of scope, stream, plane and sequence, or scope and CID.

Layout (DESIGN.md section 5; ``<scope>`` = ``<tenant_id>/<project_id>/<environment_id>``)::

    evidence/v1/<scope>/streams/<euid>/meta/<seq20>.bamlmeta.zst
    evidence/v1/<scope>/streams/<euid>/data/<seq20>.bamldata.zst
    evidence/v1/<scope>/streams/<euid>/values/<flush_id>.bamlpack.zst
    evidence/v1/<scope>/cas/values/<hex2>/<hex64>.bamlvalue.zst
    evidence/v1/<scope>/cas/tables/<hex2>/<hex64>.bamltable.zst
    quarantine/<original key>.quarantine
    quarantine/invalid/<sha256 of a key outside this layout>.quarantine
    derived/v1/<scope>/<dataset>.lance
    derived/v1/<scope>/engines/<euid>/<engine_id20>.json
    derived/v1/<scope>/sweep/<euid>/state.json
    temporary/v1/<scope>/jobs/<job_id>/result.ndjson

Every component is validated, so no key can contain ``..``, an empty segment, a
slash inside a component, or upper-case hex. :func:`parse_evidence_key` is the exact
inverse of the evidence builders and rejects everything else with
:class:`InvalidKeyError`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from formats.errors import MalformedError

EVIDENCE_ROOT = "evidence/v1"
QUARANTINE_ROOT = "quarantine"
DERIVED_ROOT = "derived/v1"
TEMPORARY_ROOT = "temporary/v1"
CID_PREFIX = "bamlv_1_"
MAX_SEQUENCE = 2**64 - 1

KeyKind = Literal["meta_segment", "data_segment", "value_pack", "value", "table"]

_SCOPE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_EUID = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
# Crockford base32, 26 characters; the first is at most 7 so the value fits 128 bits.
_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_DATASET = re.compile(r"[a-z][a-z0-9_]{0,63}")
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
_EVIDENCE_KEY = re.compile(
    rf"{EVIDENCE_ROOT}/(?P<tenant>{_ID})/(?P<project>{_ID})/(?P<env>{_ID})/"
    r"(?:streams/(?P<euid>[0-9a-f]{32})/(?:"
    r"(?P<plane>meta|data)/(?P<seq>[0-9]{20})\.baml(?P=plane)\.zst"
    r"|values/(?P<flush>[0-7][0-9A-HJKMNP-TV-Z]{25})\.bamlpack\.zst)"
    r"|cas/(?P<family>values|tables)/(?P<hex2>[0-9a-f]{2})/(?P<cid>[0-9a-f]{64})\.(?P<suffix>bamlvalue|bamltable)\.zst)"
)


class InvalidKeyError(MalformedError):
    """A key, or a component for one, is outside the bucket layout."""

    reason = "invalid_key"


@dataclass(frozen=True, slots=True)
class Scope:
    """A tenant, project and environment; each id is 1-64 of ``[A-Za-z0-9_-]`` starting alphanumeric."""

    tenant_id: str
    project_id: str
    environment_id: str

    def __post_init__(self) -> None:
        for name in ("tenant_id", "project_id", "environment_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _SCOPE_ID.fullmatch(value):
                raise InvalidKeyError(
                    f"{name} must be 1-64 characters of [A-Za-z0-9_-] starting alphanumeric"
                )

    @property
    def path(self) -> str:
        return f"{self.tenant_id}/{self.project_id}/{self.environment_id}"


@dataclass(frozen=True, slots=True)
class ParsedKey:
    kind: KeyKind
    scope: Scope
    euid: str | None = None
    sequence: int | None = None
    flush_id: str | None = None
    cid: str | None = None  # 64 lowercase hex, without the bamlv_1_ prefix

    def to_key(self) -> str:
        """Rebuild the key this was parsed from."""
        if self.kind in ("meta_segment", "data_segment"):
            assert self.euid is not None and self.sequence is not None
            build = meta_segment_key if self.kind == "meta_segment" else data_segment_key
            return build(self.scope, self.euid, self.sequence)
        if self.kind == "value_pack":
            assert self.euid is not None and self.flush_id is not None
            return value_pack_key(self.scope, self.euid, self.flush_id)
        assert self.cid is not None
        return (
            large_value_key(self.scope, self.cid) if self.kind == "value" else table_key(self.scope, self.cid)
        )


# --- component checks ---------------------------------------------------------------------------------


def _euid(euid: str) -> str:
    if not isinstance(euid, str) or not _EUID.fullmatch(euid):
        raise InvalidKeyError("process euid must be 32 lowercase hex characters")
    return euid


def seq20(sequence: int) -> str:
    """A segment sequence as 20 decimal digits (sequences start at 1 and fit a u64)."""
    if isinstance(sequence, bool) or not isinstance(sequence, int) or not 1 <= sequence <= MAX_SEQUENCE:
        raise InvalidKeyError("sequence must be an integer in [1, 2**64 - 1]")
    return f"{sequence:020d}"


def _flush_id(flush_id: str) -> str:
    if not isinstance(flush_id, str) or not _ULID.fullmatch(flush_id):
        raise InvalidKeyError("flush_id must be a 26-character ULID (Crockford base32, upper case)")
    return flush_id


def cid_hex(cid: bytes | str) -> str:
    """64 lowercase hex from a 32-byte CID, a ``bamlv_1_<hex64>`` string, or bare hex64."""
    if isinstance(cid, (bytes, bytearray)):
        if len(cid) != 32:
            raise InvalidKeyError("a CID is 32 bytes")
        return bytes(cid).hex()
    if isinstance(cid, str):
        text = cid.removeprefix(CID_PREFIX)
        if _HEX64.fullmatch(text):
            return text
    raise InvalidKeyError("CID must be 32 bytes, bamlv_1_<64 hex> or 64 lowercase hex")


# --- builders -----------------------------------------------------------------------------------------


def evidence_prefix(scope: Scope) -> str:
    """The prefix every evidence object of ``scope`` lies under (ends with ``/``)."""
    return f"{EVIDENCE_ROOT}/{scope.path}/"


def stream_prefix(scope: Scope, euid: str) -> str:
    return f"{evidence_prefix(scope)}streams/{_euid(euid)}/"


def meta_segment_key(scope: Scope, euid: str, sequence: int) -> str:
    return f"{stream_prefix(scope, euid)}meta/{seq20(sequence)}.bamlmeta.zst"


def data_segment_key(scope: Scope, euid: str, sequence: int) -> str:
    return f"{stream_prefix(scope, euid)}data/{seq20(sequence)}.bamldata.zst"


def value_pack_key(scope: Scope, euid: str, flush_id: str) -> str:
    return f"{stream_prefix(scope, euid)}values/{_flush_id(flush_id)}.bamlpack.zst"


def large_value_key(scope: Scope, cid: bytes | str) -> str:
    h = cid_hex(cid)
    return f"{evidence_prefix(scope)}cas/values/{h[:2]}/{h}.bamlvalue.zst"


def table_key(scope: Scope, cid: bytes | str) -> str:
    h = cid_hex(cid)
    return f"{evidence_prefix(scope)}cas/tables/{h[:2]}/{h}.bamltable.zst"


def quarantine_key(original_key: str) -> str:
    """Where the projector writes the marker for an evidence object that failed verification."""
    parse_evidence_key(original_key)
    return f"{QUARANTINE_ROOT}/{original_key}.quarantine"


def quarantine_marker_key(key: str) -> str:
    """The marker of any key a projection workflow quarantined: the one function both the
    quarantine activity (which writes it) and the SQS bridge (which names it in the dead-letter
    message) use, so the two cannot disagree.

    An evidence key: :func:`quarantine_key`. Any other key (a notification can name anything) is
    never used as a path: ``quarantine/invalid/<sha256 of the key>.quarantine``.
    """
    try:
        return quarantine_key(key)
    except InvalidKeyError:
        # surrogatepass: a JSON message may carry a lone surrogate; it still gets one digest.
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{QUARANTINE_ROOT}/invalid/{digest}.quarantine"


def lance_dataset_key(scope: Scope, dataset: str) -> str:
    """Key prefix of a Lance dataset (a directory of objects), e.g. ``derived/v1/t/p/e/calls_v1.lance``."""
    if not isinstance(dataset, str) or not _DATASET.fullmatch(dataset):
        raise InvalidKeyError("dataset name must be 1-64 characters of [a-z0-9_] starting with a letter")
    return f"{DERIVED_ROOT}/{scope.path}/{dataset}.lance"


def lance_dataset_uri(bucket: str, scope: Scope, dataset: str) -> str:
    if (
        not isinstance(bucket, str)
        or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket)
        or ".." in bucket
    ):
        raise InvalidKeyError("bucket must be a valid S3 bucket name")
    return f"s3://{bucket}/{lance_dataset_key(scope, dataset)}"


def engine_registry_prefix(scope: Scope, euid: str) -> str:
    """Where the engine registry keeps one stream's engines (derived: rebuilt from the meta objects)."""
    return f"{DERIVED_ROOT}/{scope.path}/engines/{_euid(euid)}/"


def engine_registry_key(scope: Scope, euid: str, engine_id: int) -> str:
    """One engine's registry entry, ``derived/v1/<scope>/engines/<euid>/<engine_id 20 digits>.json``."""
    if isinstance(engine_id, bool) or not isinstance(engine_id, int) or not 0 <= engine_id <= MAX_SEQUENCE:
        raise InvalidKeyError("engine_id must be an integer in [0, 2**64 - 1]")
    return f"{engine_registry_prefix(scope, euid)}{engine_id:020d}.json"


def sweep_state_prefix(scope: Scope, euid: str) -> str:
    """Where the sweep keeps what it last saw of one stream (derived: rebuilt by sweeping again)."""
    return f"{DERIVED_ROOT}/{scope.path}/sweep/{_euid(euid)}/"


def sweep_state_key(scope: Scope, euid: str) -> str:
    """The sweep's state of one stream, ``derived/v1/<scope>/sweep/<euid>/state.json``."""
    return f"{sweep_state_prefix(scope, euid)}state.json"


def job_result_key(scope: Scope, job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise InvalidKeyError("job_id must be 1-128 characters of [A-Za-z0-9_-] starting alphanumeric")
    return f"{TEMPORARY_ROOT}/{scope.path}/jobs/{job_id}/result.ndjson"


def erasure_plan_key(scope: Scope, erasure_id: str) -> str:
    """Where an erasure keeps its plan while it runs (one id per erased root: too large for
    workflow history)."""
    if not isinstance(erasure_id, str) or not _JOB_ID.fullmatch(erasure_id):
        raise InvalidKeyError("erasure_id must be 1-128 characters of [A-Za-z0-9_-] starting alphanumeric")
    return f"{TEMPORARY_ROOT}/{scope.path}/erasures/{erasure_id}/plan.json"


# --- parsing ------------------------------------------------------------------------------------------


def parse_evidence_key(key: str) -> ParsedKey:
    """Parse an evidence key back into its parts; anything outside the layout raises InvalidKeyError."""
    m = _EVIDENCE_KEY.fullmatch(key) if isinstance(key, str) else None
    if m is None:
        raise InvalidKeyError(
            "key is not an evidence object key of layout v1", file=key if isinstance(key, str) else None
        )
    scope = Scope(m["tenant"], m["project"], m["env"])
    if m["plane"] is not None:
        sequence = int(m["seq"])
        if not 1 <= sequence <= MAX_SEQUENCE:
            raise InvalidKeyError("sequence out of range", file=key)
        kind: KeyKind = "meta_segment" if m["plane"] == "meta" else "data_segment"
        return ParsedKey(kind, scope, euid=m["euid"], sequence=sequence)
    if m["flush"] is not None:
        return ParsedKey("value_pack", scope, euid=m["euid"], flush_id=m["flush"])
    cid = m["cid"]
    expected_suffix = "bamlvalue" if m["family"] == "values" else "bamltable"
    if m["hex2"] != cid[:2] or m["suffix"] != expected_suffix:
        raise InvalidKeyError("CAS key's directory or suffix does not match its CID and family", file=key)
    return ParsedKey("value" if m["family"] == "values" else "table", scope, cid=cid)


def key_in_scope(key: str, scope: Scope) -> bool:
    """True when ``key`` is a well-formed evidence key of exactly ``scope``."""
    try:
        return parse_evidence_key(key).scope == scope
    except InvalidKeyError:
        return False
