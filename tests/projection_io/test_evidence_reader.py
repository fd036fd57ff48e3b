"""EvidenceReader against moto: the process-wide function-table cache is scoped, and the
concurrent data prefetch gives the same segments as reading one by one."""

from __future__ import annotations

from pathlib import Path

from corpus import make_corpus, put_all

from activities.evidence_reader import EvidenceReader
from formats import object_keys
from formats.data_segment import DataSegment
from formats.object_keys import Scope


def test_function_table_cache_never_answers_another_scope(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=2)
    put_all(world, corpus)
    key = corpus.up.table_keys[0]
    cid = bytes.fromhex(key.rsplit("/", 1)[-1].split(".", 1)[0])
    first = EvidenceReader(world.s3, world.bucket).function_table(world.scope, cid)
    assert first is not None
    # Cached now; another reader of the same scope gets it even with the object gone...
    world.s3.delete_object(Bucket=world.bucket, Key=key)
    assert EvidenceReader(world.s3, world.bucket).function_table(world.scope, cid) == first
    # ...but a scope that does not hold the object does not see the cached table.
    other = Scope(world.scope.tenant_id, world.scope.project_id, "env_" + "0" * 26)
    assert EvidenceReader(world.s3, world.bucket).function_table(other, cid) is None


def test_prefetch_gives_the_same_segments_and_problems(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=12)
    put_all(world, corpus)
    euid = corpus.euids[0]
    seqs = sorted(object_keys.parse_evidence_key(k).sequence or 0 for k in corpus.up.data_keys if euid in k)
    wanted = [*seqs, max(seqs) + 5]  # one that does not exist
    direct = EvidenceReader(world.s3, world.bucket)
    expected = [direct.data(world.scope, euid, s) for s in wanted]
    fetched = EvidenceReader(world.s3, world.bucket)
    fetched.prefetch_data(world.scope, euid, wanted, world.acts._pool)
    got = [fetched.data(world.scope, euid, s) for s in wanted]
    assert got == expected and got[-1] == "missing"
    assert all(isinstance(g, DataSegment) for g in got[:-1])
    seg = got[0]
    assert isinstance(seg, DataSegment)
    for group in seg.groups:
        assert fetched.group(world.scope, euid, seqs[0], group.root.to_bytes()) is group
    assert fetched.group(world.scope, euid, seqs[0], b"\0" * 32) is None
