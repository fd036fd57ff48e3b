"""A projected synthetic corpus for coordinator tests and the query benchmark.

Public facts go to a real Boundary over its workload API (``PUT /projection-batches``, chdb
behind it); private rows go to Lance through :class:`api.dataplane.lance_store.LanceStore`, the
ledger last, as the projection activities commit them. Executions listed in ``pending`` get
their public facts only: their private rows are not in Lance yet.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from activities.projection.assemble import assemble_execution
from activities.projection.batches import build_batches, private_tables
from activities.projection.model import ExecutionProjection, ProjectionBatch
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.lance_store import DATASETS, LEDGER, LEDGER_SCHEMA, LanceStore, ledger_row_id
from formats import boundary_wire as w
from formats import cas, zstd_frame
from formats.object_keys import Scope, large_value_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projection"))
from projection_corpus import CasLookup, streams


@dataclass
class Projected:
    projections: list[ExecutionProjection]
    pending: set[str] = field(default_factory=set)


def project_profile(root: Path) -> list[ExecutionProjection]:
    lookup = CasLookup(root)
    out: list[ExecutionProjection] = []
    for stream in streams(root):
        for inp in stream.ended_inputs():
            result = assemble_execution(inp, lookup)
            if isinstance(result, ExecutionProjection):
                out.append(result)
    return out


def put_batch(client: BoundaryClient, scope: Scope, batch: ProjectionBatch) -> None:
    h = batch.header
    headers = w.ProjectionBatchHeaders(
        generation=h.generation,
        catalog_version=h.catalog_version,
        relation=h.relation,
        root_id=h.root_id,
        content_digest=h.content_digest,
        environment_id=scope.environment_id,
        partition=h.partition,
        row_count=h.row_count,
    )
    client.put_projection_batch(h.batch_id, headers, batch.ipc)


def publish_public(
    client: BoundaryClient, scope: Scope, generation: int, projections: list[ExecutionProjection]
) -> None:
    batches = [b for p in projections for b in build_batches(p, scope, generation)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda b: put_batch(client, scope, b), batches))


LARGE_VALUE_BYTES = 32 * 1024  # the publisher's large-value threshold


def ship_values(values: pa.Table, scope: Scope, objects_root: Path | None) -> pa.Table:
    """values_v1 rows as the publisher and projector leave them: large values also stored as
    ``cas/values/`` objects (one zstd frame around the CAS object) with that key as locator, small
    ones with a pack locator."""
    locators: list[str] = []
    for cid, codec, body, size in zip(
        values["cid"].to_pylist(),
        values["codec"].to_pylist(),
        values["body"].to_pylist(),
        values["size_bytes"].to_pylist(),
        strict=True,
    ):
        if size >= LARGE_VALUE_BYTES and objects_root is not None:
            key = large_value_key(scope, cid)
            path = objects_root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(zstd_frame.compress_object(cas.encode_cas_object(codec, body)))
            locators.append(key)
        else:
            locators.append(f"{scope.environment_id}/values/test.bamlpack.zst#{cid[:8]}")
    return values.set_column(
        values.schema.get_field_index("locator"), "locator", pa.array(locators, pa.string())
    )


def commit_private(
    lance: LanceStore,
    scope: Scope,
    generation: int,
    projections: list[ExecutionProjection],
    *,
    objects_root: Path | None = None,
) -> None:
    per_dataset: dict[str, list[pa.Table]] = {}
    for p in projections:
        for dataset, table in private_tables(p).items():
            per_dataset.setdefault(dataset, []).append(table)
    if "values_v1" in per_dataset:
        values = pa.concat_tables(per_dataset["values_v1"])
        per_dataset["values_v1"] = [ship_values(values, scope, objects_root or lance.root)]
    for dataset in DATASETS:
        if dataset == LEDGER or dataset not in per_dataset:
            continue
        lance.merge(scope, dataset, pa.concat_tables(per_dataset[dataset]))
    now = time.time_ns()
    ledger = pa.table(
        {
            "row_id": [ledger_row_id(generation, p.execution_id) for p in projections],
            "root_id": [p.execution_id for p in projections],
            "generation": [generation] * len(projections),
            "process_euid": [p.process_euid for p in projections],
            "status": [p.status for p in projections],
            "index_state": [p.index_state for p in projections],
            "value_state": [p.value_state for p in projections],
            "meta_key": [None] * len(projections),
            "lance_state": ["committed"] * len(projections),
            "committed_at_ns": [now] * len(projections),
        },
        schema=LEDGER_SCHEMA,
    )
    if ledger.num_rows:
        lance.merge(scope, LEDGER, ledger)


def index_all(lance: LanceStore, scope: Scope) -> None:
    for dataset in DATASETS:
        lance.index_and_compact(scope, dataset)
