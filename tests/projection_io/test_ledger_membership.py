"""PrivateReader.indexed_mask: which candidates' private rows are in the bound version, for
small candidate sets (indexed IN lists) and large ones (the generation's roots, read once per
version), with the same answer (local Lance: the coordinator's reader on pure Lance I/O)."""

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
