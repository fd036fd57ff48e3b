"""Arrow schemas of the Lance datasets: the private parts of public relations, the Lance-only
relations, and the projection ledger (pure).

One definition for everything that writes or reads them: the projection (activities/projection/),
the Lance store adapter, the query coordinator's private reader and the erasure.
"""

from __future__ import annotations

import pyarrow as pa

from formats import catalog

# The ledger of projected executions: one row per (generation, root), written last, after the
# execution's facts are visible in Boundary and its Lance rows are committed.
LEDGER = "projected_executions"
LEDGER_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("root_id", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("process_euid", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("index_state", pa.string(), nullable=False),
        pa.field("value_state", pa.string(), nullable=False),
        pa.field("meta_key", pa.string(), nullable=True),
        pa.field("lance_state", pa.string(), nullable=False),
        pa.field("committed_at_ns", pa.int64(), nullable=False),
    ],
    metadata={"baml.dataset": LEDGER},
)

# Key columns of a public relation's private part (its Lance rows join the public row by them).
_PRIVATE_PART_KEYS: dict[str, tuple[tuple[str, pa.DataType], ...]] = {
    "calls_v1": (("row_id", pa.string()), ("execution_id", pa.string()), ("call_id", pa.string())),
    "errors_v1": (("row_id", pa.string()), ("execution_id", pa.string())),
    "function_definitions_v1": (("row_id", pa.string()), ("program_id", pa.string())),
}


def private_schema(dataset: str, version: int = catalog.LATEST_CATALOG_VERSION) -> pa.Schema:
    """Schema of a Lance dataset: a Lance relation's columns, or a public relation's private part."""
    rel = catalog.relation(dataset, version)
    if rel.storage == "lance":
        fields = [pa.field(c.name, c.type, nullable=c.nullable) for c in rel.columns]
    else:
        keys = _PRIVATE_PART_KEYS.get(dataset)
        if keys is None:
            raise KeyError(f"{dataset} has no private part")
        fields = [pa.field(n, t, nullable=False) for n, t in keys]
        fields += [pa.field(c.name, c.type, nullable=True) for c in catalog.private_columns(dataset, version)]
    return pa.schema(fields, metadata={"baml.dataset": dataset, "baml.catalog_version": str(version)})
