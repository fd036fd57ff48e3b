"""Which workflow an object starts, by the suffix of its key, with the deterministic ID.

Meta objects (``.bamlmeta.zst``) start ProjectMetaObject in the environment's active
generation; value packs (``.bamlpack.zst``) start IngestValuePack. Every other key (data
segments, CAS objects) is read by key and starts nothing. IDs come from formats/contracts/ids.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from formats.contracts import ids
from formats.object_keys import InvalidKeyError, parse_evidence_key

META_SUFFIX = ".bamlmeta.zst"
PACK_SUFFIX = ".bamlpack.zst"

Kind = Literal["meta", "pack", "ignore"]


def kind_of(key: str) -> Kind:
    if key.endswith(META_SUFFIX):
        return "meta"
    if key.endswith(PACK_SUFFIX):
        return "pack"
    return "ignore"


def environment_of(key: str) -> str | None:
    """The key's environment id, or None when it is not a valid evidence key (the workflow quarantines it)."""
    try:
        return parse_evidence_key(key).scope.environment_id
    except InvalidKeyError:
        return None


@dataclass(frozen=True)
class Route:
    kind: Kind
    key: str
    workflow_type: str
    workflow_id: str
    generation: int | None = None


def route(key: str, generation: int | None = None) -> Route | None:
    """The workflow for ``key``; meta objects need the active ``generation``. None: nothing to start."""
    kind = kind_of(key)
    if kind == "meta":
        if generation is None:
            raise ValueError("a meta object needs the active generation")
        return Route(kind, key, ids.PROJECT_META, ids.project_meta_id(generation, key), generation)
    if kind == "pack":
        return Route(kind, key, ids.INGEST_PACK, ids.ingest_pack_id(key))
    return None
