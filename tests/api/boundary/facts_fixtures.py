"""Helpers for the fact-store tests: realistic public facts per execution, Arrow batches with
their X-Baml headers, and a world whose runtime uses the session's chdb path."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from boundary_fixtures import World, bearer, workload_client, workload_jwt
from fastapi.testclient import TestClient

from api.boundary.facts.store import FactStore, _chdb_client
from formats import boundary_wire as w
from formats import catalog

HOUR_NS = 3_600_000_000_000
NOW_NS = 1_790_000_000_000_000_000  # a fixed instant; queries use it, never the wall clock


def _hex(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def execution_facts(
    tenant: str, project: str, env: str, gen: int, idx: int, *, failed: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """One execution: root `Pipeline` calling ExtractInvoice (LLM) and Classify (LLM)."""
    ex = _hex("exec", tenant, idx)
    program = _hex("prog", tenant)
    euid = _hex("euid", tenant, idx)
    start = NOW_NS - (idx + 1) * 60_000_000_000
    scope = {"tenant_id": tenant, "project_id": project, "environment_id": env, "generation": gen}
    calls = []
    for pos, (fn, parent, llm, dur) in enumerate(
        [
            ("Pipeline", None, False, 900),
            ("ExtractInvoice", "Pipeline", True, 500 + idx),
            ("Classify", "Pipeline", True, 200 + 10 * idx),
        ]
    ):
        status = "failed" if failed and fn == "Classify" else "succeeded"
        calls.append({
            **scope, "row_id": catalog.deterministic_row_id("calls_v1", ex, pos), "execution_id": ex,
            "process_euid": euid, "thread_id": "t0", "call_id": f"c{pos}",
            "parent_call_id": None if parent is None else "c0", "function_name": fn,
            "parent_function_name": parent, "program_id": program, "call_path_id": _hex("cp", fn),
            "is_llm": llm, "started_at_ns": start + pos, "ended_at_ns": start + pos + dur * 1_000_000,
            "duration_ns": dur * 1_000_000, "status": status,
            "args_state": "available", "output_state": "lost:value_too_large" if pos == 1 and idx % 2 else "available",  # noqa: E501
            "error_state": "available" if status == "failed" else "not_applicable",
            "args_cid": _hex("a", ex, pos), "output_cid": None, "error_cid": None,
        })  # fmt: skip
    threads = [{
        **scope, "row_id": catalog.deterministic_row_id("threads_v1", ex, 0), "execution_id": ex,
        "process_euid": euid, "thread_id": "t0", "parent_thread_id": None, "is_root": True,
        "runtime_id": None, "root_function_name": "Pipeline", "status": "failed" if failed else "succeeded",
        "value_state": "complete", "index_state": "complete", "started_at_ns": start,
        "ended_at_ns": start + 900_000_000, "duration_ns": 900_000_000,
    }]  # fmt: skip
    stats = [{
        **scope, "row_id": catalog.deterministic_row_id("call_path_stats_v1", ex, fn), "execution_id": ex,
        "call_path_id": _hex("cp", fn), "parent_call_path_id": None if fn == "Pipeline" else _hex("cp", "Pipeline"),  # noqa: E501
        "program_id": program, "function_name": fn, "edge_kind": "root" if fn == "Pipeline" else "call",
        "call_count": 1, "error_count": 1 if failed and fn == "Classify" else 0,
        "total_duration_ns": 10, "min_duration_ns": 10, "max_duration_ns": 10,
    } for fn in ("Pipeline", "ExtractInvoice", "Classify")]  # fmt: skip
    errors = [{
        **scope, "row_id": catalog.deterministic_row_id("errors_v1", ex, 0), "execution_id": ex, "call_id": "c2",  # noqa: E501
        "thread_id": "t0", "function_name": "Classify", "is_terminal": True, "occurred_at_ns": start + 5,
        "error_state": "available", "error_cid": _hex("e", ex),
    }] if failed else []  # fmt: skip
    health = [{
        **scope, "row_id": catalog.deterministic_row_id("health_v1", ex, 0), "execution_id": ex,
        "process_euid": euid, "ended_at_ns": start + 900_000_000,
        **{c: (1 if c == "corrupt_records" and failed else 0) for c in catalog.HEALTH_COUNTERS},
    }]  # fmt: skip
    return {
        "calls_v1": calls,
        "threads_v1": threads,
        "call_path_stats_v1": stats,
        "errors_v1": errors,
        "health_v1": health,
    }


def function_definitions(tenant: str, project: str, env: str, gen: int) -> list[dict[str, Any]]:
    program = _hex("prog", tenant)
    return [
        {"tenant_id": tenant, "project_id": project, "environment_id": env, "generation": gen,
         "row_id": catalog.deterministic_row_id("function_definitions_v1", program, i), "program_id": program,
         "function_id": i, "function_name": fn, "is_llm": fn != "Pipeline", "table_cid": _hex("tbl", tenant)}
        for i, fn in enumerate(("Pipeline", "ExtractInvoice", "Classify"))
    ]  # fmt: skip


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def make_batch(
    relation: str,
    rows: list[dict[str, Any]],
    environment_id: str,
    generation: int,
    root_id: str,
    *,
    schema: pa.Schema | None = None,
) -> tuple[bytes, w.ProjectionBatchHeaders]:
    table = pa.Table.from_pylist(rows, schema=schema or catalog.public_schema(relation))
    body = ipc(table)
    headers = w.ProjectionBatchHeaders(
        generation=generation, catalog_version=1, relation=relation, root_id=root_id,
        content_digest="sha256:" + hashlib.sha256(body).hexdigest(), environment_id=environment_id,
        partition=0, row_count=table.num_rows,
    )  # fmt: skip
    return body, headers


def batch_id_for(relation: str, root_id: str) -> str:
    return catalog.deterministic_row_id("projection_batch", root_id, relation, 0)


class Facts:
    """A tenant's workload client with its JWT, plus helpers to publish executions."""

    def __init__(self, world: World, which: str) -> None:
        self.t = getattr(world, which)
        self.client: TestClient = workload_client(world.runtime, self.t.pki.client_cert)
        self.h = bearer(workload_jwt(self.client))

    def put(self, batch_id: str, body: bytes, headers: w.ProjectionBatchHeaders, **override: str) -> Any:
        hdrs = {**self.h, **headers.http_headers(), **override}
        return self.client.put(f"/projection-batches/{batch_id}", content=body, headers=hdrs)

    def publish_execution(self, idx: int, *, gen: int = 1, failed: bool = False) -> str:
        facts = execution_facts(
            self.t.tenant_id, self.t.project_id, self.t.environment_id, gen, idx, failed=failed
        )
        root = facts["calls_v1"][0]["execution_id"]
        for rel, rows in facts.items():
            if rows:
                body, hdr = make_batch(rel, rows, self.t.environment_id, gen, root)
                resp = self.put(batch_id_for(rel, root), body, hdr)
                assert resp.status_code == 200, resp.text
        return str(root)

    def publish_definitions(self, gen: int = 1) -> None:
        rows = function_definitions(self.t.tenant_id, self.t.project_id, self.t.environment_id, gen)
        program = rows[0]["program_id"]
        body, hdr = make_batch("function_definitions_v1", rows, self.t.environment_id, gen, program)
        assert self.put(batch_id_for("function_definitions_v1", program), body, hdr).status_code == 200

    def query(self, sql: str, **extra: Any) -> Any:
        body = {
            "sql": sql,
            "environment_id": self.t.environment_id,
            "generation": 1,
            "catalog_version": 1,
            **extra,
        }
        return self.client.post("/resident-queries", json=body, headers=self.h)


def read_arrow(resp: Any) -> pa.Table:
    assert resp.status_code == 200, resp.text
    return pa.ipc.open_stream(pa.py_buffer(resp.content)).read_all()


@pytest.fixture
def fact_world(world: World, chdb_path: Path, chdb_database: str) -> Iterator[World]:
    """The seeded two-tenant world, its fact store on the session chdb path (fresh tenants per
    test, so tests in one database never see each other's rows)."""
    world.runtime.facts = FactStore(_chdb_client(chdb_path), database=chdb_database)
    world.runtime.facts.ensure_schema()
    yield world
