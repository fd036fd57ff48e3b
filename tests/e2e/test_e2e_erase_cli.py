"""``baml-studio erase`` on the embedded stack, run as users run it (the console script, a subprocess):
the receipt it prints (``--json``) is checked count by count against direct listings of each store
taken before and after: S3 (``list_object_versions`` under the stream's prefix and the scope's
``cas/``), ClickHouse (resident queries per fact relation) and Lance (rows of the erased roots and
programs in every private dataset, newest version and every version left on storage). The
neighbouring streams keep everything. Answering 'n' at the prompt erases nothing.

The stack is this module's own (tests/e2e/conftest.py); each test still erases only streams of a
corpus it uploaded itself.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_world import Corpus, World, wait_for

from api.boundary.facts.ddl import EXECUTION_RELATIONS
from api.dataplane.lance_store import DATASETS, LanceStore, dataset_schema
from formats import object_keys

pytestmark = pytest.mark.stack

BAML_STUDIO = Path(sys.executable).with_name("baml-studio")


def _in(ids: set[str]) -> str:
    return ", ".join(f"'{i}'" for i in sorted(ids))


def lance_store(world: World) -> LanceStore:
    return LanceStore.in_bucket(world.state.bucket, world.state)


@dataclass(frozen=True)
class Stream:
    euid: str
    roots: frozenset[str]
    programs: frozenset[str]


def streams_of(world: World, corpus: Corpus) -> list[Stream]:
    out = []
    for euid in corpus.truth.streams:
        roots = frozenset(x.execution_id for x in corpus.truth.executions if x.stream == euid)
        programs = world.boundary.resident_query(
            f"SELECT DISTINCT program_id FROM calls_v1 WHERE execution_id IN ({_in(set(roots))})",
            world.scope.environment_id,
            generation=1,
            catalog_version=1,
        )["program_id"].to_pylist()
        out.append(Stream(euid, roots, frozenset(programs)))
    return out


def s3_versions(world: World, prefix: str) -> tuple[list[str], list[str]]:
    """(keys of object versions, keys of delete markers) under the prefix, every page."""
    versions: list[str] = []
    markers: list[str] = []
    pages = world.s3.get_paginator("list_object_versions").paginate(Bucket=world.state.bucket, Prefix=prefix)
    for page in pages:
        versions += [v["Key"] for v in page.get("Versions", [])]
        markers += [m["Key"] for m in page.get("DeleteMarkers", [])]
    return versions, markers


def fact_rows(world: World, s: Stream) -> dict[str, int]:
    """ClickHouse rows of the stream's roots in each execution relation, and of its programs'
    function definitions (the only program-keyed relation)."""
    out = {}
    for rel in EXECUTION_RELATIONS:
        out[rel] = _resident_count(world, rel, f"execution_id IN ({_in(set(s.roots))})")
    out["function_definitions_v1"] = (
        _resident_count(world, "function_definitions_v1", f"program_id IN ({_in(set(s.programs))})")
        if s.programs
        else 0
    )
    return out


def _resident_count(world: World, rel: str, where: str) -> int:
    table = world.boundary.resident_query(
        f"SELECT count() AS n FROM {rel} WHERE {where}",
        world.scope.environment_id,
        generation=1,
        catalog_version=1,
    )
    return int(table["n"][0].as_py())


def _predicate(dataset: str, s: Stream) -> str | None:
    """The filter selecting the stream's rows in a private dataset; None for values_v1 (keyed by
    CID, shared between streams: counted in total)."""
    names = dataset_schema(dataset).names
    for column in ("execution_id", "root_id"):
        if column in names:
            return f"{column} IN ({_in(set(s.roots))})"
    if "program_id" in names:
        return f"program_id IN ({_in(set(s.programs) or {'-'})})"
    assert dataset == "values_v1", f"no way to find a stream's rows in {dataset}"
    return None


def programs_used_elsewhere(world: World, s: Stream) -> frozenset[str]:
    """The stream's programs that another stream's projected calls also name (one build run by
    several processes shares one content-hashed program id): the erasure keeps their rows."""
    if not s.programs:
        return frozenset()
    table = world.boundary.resident_query(
        f"SELECT DISTINCT program_id FROM calls_v1 WHERE program_id IN ({_in(set(s.programs))})"
        f" AND process_euid != '{s.euid}'",
        world.scope.environment_id,
        generation=1,
        catalog_version=1,
    )
    return frozenset(table["program_id"].to_pylist())


def program_rows(world: World, lance: LanceStore, programs: frozenset[str]) -> dict[str, int]:
    """Public function definitions and private program-keyed rows of these programs."""
    if not programs:
        return {}
    out = {
        "function_definitions_v1 (public)": _resident_count(
            world, "function_definitions_v1", f"program_id IN ({_in(set(programs))})"
        )
    }
    for dataset in ("function_definitions_v1", "source_files_v1"):
        out[dataset] = lance.count(world.scope, dataset, f"program_id IN ({_in(set(programs))})")
    return out


def lance_rows(lance: LanceStore, world: World, s: Stream, *, all_versions: bool = False) -> dict[str, int]:
    """Rows of the stream in every private dataset but values_v1: the newest version, or summed
    over every version still on storage."""
    out = {}
    for dataset in DATASETS:
        where = _predicate(dataset, s)
        if where is None:
            continue
        ds = lance.open(world.scope, dataset)
        if ds is None:
            out[dataset] = 0
            continue
        versions = [int(v["version"]) for v in ds.versions()] if all_versions else [ds.version]
        total = 0
        for v in versions:
            old = lance.open(world.scope, dataset, version=v)
            total += 0 if old is None else int(old.count_rows(filter=where))
        out[dataset] = total
    return out


@dataclass
class Snapshot:
    versions: int
    markers: int
    facts: dict[str, int]
    lance: dict[str, int]


def snapshot(world: World, lance: LanceStore, s: Stream) -> Snapshot:
    versions, markers = s3_versions(world, object_keys.stream_prefix(world.scope, s.euid))
    return Snapshot(len(versions), len(markers), fact_rows(world, s), lance_rows(lance, world, s))


def cas_keys(world: World) -> set[str]:
    versions, markers = s3_versions(world, f"{object_keys.evidence_prefix(world.scope)}cas/")
    return set(versions) | set(markers)


def erase(
    world: World, euid: str, *extra: str, answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BAML_STUDIO), "erase", "--process-euid", euid, "--run-dir", world.state.run_dir, *extra],
        input=answer,
        capture_output=True,
        text=True,
        timeout=600,
    )


def erasure_id(world: World, key: str) -> str:
    """docs/erasure.md: ``"ers_" + sha256("<tenant>/<project>/<env>\\n<key>")[:32]``."""
    s = world.scope
    path = f"{s.tenant_id}/{s.project_id}/{s.environment_id}"
    return "ers_" + hashlib.sha256(f"{path}\n{key}".encode()).hexdigest()[:32]


def projected(world: World, tmp_path: Path, **config: Any) -> Corpus:
    corpus = world.corpus(tmp_path, **config)
    world.upload(corpus)
    world.wait_in_ledger(corpus.ended(), timeout=150)
    # Nothing still in flight, so the counts taken before the erasure are final.
    wait_for(world.queue_drained, 60, "the projection queue to drain")
    return corpus


def test_erase_cli_receipt_matches_every_store(world: World, tmp_path: Path) -> None:
    corpus = projected(world, tmp_path, executions=18, processes=3, p_large_value=0.05)
    lance = lance_store(world)
    gone, *kept = streams_of(world, corpus)
    assert kept and all(s.roots for s in (gone, *kept))
    # Programs another stream still runs keep their rows (checked below); the rest go with the stream.
    shared = programs_used_elsewhere(world, gone)
    gone = replace(gone, programs=gone.programs - shared)
    shared_before = program_rows(world, lance, shared)
    before = snapshot(world, lance, gone)
    before_kept = [snapshot(world, lance, s) for s in kept]
    values_before = lance.count(world.scope, "values_v1")
    cas_before = cas_keys(world)
    # What the erasure has to remove is there, in every store.
    assert before.versions > 0 and before.facts["calls_v1"] > 0 and before.lance["calls_v1"] > 0

    key = f"e2e-erase-{gone.euid}"
    run = erase(world, gone.euid, "--yes", "--json", "--key", key)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "succeeded" in run.stderr  # the progress, on stderr beside the JSON document
    result = json.loads(run.stdout)
    assert result["state"] == "succeeded" and result["erasure_id"] == erasure_id(world, key)
    assert result["streams_matched"] == result["streams_deleted"] == 1
    receipt = result["receipt"]
    assert receipt["verified"] is True
    assert receipt["streams"] == [gone.euid] and receipt["root_ids"] == len(gone.roots)

    # S3: what was listed before is what the receipt says it deleted; nothing is listed now.
    after_versions, after_markers = s3_versions(world, object_keys.stream_prefix(world.scope, gone.euid))
    s3 = receipt["s3"]
    assert s3["object_versions_deleted"] == before.versions
    assert s3["delete_markers_deleted"] == before.markers
    assert s3["remaining_object_versions"] == len(after_versions) + len(after_markers) == 0
    assert s3["remaining_by_stream"] == {gone.euid: 0}
    assert s3["shared_objects_deleted"] == len(cas_before - cas_keys(world))

    # ClickHouse: the rows the receipt counts as deleted were there; none is left.
    facts = receipt["boundary"]
    after_facts = fact_rows(world, gone)
    assert after_facts == dict.fromkeys(after_facts, 0)
    for rel in EXECUTION_RELATIONS:
        assert facts["fact_rows_deleted"][rel] == before.facts[rel], rel
        assert facts["remaining_fact_rows"][rel] == after_facts[rel] == 0, rel
    # The programs no other stream runs lose their definitions; the shared ones keep every row.
    assert facts["fact_rows_deleted"]["function_definitions_v1"] == before.facts["function_definitions_v1"]
    assert set(receipt["programs"]["kept_in_use"]) == shared
    # (The plan's programs come from EngineStarted records: an engine without calls adds one.)
    assert gone.programs <= set(receipt["programs"]["erased"]) and not shared & set(
        receipt["programs"]["erased"]
    )
    assert program_rows(world, lance, shared) == shared_before
    assert facts["remaining_total"] == 0

    # Lance: every private dataset, the newest version and every version still on storage.
    rows = receipt["lance"]
    now = lance_rows(lance, world, gone)
    every = lance_rows(lance, world, gone, all_versions=True)
    assert set(now) == set(DATASETS) - {"values_v1"}
    for dataset in now:
        assert rows["rows_deleted"][dataset] == before.lance[dataset], dataset
        assert rows["remaining_rows_current"][dataset] == now[dataset] == 0, dataset
        assert rows["remaining_rows_all_versions"][dataset] == every[dataset] == 0, dataset
    assert rows["rows_deleted"]["values_v1"] == values_before - lance.count(world.scope, "values_v1")

    # The neighbours keep every object version, fact row and Lance row.
    for s, was in zip(kept, before_kept, strict=True):
        assert was.versions > 0 and was.facts["calls_v1"] > 0 and was.lance["calls_v1"] > 0
        assert snapshot(world, lance, s) == was, s.euid


def test_erase_cli_answering_no_erases_nothing(world: World, tmp_path: Path) -> None:
    corpus = projected(world, tmp_path, executions=4)
    lance = lance_store(world)
    (stream,) = streams_of(world, corpus)
    before = snapshot(world, lance, stream)
    assert before.versions > 0 and before.facts["calls_v1"] > 0 and before.lance["calls_v1"] > 0

    key = f"e2e-no-{stream.euid}"
    run = erase(world, stream.euid, "--key", key, answer="n\n")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"Erase every stream selected by process_euids (1: {stream.euid})" in run.stdout
    assert "Aborted" in run.stderr
    assert "receipt" not in run.stdout
    # No erasure was started under that key, and every store still holds the stream.
    got = httpx.get(
        f"{world.state.gateway_url}/v1/erasures/{erasure_id(world, key)}",
        headers={"Authorization": f"Bearer {world.state.user_token}"},
        timeout=30,
    )
    assert got.status_code == 404 and got.json()["code"] == "erasure_not_found", got.text
    assert snapshot(world, lance, stream) == before


def derived_versions_holding(world: World, ids: set[str]) -> dict[str, list[str]]:
    """Keys under the scope's Lance datasets (``derived/``) with an object version, current or
    noncurrent, whose bytes contain one of the ids (a lower bound: a compressed column hides them)."""
    prefix = object_keys.lance_dataset_key(world.scope, "calls_v1").rsplit("/", 1)[0] + "/"
    needles = [i.encode() for i in ids]
    found: dict[str, list[str]] = {"current": [], "noncurrent": []}
    pages = world.s3.get_paginator("list_object_versions").paginate(Bucket=world.state.bucket, Prefix=prefix)
    for page in pages:
        for v in page.get("Versions", []):
            body = world.s3.get_object(Bucket=world.state.bucket, Key=v["Key"], VersionId=v["VersionId"])
            if any(n in body["Body"].read() for n in needles):
                found["current" if v["IsLatest"] else "noncurrent"].append(v["Key"].removeprefix(prefix))
    return found


def test_erase_leaves_no_lance_file_version_with_the_erased_rows(world: World, tmp_path: Path) -> None:
    corpus = projected(world, tmp_path, executions=6, processes=2)
    gone = corpus.truth.streams[0]
    roots = {x.execution_id for x in corpus.truth.executions if x.stream == gone}
    assert derived_versions_holding(world, roots)["current"]  # the check sees them before
    run = erase(world, gone, "--yes", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["receipt"]["verified"], run.stdout + run.stderr
    assert derived_versions_holding(world, roots) == {"current": [], "noncurrent": []}
