"""Upload a synthetic profile directory into the bucket exactly as the publisher lays it out.

Segments go to their stream keys, small values into value packs, large values to
``cas/values/`` and function tables to ``cas/tables/``, each as one zstd frame. Used by the
tests and by bench/projection.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import cas, object_keys, value_pack
from formats.object_keys import Scope
from formats.profile_store import layout
from formats.segment_names import Plane
from formats.zstd_frame import compress_object

LARGE_VALUE_BYTES = 32 * 1024
FLUSH_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"


@dataclass
class Uploaded:
    meta_keys: list[str] = field(default_factory=list)
    data_keys: list[str] = field(default_factory=list)
    pack_keys: list[str] = field(default_factory=list)
    value_keys: list[str] = field(default_factory=list)
    table_keys: list[str] = field(default_factory=list)
    bodies: dict[str, bytes] = field(default_factory=dict)  # key -> compressed object


def _streams(root: Path) -> list[str]:
    d = root / "streams"
    return sorted(p.name for p in d.iterdir() if layout.is_euid_dir_name(p.name)) if d.exists() else []


def _sequences(root: Path, euid: str, plane: Plane) -> list[int]:
    d = layout.plane_dir(root, euid, plane)
    out = []
    for p in d.iterdir():
        seq = layout.parse_segment_name(p.name, plane)
        if seq is not None:
            out.append(seq)
    return sorted(out)


def build_objects(root: Path, scope: Scope, *, pack_entries: int = 200) -> Uploaded:
    """Every object of the profile directory as (key -> zstd bytes), without uploading."""
    up = Uploaded()
    small: list[bytes] = []
    euids = _streams(root)
    for path in sorted((root / "cas").rglob("*.bamlvalue")) if (root / "cas").exists() else []:
        raw = path.read_bytes()
        header = cas.read_cas_header(raw)
        if header.codec == cas.CODEC_FUNCTION_TABLE:
            key = object_keys.table_key(scope, header.cid)
            up.table_keys.append(key)
        elif len(raw) >= LARGE_VALUE_BYTES:
            key = object_keys.large_value_key(scope, header.cid)
            up.value_keys.append(key)
        else:
            small.append(raw)
            continue
        up.bodies[key] = compress_object(raw)
    if small and euids:
        packs = value_pack.build_packs(
            small, flush_id=FLUSH_ID, process_euid=euids[0], max_entries=pack_entries
        )
        flush_ids = value_pack.pack_flush_ids(FLUSH_ID, len(packs))
        for fid, pack in zip(flush_ids, packs, strict=True):
            key = object_keys.value_pack_key(scope, euids[0], fid)
            up.pack_keys.append(key)
            up.bodies[key] = compress_object(pack)
    for euid in euids:
        for plane, keys, build in (
            (Plane.DATA, up.data_keys, object_keys.data_segment_key),
            (Plane.META, up.meta_keys, object_keys.meta_segment_key),
        ):
            for seq in _sequences(root, euid, plane):
                key = build(scope, euid, seq)
                keys.append(key)
                up.bodies[key] = compress_object(layout.segment_path(root, euid, plane, seq).read_bytes())
    return up


def put(s3: Any, bucket: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=body)


def upload(s3: Any, bucket: str, up: Uploaded, *, skip: set[str] | None = None) -> None:
    """Tables, large values, packs, then data, then meta: the publisher's order."""
    skip = skip or set()
    for keys in (up.table_keys, up.value_keys, up.pack_keys, up.data_keys, up.meta_keys):
        for key in keys:
            if key not in skip:
                put(s3, bucket, key, up.bodies[key])
