"""Value packs: layout, canonical manifest, split rules at exact boundaries and every reader error."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import cas
from formats import value_pack as vp
from formats.errors import (
    BadMagicError,
    ChecksumMismatchError,
    FormatError,
    IdentityMismatchError,
    LimitExceededError,
    MalformedError,
    TrailingBytesError,
    TruncatedError,
    UnsupportedVersionError,
)

FLUSH = "01J9ZQ4N8V6X2K3M5P7R9T1W3Y"
EUID = "0190f3a2b4c5d6e7f8091a2b3c4d5e6f"


def value_file(body: bytes) -> bytes:
    return cas.encode_cas_object(cas.CODEC_VALUE, body)


def sized_file(total: int, tag: int = 0) -> bytes:
    """A CAS value file of exactly ``total`` bytes (84-byte frame + body)."""
    body = tag.to_bytes(4, "big") + b"\x00" * (total - cas.FRAME_LEN - 4)
    return value_file(body)


def test_layout_and_canonical_manifest_bytes() -> None:
    files = [value_file(b"\x20\x01"), value_file(b"\x1a\x02hi")]
    pack = vp.build_pack(files, flush_id=FLUSH, process_euid=EUID)
    assert pack[:8] == b"BAMLPCK1"
    version, manifest_len = struct.unpack(">HI", pack[8:14])
    assert version == 1
    manifest = pack[14 : 14 + manifest_len]
    cid0 = cas.cid_to_string(cas.value_cid(1, b"\x20\x01"))
    cid1 = cas.cid_to_string(cas.value_cid(1, b"\x1a\x02hi"))
    expected = (
        '{"entries":['
        f'{{"cid":"{cid0}","codec":1,"length":86,"offset":0,"size":86}},'
        f'{{"cid":"{cid1}","codec":1,"length":88,"offset":86,"size":88}}],'
        f'"flush_id":"{FLUSH}","process_euid":"{EUID}","schema":"baml-pack/1"}}'
    )
    assert manifest == expected.encode()
    assert pack[14 + manifest_len :] == files[0] + files[1]  # entries unchanged, back to back


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=30), st.integers(1, 10), st.integers(300, 3000))
def test_round_trip(bodies: list[bytes], max_entries: int, max_bytes: int) -> None:
    files = [value_file(b) for b in bodies]
    packs = vp.build_packs(
        files, flush_id=FLUSH, process_euid=EUID, max_entries=max_entries, max_entry_bytes=max_bytes
    )
    read = [vp.read_pack(p, max_entries=max_entries, max_entry_bytes=max_bytes) for p in packs]
    assert [e.data for r in read for e in r.entries] == files
    assert [r.flush_id for r in read] == vp.pack_flush_ids(FLUSH, len(packs))
    assert all(r.manifest.process_euid == EUID for r in read)
    assert all(len(r.entries) <= max_entries for r in read)
    assert all(sum(e.length for e in r.entries) <= max_bytes for r in read)


def test_conformance_6_bytes_split_at_exactly_8_mib() -> None:
    limit = 8 * 1024 * 1024
    exact = [sized_file(limit // 2, 1), sized_file(limit // 2, 2)]
    assert len(vp.build_packs(exact, flush_id=FLUSH, process_euid=EUID)) == 1
    one_more = [*exact, sized_file(cas.FRAME_LEN + 4 + 1, 3)]  # a smallest extra file
    over = [sized_file(limit // 2, 1), sized_file(limit // 2 + 1, 2)]  # 8 MiB + 1 byte in total
    assert len(vp.build_packs(one_more, flush_id=FLUSH, process_euid=EUID)) == 2
    packs = vp.build_packs(over, flush_id=FLUSH, process_euid=EUID)
    assert len(packs) == 2
    assert [len(vp.read_pack(p).entries) for p in packs] == [1, 1]


def test_conformance_6_count_split_at_100_000() -> None:
    # The count limit only binds for entries under 84 bytes, so check the rule over sizes directly.
    assert vp.split_sizes([50] * 100_000) == [range(0, 100_000)]
    assert vp.split_sizes([50] * 100_001) == [range(0, 100_000), range(100_000, 100_001)]
    files = [value_file(i.to_bytes(3, "big")) for i in range(7)]
    packs = vp.build_packs(files, flush_id=FLUSH, process_euid=EUID, max_entries=3)
    assert [len(vp.read_pack(p).entries) for p in packs] == [3, 3, 1]


def test_conformance_6_with_100_001_real_value_files() -> None:
    # Real files are at least 84 bytes (the CAS frame), so 100,001 of them also pass 8 MiB: the byte limit
    # splits them before the count limit would. Either way the flush yields two packs.
    files = [value_file(b"\x20" + i.to_bytes(3, "big")) for i in range(100_001)]
    packs = vp.build_packs(files, flush_id=FLUSH, process_euid=EUID)
    assert len(packs) == 2
    counts = [len(vp.read_pack(p, verify_entries=False).entries) for p in packs]
    assert sum(counts) == 100_001 and counts[0] == (8 * 1024 * 1024) // 88


def test_pack_flush_ids_are_consecutive_ulids() -> None:
    assert vp.pack_flush_ids(FLUSH, 3) == [FLUSH, "01J9ZQ4N8V6X2K3M5P7R9T1W3Z", "01J9ZQ4N8V6X2K3M5P7R9T1W40"]


def test_builder_rejects_what_cannot_be_packed() -> None:
    with pytest.raises(ValueError):
        vp.build_packs([sized_file(2000)], flush_id=FLUSH, process_euid=EUID, max_entry_bytes=1999)
    with pytest.raises(ValueError):
        vp.build_pack(
            [cas.encode_cas_object(cas.CODEC_FUNCTION_TABLE, b"t")], flush_id=FLUSH, process_euid=EUID
        )
    with pytest.raises(ValueError):
        vp.build_pack([b"not a cas object"], flush_id=FLUSH, process_euid=EUID)
    with pytest.raises(ValueError):
        vp.build_pack([value_file(b"")], flush_id="bad", process_euid=EUID)
    with pytest.raises(ValueError):
        vp.build_pack([value_file(b"")], flush_id=FLUSH, process_euid="XYZ")
    assert vp.build_packs([], flush_id=FLUSH, process_euid=EUID) == []


# --- reader errors: one per reason ---------------------------------------------------------------------


def good_pack() -> bytes:
    return vp.build_pack(
        [value_file(b"\x20\x01"), value_file(b"\x20\x02")], flush_id=FLUSH, process_euid=EUID
    )


def with_manifest(manifest: bytes | str, entries: bytes | None = None) -> bytes:
    raw = manifest.encode() if isinstance(manifest, str) else manifest
    if entries is None:
        entries = value_file(b"\x20\x01") + value_file(b"\x20\x02")
    return b"BAMLPCK1" + struct.pack(">HI", 1, len(raw)) + raw + entries


def manifest_doc() -> dict:  # type: ignore[type-arg]
    pack = good_pack()
    (n,) = struct.unpack(">I", pack[10:14])
    return json.loads(pack[14 : 14 + n])  # type: ignore[no-any-return]


def canon(doc: object) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def test_good_pack_reads() -> None:
    assert len(vp.read_pack(good_pack()).entries) == 2
    assert vp.read_pack(with_manifest(canon(manifest_doc()))).entries[1].offset == 86


def test_truncated_header() -> None:
    with pytest.raises(TruncatedError):
        vp.read_pack(b"BAMLPCK1\x00\x01", file="k")


def test_bad_magic() -> None:
    with pytest.raises(BadMagicError):
        vp.read_pack(b"BAMLPCK2" + good_pack()[8:])


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        vp.read_pack(b"BAMLPCK1\x00\x02" + good_pack()[10:])


def test_manifest_length_past_the_end() -> None:
    with pytest.raises(TruncatedError):
        vp.read_pack(b"BAMLPCK1" + struct.pack(">HI", 1, 10_000) + b"{}")


def test_manifest_not_json() -> None:
    with pytest.raises(MalformedError) as info:
        vp.read_pack(with_manifest(b"\xff{not json"))
    assert info.value.reason == "bad_manifest"


def test_unknown_schema() -> None:
    doc = manifest_doc()
    doc["schema"] = "baml-pack/2"
    with pytest.raises(UnsupportedVersionError):
        vp.read_pack(with_manifest(canon(doc)))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("flush_id"),
        lambda d: d.update(extra=1),
        lambda d: d.update(flush_id="not-a-ulid"),
        lambda d: d.update(process_euid="ABC"),
        lambda d: d.update(entries=[]),
        lambda d: d.update(entries={}),
        lambda d: d["entries"][0].pop("size"),
        lambda d: d["entries"][0].update(cid="bamlv_1_xyz"),
        lambda d: d["entries"][0].update(offset=-1),
        lambda d: d["entries"][0].update(length=True),
        lambda d: d["entries"][0].update(length=86.0),
    ],
)
def test_manifest_fields_are_checked(mutate) -> None:  # type: ignore[no-untyped-def]
    doc = manifest_doc()
    mutate(doc)
    with pytest.raises(MalformedError) as info:
        vp.read_pack(with_manifest(canon(doc)))
    assert info.value.reason == "bad_manifest"


def test_packed_table_codec_is_unsupported() -> None:
    doc = manifest_doc()
    doc["entries"][0]["codec"] = 2
    with pytest.raises(UnsupportedVersionError) as info:
        vp.read_pack(with_manifest(canon(doc)))
    assert info.value.reason == "unsupported_codec"


@pytest.mark.parametrize(
    "render",
    [
        lambda d: json.dumps(d, sort_keys=True),  # whitespace
        lambda d: json.dumps(d, separators=(",", ":")),  # insertion order, not sorted
        lambda d: canon(d).replace('"codec":1', '"codec":1.0'),  # float where an int is canonical
        lambda d: canon(d)[:-1] + ',"schema":"baml-pack/1"}',  # duplicate key
    ],
)
def test_non_canonical_manifest(render) -> None:  # type: ignore[no-untyped-def]
    doc = manifest_doc()
    reordered = {k: doc[k] for k in ("schema", "flush_id", "process_euid", "entries")}
    with pytest.raises(MalformedError) as info:
        vp.read_pack(with_manifest(render(reordered)))
    assert info.value.reason in {"non_canonical_manifest", "bad_manifest"}


def test_size_differs_from_length() -> None:
    doc = manifest_doc()
    doc["entries"][0]["size"] = 85
    with pytest.raises(MalformedError) as info:
        vp.read_pack(with_manifest(canon(doc)))
    assert info.value.reason == "bad_entry_layout"


def test_gap_or_overlap_between_entries() -> None:
    doc = manifest_doc()
    doc["entries"][1]["offset"] = 80
    with pytest.raises(MalformedError) as info:
        vp.read_pack(with_manifest(canon(doc)))
    assert info.value.reason == "bad_entry_layout"


def test_entry_past_the_region() -> None:
    doc = manifest_doc()
    with pytest.raises(TruncatedError):
        vp.read_pack(with_manifest(canon(doc), value_file(b"\x20\x01") + value_file(b"\x20\x02")[:-1]))


def test_bytes_after_the_last_entry() -> None:
    with pytest.raises(TrailingBytesError):
        vp.read_pack(good_pack() + b"x")


def test_entry_with_a_bad_trailer() -> None:
    pack = bytearray(good_pack())
    pack[-1] ^= 1
    with pytest.raises(ChecksumMismatchError) as info:
        vp.read_pack(bytes(pack), file="k")
    assert info.value.file == "k[entry 1]"
    assert len(vp.read_pack(bytes(pack), verify_entries=False).entries) == 2


def test_entry_whose_cid_differs_from_the_manifest() -> None:
    doc = manifest_doc()
    doc["entries"][0]["cid"], doc["entries"][1]["cid"] = doc["entries"][1]["cid"], doc["entries"][0]["cid"]
    with pytest.raises(IdentityMismatchError):
        vp.read_pack(with_manifest(canon(doc)))


def test_limits() -> None:
    with pytest.raises(LimitExceededError):
        vp.read_pack(good_pack(), max_entries=1)
    with pytest.raises(LimitExceededError):
        vp.read_pack(good_pack(), max_entry_bytes=100)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_corruption_never_escapes_the_error_family(data: st.DataObject) -> None:
    pack = bytearray(good_pack())
    i = data.draw(st.integers(0, len(pack) - 1))
    pack[i] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(pack)))
    with contextlib.suppress(FormatError):
        vp.read_pack(bytes(pack[:cut]))
