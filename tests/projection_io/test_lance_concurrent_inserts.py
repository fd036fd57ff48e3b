"""Two writers inserting the same new keys at once into a dataset whose key is indexed keep one
row per key (local Lance, real threads, a store each as two worker processes have).

values_v1 and cid_refs_v1 index their keys for lookups. pylance 14's merge_insert joins through
such an index unless told not to, and that path leaves the inserted keys out of the transaction,
so Lance's conflict check never sees the second insert of a key: measured here, every one of 40
rounds of 10 shared keys was held twice (bench/soak.py had found values_v1 keys twice)."""

from __future__ import annotations

from pathlib import Path

from lance_rows import value_rows
from racing_writers import merge_in_racing_rounds

from api.dataplane.lance_store import DATASETS, LanceStore, create_missing_indexes
from formats.object_keys import Scope

SCOPE = Scope("ten_a", "prj_a", "env_a")
ROUNDS = 20


def test_concurrent_inserts_of_the_same_new_keys_keep_one_row_each(tmp_path: Path) -> None:
    first = LanceStore(root=tmp_path)
    first.merge(SCOPE, "values_v1", value_rows(["f" * 64]))
    ds = first.open(SCOPE, "values_v1")
    assert ds is not None and create_missing_indexes(ds, "values_v1") == 1
    assert DATASETS["values_v1"].lookup == ("cid",)  # the index every worker has from then on
    merge_in_racing_rounds(
        tmp_path,
        SCOPE,
        "values_v1",
        lambda r: value_rows([f"{r:08d}{i:056d}" for i in range(10)]),
        range(ROUNDS),
    )
    keys = first.read(SCOPE, "values_v1", columns=["cid"])["cid"].to_pylist()
    assert len(keys) == len(set(keys)) == 1 + ROUNDS * 10
