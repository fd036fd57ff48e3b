"""Unit tests of the pure planning rules (no servers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.upload_wire import (
    AuthorizedObject,
    AuthorizeRequest,
    PublisherConfig,
    checksum_header_value,
    required_headers_for,
)
from publisher import plan
from publisher.plan import SegmentVerdict as V


def test_classify_cas_table_large_small() -> None:
    assert plan.classify_cas(2, 10, 32768) == "table"
    assert plan.classify_cas(1, 32768, 32768) == "value"
    assert plan.classify_cas(1, 32767, 32768) == "pack"


def test_split_packs_bytes_and_entries() -> None:
    mib8 = 8 * 1024 * 1024
    assert plan.split_packs([mib8 // 2, mib8 // 2], mib8) == [range(0, 2)]
    assert plan.split_packs([mib8 // 2, mib8 // 2 + 1], mib8) == [range(0, 1), range(1, 2)]
    assert [len(r) for r in plan.split_packs([1] * 100_001, mib8)] == [100_000, 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5000), max_size=200), st.integers(1, 20_000), st.integers(1, 50))
def test_split_packs_respects_limits_and_order(sizes: list[int], cap: int, max_entries: int) -> None:
    groups = plan.split_packs(sizes, cap, max_entries)
    assert [i for g in groups for i in g] == list(range(len(sizes)))
    for g in groups:
        assert len(g) <= max_entries
        assert len(g) == 1 or sum(sizes[i] for i in g) <= cap


def test_select_plane_stops_at_first_bad_unless_skippable() -> None:
    verdicts = [(4, V.OK), (5, V.BAD_CHECKSUM), (6, V.OK)]
    assert plan.select_plane(3, verdicts) == plan.PlaneSelection((4,), (), 5)
    assert plan.select_plane(3, verdicts, may_skip=[5]) == plan.PlaneSelection((4, 6), (5,), None)
    with pytest.raises(ValueError):
        plan.select_plane(3, [(5, V.OK)])


def test_block_window_skips_only_bad_files_after_window() -> None:
    blocks = plan.PlaneBlocks(window_seconds=60)
    assert not blocks.observe("e", "data", 5, V.BAD_CHECKSUM, now=100.0)
    assert not blocks.observe("e", "data", 5, V.BAD_CHECKSUM, now=159.0)
    assert blocks.observe("e", "data", 5, V.BAD_CHECKSUM, now=160.0)
    # An unsupported version waits for a config change, never for the clock.
    assert not blocks.observe("e", "meta", 2, V.UNSUPPORTED_VERSION, now=0.0)
    assert not blocks.observe("e", "meta", 2, V.UNSUPPORTED_VERSION, now=1e9)


def test_advance_cursor_never_passes_a_failure() -> None:
    assert plan.advance_cursor(3, [4, 5, 6], {4, 6}) == 4
    assert plan.advance_cursor(3, [4, 5, 6], {4, 5, 6}) == 6
    assert plan.advance_cursor(3, [], set()) == 3


def test_meta_gate_and_upload_order() -> None:
    assert plan.meta_may_ship(4, 4) and not plan.meta_may_ship(5, 4)
    kinds = ["meta_segment", "data_segment", "value_pack", "value", "table"]
    ordered = sorted(kinds, key=lambda k: plan.upload_sort_key(k, None))  # type: ignore[arg-type]
    assert ordered == ["table", "value", "value_pack", "data_segment", "meta_segment"]


def test_backoff_doubles_with_bounded_jitter() -> None:
    lo = plan.backoff_delay(3, base=0.5, cap=30, jitter=0.2, rand=0.0)
    hi = plan.backoff_delay(3, base=0.5, cap=30, jitter=0.2, rand=0.999999)
    assert lo == pytest.approx(3.2) and hi == pytest.approx(4.8, rel=1e-5)
    assert plan.backoff_delay(20, base=0.5, cap=30, jitter=0.0, rand=0.5) == 30


def test_wire_defaults_and_validation() -> None:
    assert PublisherConfig().model_dump()["pack_max_entry_bytes"] == 8 * 1024 * 1024
    example = AuthorizeRequest.model_json_schema()["examples"][0]
    assert [o.kind for o in AuthorizeRequest.model_validate(example).objects] == [
        "meta_segment",
        "data_segment",
        "value_pack",
        "value",
        "table",
    ]
    bad = dict(example, objects=[dict(example["objects"][3], codec=2)])
    with pytest.raises(ValueError):
        AuthorizeRequest.model_validate(bad)
    two_packs = dict(example, objects=[example["objects"][2], example["objects"][2]])
    with pytest.raises(ValueError):
        AuthorizeRequest.model_validate(two_packs)
    with pytest.raises(ValueError):
        AuthorizedObject(kind="value", key="k", state="upload_required")
    assert checksum_header_value("00" * 32) == "A" * 43 + "="
    assert required_headers_for(5, "00" * 32)["Content-Length"] == "5"


def test_authorize_chunk_size_spreads_over_the_pool_within_the_gateway_cap() -> None:
    assert plan.authorize_chunk_size(100, 100, 8) == 13  # 8 calls side by side
    assert plan.authorize_chunk_size(2000, 100, 8) == 100  # never above the gateway's cap
    assert plan.authorize_chunk_size(20, 100, 8) == 8  # a call has a fixed cost: at least 8 each
    assert plan.authorize_chunk_size(5, 3, 8) == 3
    assert plan.authorize_chunk_size(0, 100, 8) == 8


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 200), st.integers(1, 64))
def test_authorize_chunks_cover_everything_within_cap(count: int, cap: int, concurrency: int) -> None:
    size = plan.authorize_chunk_size(count, cap, concurrency)
    chunks = plan.chunk(list(range(count)), size)
    assert 1 <= size <= cap
    assert [i for c in chunks for i in c] == list(range(count))


def test_split_object_budget_gives_everything_when_it_fits() -> None:
    assert plan.split_object_budget(500, 100, 200) == (100, 400)
    assert plan.split_object_budget(500, 0, 0) == (0, 500)


def test_split_object_budget_carries_metas_with_the_data_they_name() -> None:
    # The real writer: meta 2k names data through k. 500 objects: 333 metas and the 167 data they need.
    data, meta = plan.split_object_budget(
        500, 3_000, 6_000, data_cursor=0, meta_data_high_water=lambda k: (k + 1) // 2
    )
    assert (data, meta) == (167, 333)
    # From a cursor: the metas' needs are counted above the data cursor.
    data, meta = plan.split_object_budget(30, 45, 90, data_cursor=15, meta_data_high_water=lambda k: 15 + k)
    assert (data, meta) == (15, 15)
    # Metas that name no new data take the whole budget.
    assert plan.split_object_budget(30, 0, 90, meta_data_high_water=lambda k: 0) == (0, 30)


def test_split_object_budget_falls_back_to_proportion_without_headers() -> None:
    assert plan.split_object_budget(30, 45, 90) == (10, 20)
    assert plan.split_object_budget(30, 45, 90, meta_data_high_water=lambda k: None) == (10, 20)
    assert plan.split_object_budget(1, 45, 90) == (1, 0)
