"""Check that a profile root's files all landed in the bucket under the right keys, byte for byte.

``snapshot(root)`` records every segment and CAS file before shipping (shipping releases them);
``assert_all_shipped(snapshot, keys, get)`` then checks each against the bucket: a segment's object
decompresses to the file's bytes, a large value or table is at its CID key, and every small value
is an entry of some pack with unchanged bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from formats import cas
from formats import object_keys as ok
from formats.object_keys import Scope
from formats.value_pack import read_pack
from formats.zstd_frame import decompress_object


@dataclass
class RootSnapshot:
    segments: dict[tuple[str, str, int], bytes] = field(default_factory=dict)  # (euid, plane, seq)
    cas_files: dict[str, bytes] = field(default_factory=dict)  # hex digest -> file bytes

    def merge(self, other: RootSnapshot) -> None:
        self.segments.update(other.segments)
        self.cas_files.update(other.cas_files)


def snapshot(root: Path) -> RootSnapshot:
    snap = RootSnapshot()
    for path in (root / "streams").glob("*/*/*.baml*"):
        plane = path.parent.name
        snap.segments[(path.parent.parent.name, plane, int(path.stem))] = path.read_bytes()
    for path in (root / "cas" / "sha256").glob("*/*.bamlvalue"):
        snap.cas_files[path.stem] = path.read_bytes()
    return snap


def assert_all_shipped(
    snap: RootSnapshot, keys: list[str], get: Callable[[str], bytes], scope: Scope
) -> dict[str, int]:
    """Every snapshotted file is in the bucket with the right key and bytes; returns counts by kind."""
    seen_segments: set[tuple[str, str, int]] = set()
    seen_cas: set[str] = set()
    counts: dict[str, int] = {}
    for key in keys:
        parsed = ok.parse_evidence_key(key)
        assert parsed.scope == scope and parsed.to_key() == key
        counts[parsed.kind] = counts.get(parsed.kind, 0) + 1
        raw = decompress_object(get(key))
        if parsed.kind in ("meta_segment", "data_segment"):
            plane = "meta" if parsed.kind == "meta_segment" else "data"
            ident = (str(parsed.euid), plane, int(parsed.sequence or 0))
            assert raw == snap.segments[ident], f"{key}: bytes differ from the profiler's file"
            seen_segments.add(ident)
        elif parsed.kind in ("value", "table"):
            digest = str(parsed.cid).removeprefix("bamlv_1_")
            assert raw == snap.cas_files[digest], f"{key}: bytes differ from the CAS file"
            assert cas.read_cas_header(raw).codec == (1 if parsed.kind == "value" else 2)
            seen_cas.add(digest)
        else:
            for entry in read_pack(raw).entries:
                digest = entry.cid.removeprefix("bamlv_1_")
                assert entry.data == snap.cas_files[digest], f"{key}: pack entry {digest} differs"
                seen_cas.add(digest)
    missing_segments = sorted(set(snap.segments) - seen_segments)
    missing_cas = sorted(set(snap.cas_files) - seen_cas)
    assert not missing_segments, f"segments not in the bucket: {missing_segments[:5]}"
    assert not missing_cas, f"CAS files not in the bucket: {missing_cas[:5]}"
    return counts
