"""The erasure activities called as plain functions against moto, Boundary (chdb) and Lance on moto."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from corpus import make_corpus, put_all, root_rows_in_clickhouse
from erasure_corpus import project_corpus

from formats import object_keys
from formats.contracts import ScopeRef
from formats.contracts import erasure as e
from formats.contracts import projection as c


def scope_ref(world: Any) -> ScopeRef:
    s = world.scope
    return ScopeRef(s.tenant_id, s.project_id, s.environment_id)


def run_all(world: Any, selector: e.Selector, erasure_id: str) -> tuple[e.PlanRef, e.VerifyResult]:
    er = world.erasure
    plan = er.resolve(e.ResolveInput(erasure_id, scope_ref(world), selector))
    step = e.PlanInput(erasure_id, plan)
    er.delete_stream_objects(step)
    er.erase_facts(step)
    er.erase_lance_rows(step)
    er.delete_unreferenced(step)
    er.cleanup_lance_versions(e.CleanupInput(erasure_id, scope_ref(world)))
    return plan, er.verify(step)


def stream_objects(world: Any, euid: str) -> int:
    page = world.s3.list_object_versions(
        Bucket=world.bucket, Prefix=object_keys.stream_prefix(world.scope, euid)
    )
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def registry_entries(world: Any, euid: str) -> int:
    """Object versions of the stream's engine registry (derived/v1/<scope>/engines/<euid>/)."""
    return _versions(world, object_keys.engine_registry_prefix(world.scope, euid))


def sweep_states(world: Any, euid: str) -> int:
    """Object versions of the stream's sweep state (derived/v1/<scope>/sweep/<euid>/)."""
    return _versions(world, object_keys.sweep_state_prefix(world.scope, euid))


def _versions(world: Any, prefix: str) -> int:
    page = world.s3.list_object_versions(Bucket=world.bucket, Prefix=prefix)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def test_process_euid_erasure_removes_the_stream_and_only_it(eworld, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, eworld.scope, executions=8, processes=2)
    put_all(eworld, corpus)
    # A second version and a delete marker of one object: erasure removes prior versions too.
    first_meta = next(k for k in corpus.up.meta_keys if corpus.euids[0] in k)
    eworld.s3.put_object(Bucket=eworld.bucket, Key=first_meta, Body=corpus.up.bodies[first_meta])
    project_corpus(eworld, corpus)
    gone, kept = corpus.euids
    by_stream = Counter(x.execution_id[:32] for x in corpus.truth.executions)
    assert by_stream[gone] and by_stream[kept]
    assert registry_entries(eworld, gone) and registry_entries(eworld, kept)  # projection registered
    eworld.maintenance.sweep(c.SweepInput(scope_ref(eworld), silence_limit_s=0))
    assert sweep_states(eworld, gone) and sweep_states(eworld, kept)  # the sweep closed both streams
    plan, check = run_all(eworld, e.Selector(process_euids=(gone,)), "er-euid")
    assert plan.euids == (gone,)
    assert check.clean, check
    assert stream_objects(eworld, gone) == 0
    assert stream_objects(eworld, kept) > 0
    assert registry_entries(eworld, gone) == 0 and registry_entries(eworld, kept) > 0
    assert sweep_states(eworld, gone) == 0 and sweep_states(eworld, kept) > 0
    assert root_rows_in_clickhouse(eworld, gone) == {}
    assert len(root_rows_in_clickhouse(eworld, kept)) == len(
        [x for x in corpus.truth.executions if x.execution_id.startswith(kept) and x.status != "abandoned"]
    )
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{gone}')") == 0
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{kept}')") > 0


def test_shared_table_kept_until_the_last_stream_referencing_it_is_erased(eworld, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, eworld.scope, executions=8, processes=2, value_pool_size=4)
    put_all(eworld, corpus)
    project_corpus(eworld, corpus)
    first, second = corpus.euids
    refs = eworld.lance.read(eworld.scope, "cid_refs_v1", columns=["cid", "process_euid"])
    streams_of: dict[str, set[str]] = {}
    for cid, euid in zip(refs["cid"].to_pylist(), refs["process_euid"].to_pylist(), strict=True):
        streams_of.setdefault(cid, set()).add(euid)
    shared_tables = [
        k for k in corpus.up.table_keys if streams_of.get(k.rsplit("/", 1)[1][:64]) == {first, second}
    ]
    assert shared_tables, "the two streams run the same program: its function table is shared"
    shared = [c for c, s in streams_of.items() if s == {first, second}]
    shared_values = sorted(eworld.lance.lookup_values(eworld.scope, shared))
    assert shared_values, "the value pool makes the streams share small values"

    def exists(key: str) -> bool:
        return bool(eworld.s3.list_object_versions(Bucket=eworld.bucket, Prefix=key).get("Versions"))

    _, check = run_all(eworld, e.Selector(process_euids=(first,)), "er-shared-1")
    assert check.clean
    assert all(exists(k) for k in shared_tables)  # the second stream still references it
    # Values the second stream still references stay readable (their pack was the first stream's).
    assert set(eworld.lance.lookup_values(eworld.scope, shared_values)) == set(shared_values)
    _, check = run_all(eworld, e.Selector(process_euids=(second,)), "er-shared-2")
    assert check.clean
    assert not any(exists(k) for k in shared_tables)  # removed with the last stream
    assert eworld.lance.lookup_values(eworld.scope, shared_values) == {}
    assert eworld.lance.count(eworld.scope, "cid_refs_v1") == 0


def test_time_range_selector_and_rerun_are_idempotent(eworld, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, eworld.scope, executions=4, processes=1)
    put_all(eworld, corpus)
    project_corpus(eworld, corpus)
    (euid,) = corpus.euids
    starts = [x.started_unix_ns for x in corpus.truth.executions]
    lo, hi = min(starts), max(starts) + 1
    plan, check = run_all(eworld, e.Selector(time_from_ns=lo, time_to_ns=hi), "er-time")
    # Boundary is shared by the session: earlier tests' streams (same synthetic clock) match too.
    assert euid in plan.euids and check.clean
    assert root_rows_in_clickhouse(eworld, euid) == {}
    # Everything again (a crash after the last step): nothing left to delete, still clean.
    _, check2 = run_all(eworld, e.Selector(process_euids=(euid,)), "er-time")
    assert check2.clean
    assert stream_objects(eworld, euid) == 0
