"""The projection activities called as plain functions against moto, Lance on moto and Boundary."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from corpus import make_corpus, put_all, root_rows_in_clickhouse
from temporalio.exceptions import ApplicationError

from formats import meta_segment as ms
from formats import object_keys
from formats.contracts import projection as c
from formats.object_keys import Scope
from formats.zstd_frame import compress_object, decompress_object
from worker.temporal_worker import _log_memory


def project_all(world, keys: list[str], generation: int = 1) -> Counter[str]:  # type: ignore[no-untyped-def]
    got: Counter[str] = Counter()
    for key in keys:
        for o in world.acts.project_meta_object(c.ProjectMetaInput(key, generation)).outcomes:
            got[o.outcome] += 1
    return got


def ingest_all(world, keys: list[str]) -> None:  # type: ignore[no-untyped-def]
    for key in keys:
        world.acts.ingest_pack(c.IngestPackInput(key))


def test_ingest_pack_duplicates_collapse(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=20)
    put_all(world, corpus)
    first = [world.acts.ingest_pack(c.IngestPackInput(k)) for k in corpus.up.pack_keys]
    again = [world.acts.ingest_pack(c.IngestPackInput(k)) for k in corpus.up.pack_keys]
    distinct = {cid for r in first for cid in r.cids}
    assert sum(r.inserted for r in first) == len(distinct)
    assert sum(r.inserted for r in again) == 0
    assert world.lance.count(world.scope, "values_v1") == len(distinct)


def test_meta_projection_projects_every_execution_once(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=40)
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    outcomes = project_all(world, corpus.up.meta_keys)
    assert outcomes == Counter({c.PROJECTED: len(corpus.ended_ids)})
    rows = root_rows_in_clickhouse(world, corpus.euids[0])
    assert set(rows) == corpus.ended_ids and set(rows.values()) == {1}
    assert world.lance.ledger_roots(world.scope, 1) >= corpus.ended_ids
    leaves = world.lance.count(world.scope, "value_leaves_v1")
    calls = world.lance.count(world.scope, "calls_v1")
    assert leaves > 0 and calls == sum(
        len(e.spans) for e in corpus.truth.executions if e.status != "abandoned"
    )

    # Duplicate delivery: the same objects again change nothing.
    assert project_all(world, corpus.up.meta_keys) == outcomes
    assert root_rows_in_clickhouse(world, corpus.euids[0]) == rows
    assert world.lance.count(world.scope, "value_leaves_v1") == leaves
    assert world.lance.count(world.scope, "calls_v1") == calls


def test_root_ended_before_its_pack_is_pending_then_projected(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=10)
    put_all(world, corpus, skip=set(corpus.up.pack_keys))
    result = [world.acts.project_meta_object(c.ProjectMetaInput(k, 1)) for k in corpus.up.meta_keys]
    pending = [o for r in result for o in r.outcomes if o.outcome == c.PENDING]
    assert pending and all(o.missing_cids for o in pending)
    assert not set(root_rows_in_clickhouse(world, corpus.euids[0])) & {o.root_id for o in pending}
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    assert project_all(world, corpus.up.meta_keys) == Counter({c.PROJECTED: len(corpus.ended_ids)})


def test_silent_stream_is_swept_as_abandoned_once(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=6, unfinished_per_process=2)
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    project_all(world, corpus.up.meta_keys)
    scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
    assert world.maintenance.sweep(c.SweepInput(scope, silence_limit_s=3600)).outcomes == ()
    swept = world.maintenance.sweep(c.SweepInput(scope, silence_limit_s=0))
    assert {o.root_id for o in swept.outcomes} == corpus.open_ids
    assert {o.outcome for o in swept.outcomes} == {c.ABANDONED}
    assert set(root_rows_in_clickhouse(world, corpus.euids[0])) == corpus.ended_ids | corpus.open_ids
    assert world.maintenance.sweep(c.SweepInput(scope, silence_limit_s=0)).outcomes == ()


def _corrupt_trailer(body: bytes) -> bytes:
    raw = bytearray(decompress_object(body))
    raw[-1] ^= 0xFF  # the trailing SHA-256 no longer matches
    return compress_object(bytes(raw))


def test_bad_checksum_quarantines_only_that_object(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=30)
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    bad = corpus.up.meta_keys[-1]
    world.s3.put_object(Bucket=world.bucket, Key=bad, Body=_corrupt_trailer(corpus.up.bodies[bad]))
    with pytest.raises(ApplicationError) as info:
        world.acts.project_meta_object(c.ProjectMetaInput(bad, 1))
    assert info.value.type == c.ERR_QUARANTINED and info.value.non_retryable
    assert info.value.details[0] == "checksum_mismatch"
    marker = world.acts.quarantine_object(c.QuarantineInput(bad, "checksum_mismatch"))
    assert marker.created and marker.marker_key == f"quarantine/{bad}.quarantine"
    assert not world.acts.quarantine_object(c.QuarantineInput(bad, "checksum_mismatch")).created
    assert world.s3.get_object(Bucket=world.bucket, Key=bad)["Body"].read()  # the object is kept
    others = project_all(world, corpus.up.meta_keys[:-1])
    assert set(others) == {c.PROJECTED} and sum(others.values()) > 0


def test_interior_data_gap_marks_crossing_executions_index_corrupt(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=40, p_long=0.3)
    assert len(corpus.up.data_keys) >= 3
    gap_key = corpus.up.data_keys[1]
    gap_seq = object_keys.parse_evidence_key(gap_key).sequence
    put_all(world, corpus, skip={gap_key})
    ingest_all(world, corpus.up.pack_keys)
    crossing = {
        e.execution_id
        for e in corpus.truth.executions
        if e.data_first_seq is not None and e.data_first_seq <= gap_seq <= e.data_last_seq  # type: ignore[operator]
    }
    assert crossing
    results = [world.acts.project_meta_object(c.ProjectMetaInput(k, 1)) for k in corpus.up.meta_keys]
    by_root = {o.root_id: o.outcome for r in results for o in r.outcomes}
    assert {r for r, o in by_root.items() if o == c.INDEX_CORRUPT} == crossing
    assert {o for r, o in by_root.items() if r not in crossing} == {c.PROJECTED}


def test_key_outside_the_deployment_scope_is_quarantined(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = Scope("other-tenant", world.scope.project_id, world.scope.environment_id)
    corpus = make_corpus(tmp_path, other, executions=3)
    put_all(world, corpus)
    for key in (corpus.up.meta_keys[0], corpus.up.pack_keys[0]):
        call = world.acts.project_meta_object if "/meta/" in key else world.acts.ingest_pack
        arg = c.ProjectMetaInput(key, 1) if "/meta/" in key else c.IngestPackInput(key)
        with pytest.raises(ApplicationError) as info:
            call(arg)  # type: ignore[operator]
        assert info.value.type == c.ERR_QUARANTINED and info.value.details[0] == "out_of_scope"
    with pytest.raises(ApplicationError) as info:
        world.acts.project_meta_object(c.ProjectMetaInput("evidence/v1/../../etc", 1))
    assert info.value.details[0] == "invalid_key"


def test_stale_generation_is_refused(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=2)
    put_all(world, corpus)
    with pytest.raises(ApplicationError) as info:
        world.acts.project_meta_object(c.ProjectMetaInput(corpus.up.meta_keys[0], 0))
    assert info.value.type == c.ERR_STALE_GENERATION


def test_concurrent_lance_writers_retry_and_keep_one_row_per_key(world) -> None:  # type: ignore[no-untyped-def]
    def rows(lo: int, hi: int) -> pa.Table:
        return pa.table(
            {
                "cid": [f"{i:064x}" for i in range(lo, hi)],
                "root_id": ["r"] * (hi - lo),
                "process_euid": ["e"] * (hi - lo),
            }
        )

    world.lance.merge(world.scope, "cid_refs_v1", rows(0, 1))  # create first: the race is on commits
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            world.lance.merge(world.scope, "cid_refs_v1", rows(i * 10, i * 10 + 30))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    table = world.lance.read(world.scope, "cid_refs_v1")
    assert table.num_rows == len(set(table["cid"].to_pylist())) == 80
    versions = world.lance.open(world.scope, "cid_refs_v1").versions()  # type: ignore[union-attr]
    assert len(versions) >= 7


def test_meta_segment_records_are_what_the_corpus_wrote(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Guards the upload helper itself: every RootEnded in the bucket is an ended execution of the truth.
    corpus = make_corpus(tmp_path, world.scope, executions=5)
    ended = set()
    for key in corpus.up.meta_keys:
        seg = ms.decode_meta_segment(decompress_object(corpus.up.bodies[key]))
        ended |= {r.root.execution_id for r in seg.records if isinstance(r, ms.RootEnded)}
    assert ended == corpus.ended_ids


def test_walk_back_reads_each_earlier_meta_object_once(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Many small meta objects in one stream: every execution's walk goes back to its engine's start.
    corpus = make_corpus(tmp_path, world.scope, executions=60, processes=1, rate_per_second=20)
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    metas = sorted(corpus.up.meta_keys)
    assert len(metas) >= 6
    gets: Counter[str] = Counter()
    real = world.acts.s3

    class Counting:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def get_object(self, **kwargs):  # type: ignore[no-untyped-def]
            gets[kwargs["Key"]] += 1
            return real.get_object(**kwargs)

    world.acts.s3 = Counting()
    try:
        outcomes = project_all(world, metas)
    finally:
        world.acts.s3 = real
    assert outcomes == Counter({c.PROJECTED: len(corpus.ended_ids)})
    # Projected in order, each meta object is read once, as the notified object: the walks of later
    # ones find its index in the worker's cache, also when it ends no execution (a cycle's admitted
    # batch, read again by the next object's walk before the notified object was cached too).
    # Without the cache, walks re-read every earlier object: about n * n / 2 reads.
    meta_reads = {key: n for key, n in gets.items() if key in set(metas)}
    assert meta_reads == dict.fromkeys(metas, 1), meta_reads


def test_the_workers_memory_line_names_its_allocators_and_caches(world, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=12, processes=1, rate_per_second=20)
    put_all(world, corpus)
    ingest_all(world, corpus.up.pack_keys)
    metas = sorted(corpus.up.meta_keys)
    project_all(world, metas)

    async def a_few_lines() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_log_memory(0.05, world.acts), 0.3)

    with caplog.at_level(logging.INFO, logger="baml_studio.temporal_worker"):
        asyncio.run(a_few_lines())
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("memory: ")]
    assert lines, caplog.text
    # Each projected meta object's index is held once; the session holds the datasets' metadata.
    assert f"meta-segment indexes {len(metas)} of 50000" in lines[-1]
    assert re.search(r"RSS \d+ MiB \(anonymous \d+\), glibc in use \d+ / free \d+, Arrow pool \d+", lines[-1])
    assert re.search(r"Lance session \d+\.\d MiB", lines[-1])
