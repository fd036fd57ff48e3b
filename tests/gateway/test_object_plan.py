"""Pure rules of the authorize endpoint: keys, limits, duplicate entries, state decisions."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.common.errors import BadRequest, PayloadTooLarge
from api.gateway.object_plan import StoredObject, Verdict, decide_state, full_object_sha256, plan_objects
from formats import object_keys as keys
from formats import upload_wire as uw

SCOPE = keys.Scope("ten_a", "prj_a", "env_a")
EUID = "0192f0c1a2b34c5d8e9f00112233aabb"
FLUSH = "01J9ZK3Q4X5Y6Z7A8B9C0D1E2F"


def request(objects: list[dict[str, object]]) -> uw.AuthorizeRequest:
    return uw.AuthorizeRequest.model_validate({"process_euid": EUID, "flush_id": FLUSH, "objects": objects})


def seg(seq: int, size: int = 10, fill: str = "a") -> dict[str, object]:
    return {"kind": "data_segment", "sequence": seq, "size_bytes": size, "checksum_sha256": fill * 64}


def test_plan_objects_builds_every_key_from_the_scope() -> None:
    cid = "bamlv_1_" + "ab" * 32
    req = request(
        [
            {"kind": "meta_segment", "sequence": 7, "size_bytes": 1, "checksum_sha256": "0" * 64},
            seg(8),
            {"kind": "value_pack", "size_bytes": 1, "checksum_sha256": "1" * 64, "entry_count": 2},
            {"kind": "value", "cid": cid, "codec": 1, "size_bytes": 1, "checksum_sha256": "2" * 64},
            {"kind": "table", "cid": cid, "codec": 2, "size_bytes": 1, "checksum_sha256": "3" * 64},
        ]
    )
    planned = plan_objects(SCOPE, req, max_objects=5, max_object_bytes=10)
    assert [p.key for p in planned] == [
        keys.meta_segment_key(SCOPE, EUID, 7),
        keys.data_segment_key(SCOPE, EUID, 8),
        keys.value_pack_key(SCOPE, EUID, FLUSH),
        keys.large_value_key(SCOPE, cid),
        keys.table_key(SCOPE, cid),
    ]
    assert [p.index for p in planned] == list(range(5))


def test_plan_objects_limits_count_and_size() -> None:
    with pytest.raises(PayloadTooLarge) as too_many:
        plan_objects(SCOPE, request([seg(1), seg(2), seg(3)]), max_objects=2, max_object_bytes=100)
    assert too_many.value.error_code == "too_many_objects"
    with pytest.raises(PayloadTooLarge) as too_big:
        plan_objects(SCOPE, request([seg(1, 100), seg(2, 101)]), max_objects=5, max_object_bytes=100)
    assert too_big.value.error_code == "object_too_large"
    assert "objects[1]" in too_big.value.detail


def test_plan_objects_duplicates_must_agree() -> None:
    same = plan_objects(SCOPE, request([seg(1), seg(1)]), max_objects=5, max_object_bytes=100)
    assert same[0].key == same[1].key
    with pytest.raises(BadRequest):
        plan_objects(SCOPE, request([seg(1), seg(1, fill="b")]), max_objects=5, max_object_bytes=100)


@settings(max_examples=50, deadline=None)
@given(data=st.binary(min_size=1, max_size=64), other=st.binary(min_size=1, max_size=64))
def test_decide_state(data: bytes, other: bytes) -> None:
    hex_ = hashlib.sha256(data).hexdigest()
    b64 = base64.b64encode(hashlib.sha256(data).digest()).decode()
    other_b64 = base64.b64encode(hashlib.sha256(other).digest()).decode()
    assert decide_state(None, len(data), hex_) is Verdict.UPLOAD_REQUIRED
    assert decide_state(StoredObject(len(data), b64), len(data), hex_) is Verdict.STORED
    assert decide_state(StoredObject(len(data) + 1, b64), len(data), hex_) is Verdict.CONFLICT
    assert decide_state(StoredObject(len(data), None), len(data), hex_) is Verdict.NEEDS_HASH
    expected = Verdict.STORED if other_b64 == b64 else Verdict.CONFLICT
    assert decide_state(StoredObject(len(data), other_b64), len(data), hex_) is expected


def test_full_object_sha256_rejects_composite_and_malformed() -> None:
    digest = base64.b64encode(b"\x01" * 32).decode()
    assert full_object_sha256(digest) == digest
    assert full_object_sha256(digest + "-3") is None  # multipart composite
    assert full_object_sha256(base64.b64encode(b"\x01" * 4).decode()) is None
    assert full_object_sha256("!!") is None
    assert full_object_sha256(None) is None
