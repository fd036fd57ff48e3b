"""PrivateReader.indexed_mask: which candidates' private rows are in the bound version, for
small candidate sets (indexed IN lists) and large ones (the generation's roots, read once per
ledger fragment), with the same answer (local Lance: the coordinator's reader on pure Lance I/O)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lance_rows import ledger_rows

from api.coordinator.private_reader import PrivateReader
from api.dataplane.lance_store import LEDGER, LanceStore
from formats.object_keys import Scope

SCOPE = Scope("ten_l", "prj_l", "env_l")


@pytest.mark.parametrize("candidates", [500, 30_000])  # either side of the 20 000 switch
def test_the_mask_marks_exactly_the_projected_executions_of_the_generation(
    tmp_path: Path, candidates: int
) -> None:
    store = LanceStore(root=tmp_path)
    projected = [f"{i:032x}" for i in range(0, 2 * candidates, 2)]  # the even ones
    store.merge(SCOPE, LEDGER, ledger_rows(projected, 1))
    odd = [f"{i:032x}" for i in range(1, 2 * candidates, 4)]
    store.merge(SCOPE, LEDGER, ledger_rows(odd, 2))  # projected in another generation only
    ids = [f"{i:032x}" for i in range(candidates)] + [f"{0:032x}"] * 3  # repeats: one row per call
    reader = PrivateReader.bind(store, SCOPE, 1)
    mask = reader.indexed_mask(pa.chunked_array([ids[:100], ids[100:]]))
    assert mask.to_pylist() == [int(i, 16) % 2 == 0 for i in ids]


def test_a_new_ledger_version_reads_only_the_fragments_it_adds(tmp_path: Path) -> None:
    # The ledger gets a version at every committer cadence: its roots are cached per fragment, so
    # a query at a newer version reads only what was committed since.
    store = LanceStore(root=tmp_path)
    first = [f"{i:032x}" for i in range(0, 60_000, 2)]
    store.merge(SCOPE, LEDGER, ledger_rows(first, 1))
    ids = pa.array([f"{i:032x}" for i in range(60_000)])
    reader = PrivateReader.bind(store, SCOPE, 1)
    assert reader.indexed_mask(ids).to_pylist() == [i % 2 == 0 for i in range(60_000)]
    read_first = reader.bytes_read
    later = [f"{i:032x}" for i in range(1, 600, 2)]  # a commit of 300 more roots
    store.merge(SCOPE, LEDGER, ledger_rows(later, 1))
    reader = PrivateReader.bind(store, SCOPE, 1)
    assert reader.indexed_mask(ids).to_pylist() == [i % 2 == 0 or i < 600 for i in range(60_000)]
    assert 0 < reader.bytes_read < read_first / 50  # the new fragment's roots only


def test_a_root_deleted_from_a_cached_fragment_is_no_longer_indexed(tmp_path: Path) -> None:
    store = LanceStore(root=tmp_path)
    roots = [f"{i:032x}" for i in range(30_000)]
    store.merge(SCOPE, LEDGER, ledger_rows(roots, 1))
    ids = pa.array(roots)
    assert all(PrivateReader.bind(store, SCOPE, 1).indexed_mask(ids).to_pylist())
    ds = store.open(SCOPE, LEDGER)
    assert ds is not None
    ds.delete(f"root_id = '{roots[7]}'")  # as an erasure does: a new deletion file, same data file
    mask = PrivateReader.bind(store, SCOPE, 1).indexed_mask(ids).to_pylist()
    assert mask == [i != 7 for i in range(30_000)]
