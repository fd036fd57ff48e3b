"""The leaves' window avoids the zone map where Lance's zone map is slow: when it reaches a
fragment whose stable row ids Lance stores as a bitmap segment (ids with gaps, e.g. rows deleted
before a compaction), read from the manifest alone; elsewhere the window keeps the zone map."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from api.coordinator.planner import LeafPrune
from api.coordinator.private_reader import PrivateReader
from api.dataplane.lance_rowids import segment_kinds, slow_zone_map
from formats.object_keys import Scope

ROWS, APPENDS = 40_000, 8
PRUNE = LeafPrune(
    (("function_name", "=", ("f1",)), ("started_at_ns", ">=", (100,)), ("started_at_ns", "<", (900,)))
)


def _leaves(path: Path, *, stable: bool, delete_every: int | None) -> lance.LanceDataset:
    per = ROWS // APPENDS
    for g in range(APPENDS):
        ids = list(range(g * per, (g + 1) * per))
        table = pa.table(
            {
                "started_at_ns": pa.array([i % 1000 for i in ids], pa.int64()),
                "function_name": [f"f{i % 3}" for i in ids],
                "integer": pa.array(ids, pa.int64()),
            }
        )
        lance.write_dataset(
            table, str(path), mode="create" if g == 0 else "append", enable_stable_row_ids=stable
        )
    ds = lance.dataset(str(path))
    if delete_every:
        ds.delete(f"integer % {delete_every} = 0")
    ds.optimize.compact_files()
    ds = lance.dataset(str(path))
    ds.create_scalar_index("started_at_ns", index_type="ZONEMAP")
    ds.create_scalar_index("function_name", index_type="BITMAP")
    return lance.dataset(str(path))


def _reader(ds: lance.LanceDataset) -> PrivateReader:
    return PrivateReader(Scope("t", "p", "e"), 1, {"value_leaves_v1": ds}, "unused")


def _rows(ds: lance.LanceDataset, sql: str) -> list[int]:
    return sorted(ds.to_table(columns=["integer"], filter=sql).column("integer").to_pylist())


def test_a_fragment_with_gapped_ids_sends_the_window_past_the_zone_map(tmp_path: Path) -> None:
    gapped = _leaves(tmp_path / "gapped", stable=True, delete_every=10)
    assert any("range_with_bitmap" in (segment_kinds(f) or ()) for f in gapped.get_fragments())
    assert any(slow_zone_map(f) for f in gapped.get_fragments())
    sql = _reader(gapped)._prune_sql(gapped, PRUNE)
    assert sql == "function_name = 'f1' AND started_at_ns + 0 >= 100 AND started_at_ns + 0 < 900"
    # The same rows either way: the form changes the path Lance takes, not the answer.
    rows = _rows(gapped, sql)
    assert rows and rows == _rows(gapped, PRUNE.sql())
    # A window that misses those fragments' start times (0-999) selects none of their zones.
    later = LeafPrune((("function_name", "=", ("f1",)), ("started_at_ns", ">", (999,))))
    assert _reader(gapped)._prune_sql(gapped, later) == later.sql()
    no_window = LeafPrune((("function_name", "=", ("f1",)),))
    assert _reader(gapped)._prune_sql(gapped, no_window) == "function_name = 'f1'"


def test_contiguous_ids_keep_the_zone_map(tmp_path: Path) -> None:
    clean = _leaves(tmp_path / "clean", stable=True, delete_every=None)
    assert {k for f in clean.get_fragments() for k in segment_kinds(f) or ()} == {"range"}
    assert _reader(clean)._prune_sql(clean, PRUNE) == PRUNE.sql()
    plain = _leaves(tmp_path / "plain", stable=False, delete_every=10)
    assert all(segment_kinds(f) is None for f in plain.get_fragments())
    assert _reader(plain)._prune_sql(plain, PRUNE) == PRUNE.sql()
