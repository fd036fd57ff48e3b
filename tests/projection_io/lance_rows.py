"""Rows of the private Lance datasets for tests of pure Lance I/O: only the columns a test reads
are filled, every other nullable column is null."""

from __future__ import annotations

import pyarrow as pa

from api.dataplane.lance_store import LEDGER, dataset_schema, ledger_row_id


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


def ledger_rows(roots: list[str], generation: int = 1, status: str = "projected") -> pa.Table:
    """Ledger rows for these roots in ``generation``, keyed as the projector keys them."""
    n = len(roots)
    return pa.table(
        {
            "row_id": [ledger_row_id(generation, r) for r in roots],
            "root_id": roots,
            "generation": [generation] * n,
            "process_euid": ["e"] * n,
            "status": [status] * n,
            "index_state": ["complete"] * n,
            "value_state": ["complete"] * n,
            "meta_key": [None] * n,
            "lance_state": ["committed"] * n,
            "committed_at_ns": [1] * n,
        },
        schema=dataset_schema(LEDGER),
    )
