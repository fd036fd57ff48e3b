"""Rows of the private Lance datasets for tests of pure Lance I/O: only the columns a test reads
are filled, every other nullable column is null."""

from __future__ import annotations

import pyarrow as pa

from api.dataplane.lance_store import dataset_schema


def value_rows(cids: list[str]) -> pa.Table:
    """values_v1 rows, one per CID, each with the same small body."""
    n = len(cids)
    return pa.table(
        {"cid": cids, "codec": [1] * n, "size_bytes": [4] * n, "body": [b"body"] * n, "locator": [None] * n},
        schema=dataset_schema("values_v1"),
    )


def leaf_rows(start: int, n: int, word: str = "text") -> pa.Table:
    """value_leaves_v1 rows ``start..start+n``, each string leaf ending in ``word``, row ``i``
    started at ``i`` microseconds."""
    schema = dataset_schema("value_leaves_v1")
    ids = range(start, start + n)
    given = {
        "row_id": [f"leaf{i}" for i in ids],
        "execution_id": [f"x{i % 5}" for i in ids],
        "call_id": [f"c{i}" for i in ids],
        "cid": [f"{i:064x}" for i in ids],
        "role": ["arg"] * n,
        "path": ["$.text"] * n,
        "started_at_ns": [i * 1000 for i in ids],
        "string": [f"row {i} says {word}" for i in ids],
    }
    return pa.table({f.name: given.get(f.name, pa.nulls(n, f.type)) for f in schema}, schema=schema)
