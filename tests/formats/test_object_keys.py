"""Object keys: the layout of DESIGN.md section 5, round trips through the parser, and rejections."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import object_keys as ok
from formats.errors import FormatError

SCOPE = ok.Scope("acme", "billing", "prod")
EUID = "0190f3a2b4c5d6e7f8091a2b3c4d5e6f"
FLUSH = "01J9ZQ4N8V6X2K3M5P7R9T1W3Y"
CID = "ab" + "0" * 62


def test_layout_matches_the_design() -> None:
    p = "evidence/v1/acme/billing/prod/"
    assert ok.evidence_prefix(SCOPE) == p
    assert ok.meta_segment_key(SCOPE, EUID, 41) == f"{p}streams/{EUID}/meta/00000000000000000041.bamlmeta.zst"
    assert (
        ok.data_segment_key(SCOPE, EUID, 120) == f"{p}streams/{EUID}/data/00000000000000000120.bamldata.zst"
    )
    assert ok.value_pack_key(SCOPE, EUID, FLUSH) == f"{p}streams/{EUID}/values/{FLUSH}.bamlpack.zst"
    assert ok.large_value_key(SCOPE, CID) == f"{p}cas/values/ab/{CID}.bamlvalue.zst"
    assert ok.large_value_key(SCOPE, "bamlv_1_" + CID) == ok.large_value_key(SCOPE, bytes.fromhex(CID))
    assert ok.table_key(SCOPE, CID) == f"{p}cas/tables/ab/{CID}.bamltable.zst"
    meta = ok.meta_segment_key(SCOPE, EUID, 1)
    assert ok.quarantine_key(meta) == f"quarantine/{meta}.quarantine"
    assert ok.lance_dataset_key(SCOPE, "calls_v1") == "derived/v1/acme/billing/prod/calls_v1.lance"
    assert (
        ok.lance_dataset_uri("lake", SCOPE, "values_v1")
        == "s3://lake/derived/v1/acme/billing/prod/values_v1.lance"
    )
    assert ok.job_result_key(SCOPE, "job-1") == "temporary/v1/acme/billing/prod/jobs/job-1/result.ndjson"
    assert ok.sweep_state_key(SCOPE, EUID) == f"derived/v1/acme/billing/prod/sweep/{EUID}/state.json"
    assert ok.sweep_state_key(SCOPE, EUID).startswith(ok.sweep_state_prefix(SCOPE, EUID))
    with pytest.raises(ok.InvalidKeyError):
        ok.sweep_state_key(SCOPE, EUID.upper())


def test_largest_sequence_is_twenty_digits() -> None:
    key = ok.meta_segment_key(SCOPE, EUID, 2**64 - 1)
    assert "/18446744073709551615.bamlmeta.zst" in key
    assert ok.parse_evidence_key(key).sequence == 2**64 - 1


ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True)
scopes = st.builds(ok.Scope, ids, ids, ids)
euids = st.from_regex(r"[0-9a-f]{32}", fullmatch=True)
cids = st.binary(min_size=32, max_size=32)
flushes = st.from_regex(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(scopes, euids, st.integers(1, 2**64 - 1), flushes, cids)
def test_every_evidence_key_parses_back(scope: ok.Scope, euid: str, seq: int, flush: str, cid: bytes) -> None:
    keys = {
        ok.meta_segment_key(scope, euid, seq): ("meta_segment", dict(euid=euid, sequence=seq)),
        ok.data_segment_key(scope, euid, seq): ("data_segment", dict(euid=euid, sequence=seq)),
        ok.value_pack_key(scope, euid, flush): ("value_pack", dict(euid=euid, flush_id=flush)),
        ok.large_value_key(scope, cid): ("value", dict(cid=cid.hex())),
        ok.table_key(scope, cid): ("table", dict(cid=cid.hex())),
    }
    for key, (kind, parts) in keys.items():
        parsed = ok.parse_evidence_key(key)
        assert parsed == ok.ParsedKey(kind, scope, **parts)  # type: ignore[arg-type]
        assert parsed.to_key() == key
        assert ok.key_in_scope(key, scope)
        assert key.startswith(ok.evidence_prefix(scope))


def test_key_of_another_scope_is_not_in_scope() -> None:
    key = ok.meta_segment_key(ok.Scope("acme", "billing", "staging"), EUID, 1)
    assert not ok.key_in_scope(key, SCOPE)


@pytest.mark.parametrize(
    ("tenant", "project", "env"),
    [
        ("..", "p", "e"),
        ("a/b", "p", "e"),
        ("", "p", "e"),
        ("t", "-p", "e"),
        ("t", "p", "e.f"),
        ("t", "p", "x" * 65),
        ("t", "p", "é"),
        ("t", "p", "e\n"),
    ],
)
def test_bad_scope_ids_are_rejected(tenant: str, project: str, env: str) -> None:
    with pytest.raises(ok.InvalidKeyError) as info:
        ok.Scope(tenant, project, env)
    assert info.value.reason == "invalid_key"


@pytest.mark.parametrize(
    "build",
    [
        lambda: ok.meta_segment_key(SCOPE, EUID.upper(), 1),
        lambda: ok.meta_segment_key(SCOPE, EUID[:-1], 1),
        lambda: ok.meta_segment_key(SCOPE, "../" + EUID[3:], 1),
        lambda: ok.meta_segment_key(SCOPE, EUID, 0),
        lambda: ok.meta_segment_key(SCOPE, EUID, 2**64),
        lambda: ok.data_segment_key(SCOPE, EUID, -1),
        lambda: ok.data_segment_key(SCOPE, EUID, True),
        lambda: ok.value_pack_key(SCOPE, EUID, FLUSH.lower()),
        lambda: ok.value_pack_key(SCOPE, EUID, FLUSH[:-1]),
        lambda: ok.value_pack_key(SCOPE, EUID, "8" + FLUSH[1:]),  # above 128 bits
        lambda: ok.value_pack_key(SCOPE, EUID, FLUSH[:-1] + "U"),  # U is not Crockford
        lambda: ok.large_value_key(SCOPE, CID.upper()),
        lambda: ok.large_value_key(SCOPE, b"\x00" * 31),
        lambda: ok.table_key(SCOPE, "bamlv_1_" + CID[:-1]),
        lambda: ok.lance_dataset_key(SCOPE, "../calls"),
        lambda: ok.lance_dataset_key(SCOPE, "Calls"),
        lambda: ok.lance_dataset_uri("Bad_Bucket", SCOPE, "calls_v1"),
        lambda: ok.job_result_key(SCOPE, "../x"),
        lambda: ok.quarantine_key("not/an/evidence/key"),
    ],
)
def test_bad_components_are_rejected(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ok.InvalidKeyError):
        build()


GOOD = ok.meta_segment_key(SCOPE, EUID, 7)


@pytest.mark.parametrize(
    "key",
    [
        "",
        GOOD + "/",
        "/" + GOOD,
        GOOD.replace("evidence/v1", "evidence/v2"),
        GOOD.replace("acme/", "acme/../"),
        GOOD.replace("acme/billing/prod", "acme/billing"),
        GOOD.replace("00000000000000000007", "0000000000000000007"),  # 19 digits
        GOOD.replace("00000000000000000007", "00000000000000000000"),  # sequence 0
        GOOD.replace("00000000000000000007", "99999999999999999999"),  # beyond u64
        GOOD.replace(".bamlmeta.zst", ".bamldata.zst"),  # plane and suffix disagree
        GOOD.replace(".zst", ""),
        GOOD.replace(EUID, EUID.upper()),
        ok.large_value_key(SCOPE, CID).replace("/ab/", "/cd/"),  # directory is not the CID's first byte
        ok.large_value_key(SCOPE, CID).replace(".bamlvalue.", ".bamltable."),
        ok.table_key(SCOPE, CID).replace("cas/tables", "cas/other"),
        ok.value_pack_key(SCOPE, EUID, FLUSH).replace(FLUSH, FLUSH + "0"),
        "quarantine/" + GOOD + ".quarantine",
        "derived/v1/acme/billing/prod/calls_v1.lance",
        GOOD.replace("/meta/", "/meta/../meta/"),
    ],
)
def test_keys_outside_the_layout_are_rejected(key: str) -> None:
    with pytest.raises(ok.InvalidKeyError) as info:
        ok.parse_evidence_key(key)
    assert isinstance(info.value, FormatError)
    assert not ok.key_in_scope(key, SCOPE)
