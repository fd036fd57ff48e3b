"""Two streams of one build (one program id, one function table): erasing one keeps every
program-keyed row and object the other still uses, public and private; erasing the other removes
the program entirely. Activities called as plain functions against moto, Boundary (chdb) and Lance."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from corpus import make_corpus, put_all, root_rows_in_clickhouse
from erasure_corpus import project_corpus
from shared_build import build_program_id, one_build

from formats import object_keys
from formats.contracts import ScopeRef
from formats.contracts import erasure as e
from workflows.erasure import receipt

PROGRAM_DATASETS = ("function_definitions_v1", "source_files_v1")
STREAM_DATASETS = {
    "calls_v1": "execution_id",
    "value_leaves_v1": "execution_id",
    "errors_v1": "execution_id",
    "projected_executions": "root_id",
    "cid_refs_v1": "root_id",
}


def erase(world: Any, euid: str, erasure_id: str) -> dict[str, Any]:
    """Every step in the workflow's order; the receipt the workflow would report."""
    s = world.scope
    scope = ScopeRef(s.tenant_id, s.project_id, s.environment_id)
    er = world.erasure
    selector = e.Selector(process_euids=(euid,))
    plan = er.resolve(e.ResolveInput(erasure_id, scope, selector))
    step = e.PlanInput(erasure_id, plan)
    deleted = er.delete_stream_objects(step)
    facts = er.erase_facts(step)
    lance = er.erase_lance_rows(step)
    shared = er.delete_unreferenced(step)
    cleanup = er.cleanup_lance_versions(e.CleanupInput(erasure_id, scope))
    check = er.verify(step)
    er.discard_plan(step)
    return receipt(
        e.ErasureInput(erasure_id, scope, selector), plan, deleted, facts, lance, shared, cleanup, check
    )


def resident(world: Any, sql: str) -> list[dict[str, Any]]:
    table = world.client.resident_query(sql, world.scope.environment_id, generation=1, catalog_version=1)
    return list(table.to_pylist())


def program_facts(world: Any, program: str) -> list[dict[str, Any]]:
    """The program's public function definitions, as a query sees them."""
    return resident(
        world,
        "SELECT function_id, function_name, is_llm, table_cid FROM function_definitions_v1 "
        f"WHERE program_id = '{program}' ORDER BY function_id",
    )


def program_rows(world: Any, program: str) -> dict[str, list[dict[str, Any]]]:
    """The program's private rows in Lance (source paths and spans, source files)."""
    out = {}
    for dataset in PROGRAM_DATASETS:
        table = world.lance.read(world.scope, dataset, filter=f"program_id = '{program}'")
        out[dataset] = sorted(table.to_pylist(), key=repr)
    return out


def object_exists(world: Any, key: str) -> bool:
    return bool(world.s3.list_object_versions(Bucket=world.bucket, Prefix=key).get("Versions"))


def stream_view(world: Any, euid: str, program: str) -> dict[str, Any]:
    """What queries of one stream read, public and private."""
    calls = resident(
        world, f"SELECT count() AS n FROM calls_v1 WHERE process_euid = '{euid}' AND program_id = '{program}'"
    )[0]["n"]
    # Its calls resolve to their function definitions (the program's public rows).
    defined = resident(
        world,
        f"SELECT count() AS n FROM calls_v1 WHERE process_euid = '{euid}' "
        "AND program_id IN (SELECT program_id FROM function_definitions_v1)",
    )[0]["n"]
    lance = {
        dataset: world.lance.count(world.scope, dataset, f"starts_with({column}, '{euid}')")
        for dataset, column in STREAM_DATASETS.items()
    }
    refs = world.lance.read(world.scope, "cid_refs_v1", columns=["cid"], filter=f"process_euid = '{euid}'")
    cids = sorted(set(refs["cid"].to_pylist()))
    return {
        "roots": root_rows_in_clickhouse(world, euid),
        "calls": calls,
        "calls_with_definitions": defined,
        "lance": lance,
        "values_readable": sorted(world.lance.lookup_values(world.scope, cids)),
        "objects": len(
            world.s3.list_object_versions(
                Bucket=world.bucket, Prefix=object_keys.stream_prefix(world.scope, euid)
            ).get("Versions", [])
        ),
    }


def test_shared_program_rows_stay_until_the_last_stream_of_the_build_is_erased(
    eworld: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program_id = build_program_id(f"synth-{uuid.uuid4().hex}")
    program = program_id.hex()
    one_build(monkeypatch, program_id)
    corpus = make_corpus(tmp_path, eworld.scope, executions=8, processes=2)
    put_all(eworld, corpus)
    project_corpus(eworld, corpus)
    first, second = corpus.euids
    (table_key,) = corpus.up.table_keys  # one build, one function table
    facts = program_facts(eworld, program)
    rows = program_rows(eworld, program)
    assert facts and all(rows.values()), "the projection wrote the program's public and private rows"
    assert all(r["source_path"] for r in rows["function_definitions_v1"])
    view = stream_view(eworld, second, program)
    assert view["calls"] > 0 and view["calls_with_definitions"] == view["calls"]
    assert all(
        view["lance"][d] for d in ("calls_v1", "value_leaves_v1", "projected_executions", "cid_refs_v1")
    )
    assert view["values_readable"]

    gone = erase(eworld, first, f"er-build-1-{uuid.uuid4().hex[:6]}")
    assert gone["verified"], gone
    # The first stream is gone from every store.
    assert root_rows_in_clickhouse(eworld, first) == {}
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{first}')") == 0
    # The program the second stream still runs keeps its rows, public and private, and its table.
    assert program_facts(eworld, program) == facts
    assert program_rows(eworld, program) == rows
    assert object_exists(eworld, table_key)
    assert stream_view(eworld, second, program) == view
    # The receipt says what was kept and why.
    programs = gone["programs"]
    assert programs["erased"] == []
    assert programs["kept_in_use"] == {program: {"streams": 1}}
    assert programs["lance_rows_kept"] == {d: len(rows[d]) for d in PROGRAM_DATASETS}
    assert programs["fact_rows_kept"] == {"function_definitions_v1": len(facts)}
    assert programs["in_use_at_verification"] == {program: 1}
    assert gone["boundary"]["fact_rows_deleted"]["function_definitions_v1"] == 0
    assert all(gone["lance"]["rows_deleted"][d] == 0 for d in PROGRAM_DATASETS)
    assert gone["s3"]["shared_objects_deleted"] == 0

    last = erase(eworld, second, f"er-build-2-{uuid.uuid4().hex[:6]}")
    assert last["verified"], last
    assert last["programs"]["erased"] == [program] and last["programs"]["kept_in_use"] == {}
    assert program_facts(eworld, program) == []
    assert program_rows(eworld, program) == {d: [] for d in PROGRAM_DATASETS}
    assert not object_exists(eworld, table_key)
    assert last["boundary"]["fact_rows_deleted"]["function_definitions_v1"] == len(facts)
    assert {d: last["lance"]["rows_deleted"][d] for d in PROGRAM_DATASETS} == {
        d: len(rows[d]) for d in PROGRAM_DATASETS
    }
    assert last["lance"]["remaining_rows_all_versions"]["function_definitions_v1"] == 0
    assert eworld.lance.count(eworld.scope, "cid_refs_v1") == 0
