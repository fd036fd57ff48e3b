"""Batch identities, digests and Lance rows are byte-identical whatever path builds them.

Rebuilds and redelivery depend on a batch's ``batch_id`` and ``content_digest`` being
deterministic: a meta object projected again, by a newer worker, must send the same batches.
The digests below were computed by the per-execution path (one ``build_batches`` per execution,
``private_tables`` per execution concatenated) before the per-meta-object path existed; both
paths must still give them. A change to the synthetic profiler or the catalog changes them
legitimately: recompute them then, with the reason in the commit message, never to make a
projection change pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from projection_corpus import CasLookup, Corpus

from activities.projection.assemble import abandoned_execution, assemble_execution
from activities.projection.batches import (
    build_batch_set,
    build_batches,
    ipc_stream_bytes,
    private_tables_of,
)
from activities.projection.model import ExecutionProjection, ProjectionBatch
from formats.object_keys import Scope

SCOPE = Scope("tenant-a", "project-b", "env-c")

# sha256 over every meta object's batch set (headers then IPC bytes) and Lance tables, in order.
PINNED_PUBLIC = "a2fa8d788bd21fde757988ac85da419ee4dea5af006ab12723fc1126ec3f9526"
PINNED_PRIVATE = "b30dc764aec7daec2fce44647414de17eb9c85356c6218aa651e67826a796d5c"
PINNED_SWEEP = "8c0602910ce8aec99069472192049d4c195b2ffc504fda2dedc8c8f64e10613c"


def _meta_objects(corpus: Corpus) -> Iterator[list[ExecutionProjection]]:
    """The corpus's finished executions grouped as the worker groups them: per meta object."""
    lookup = CasLookup(corpus.root)
    for stream in corpus.streams:
        by_meta: dict[int | None, list[ExecutionProjection]] = {}
        for inp in stream.ended_inputs():
            p = assemble_execution(inp, lookup)
            if isinstance(p, ExecutionProjection):
                by_meta.setdefault(inp.root_ended_seq, []).append(p)
        yield from by_meta.values()


def _per_execution(projections: list[ExecutionProjection], generation: int) -> list[ProjectionBatch]:
    """The reference: each execution's batches, one program's shared batch sent once."""
    out: dict[tuple[str, str], ProjectionBatch] = {}
    for p in projections:
        for b in build_batches(p, SCOPE, generation):
            out.setdefault((b.header.batch_id, b.header.content_digest), b)
    return list(out.values())


def _hash_batches(h: hashlib._Hash, batches: list[ProjectionBatch]) -> None:
    for b in batches:
        h.update(repr(b.header).encode())
        h.update(b.ipc)


def _hash_tables(h: hashlib._Hash, projections: list[ExecutionProjection]) -> None:
    for name, table in private_tables_of(projections).items():
        h.update(name.encode())
        h.update(ipc_stream_bytes(table))


@pytest.fixture(scope="module")
def meta_objects(corpus: Corpus) -> list[list[ExecutionProjection]]:
    groups = list(_meta_objects(corpus))
    assert sum(map(len, groups)) > 100 and max(map(len, groups)) > 1
    return groups


def test_per_execution_batches_and_tables_keep_their_pinned_digests(
    meta_objects: list[list[ExecutionProjection]],
) -> None:
    public, private = hashlib.sha256(), hashlib.sha256()
    for group in meta_objects:
        _hash_batches(public, _per_execution(group, 3))
        _hash_tables(private, group)
    assert public.hexdigest() == PINNED_PUBLIC
    assert private.hexdigest() == PINNED_PRIVATE


def test_meta_object_batch_set_equals_the_per_execution_batches(
    meta_objects: list[list[ExecutionProjection]],
) -> None:
    public = hashlib.sha256()
    for group in meta_objects:
        got = build_batch_set(group, SCOPE, 3)
        want = _per_execution(group, 3)
        assert [b.header for b in got] == [b.header for b in want]
        assert [b.ipc for b in got] == [b.ipc for b in want]
        _hash_batches(public, got)
    assert public.hexdigest() == PINNED_PUBLIC


def test_batch_set_partitions_like_the_per_execution_path(
    meta_objects: list[list[ExecutionProjection]],
) -> None:
    group = max(meta_objects, key=len)
    for max_rows in (1, 3, 7):
        got = build_batch_set(group, SCOPE, 2, max_rows=max_rows)
        want: dict[tuple[str, str], ProjectionBatch] = {}
        for p in group:
            for b in build_batches(p, SCOPE, 2, max_rows=max_rows):
                want.setdefault((b.header.batch_id, b.header.content_digest), b)
        assert got == list(want.values())
        assert max(b.header.partition for b in got) > 0


def test_sweep_batches_keep_their_pinned_digests(corpus: Corpus) -> None:
    lookup = CasLookup(corpus.root)
    swept = [abandoned_execution(i, lookup) for s in corpus.streams for i in s.abandoned_inputs()]
    assert swept and all(p.swept for p in swept)
    got = build_batch_set(swept, SCOPE, 1)
    assert got == _per_execution(swept, 1)
    h = hashlib.sha256()
    _hash_batches(h, got)
    _hash_tables(h, swept)
    assert h.hexdigest() == PINNED_SWEEP
