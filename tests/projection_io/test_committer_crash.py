"""A crash of the committer between the datasets' commit and the ledger's is repaired by redelivery.

The activity raises (as the worker would die) after every dataset but the ledger committed; the
redelivered message runs the same activity again: the ledger row lands, and no dataset holds a row
twice (merge_insert on deterministic keys), nor does ClickHouse (the same batch ids and digests).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from corpus import root_rows_in_clickhouse
from streams import build_stream, upload

from api.dataplane.lance_store import LEDGER
from formats.contracts import projection as c


class CommitterCrash(RuntimeError):
    pass


def test_crash_between_commit_and_ledger_is_repaired_by_redelivery(world) -> None:  # type: ignore[no-untyped-def]
    s = build_stream(world.scope, [0, 0, 0])
    upload(world.s3, world.bucket, s)
    ids = {e.execution_id for e in s.executions}
    committer = world.acts.committer
    real_merge = committer.merge
    crashed: list[str] = []

    def merge(scope: Any, dataset: str, table: pa.Table) -> Any:
        if dataset == LEDGER and not crashed:
            crashed.append(dataset)
            raise CommitterCrash("worker died before the ledger commit")
        return real_merge(scope, dataset, table)

    committer.merge = merge  # type: ignore[method-assign]
    for key in s.meta_keys[:2]:  # meta 1 (header) and the first execution's meta-pre: no ledger
        world.acts.project_meta_object(c.ProjectMetaInput(key, 1))
    first_end = s.meta_keys[2]
    with pytest.raises(CommitterCrash):
        world.acts.project_meta_object(c.ProjectMetaInput(first_end, 1))
    # The datasets committed, the ledger did not: the execution is not "projected" yet.
    ledger_roots = world.lance.ledger_roots(world.scope, 1)
    calls = world.lance.count(world.scope, "calls_v1")
    assert calls > 0 and not ledger_roots & ids
    # Redelivery of the same message, then the rest of the stream.
    for key in s.meta_keys[2:]:
        world.acts.project_meta_object(c.ProjectMetaInput(key, 1))
    assert world.lance.ledger_roots(world.scope, 1) >= ids
    rows = world.lance.read(world.scope, "calls_v1", columns=["row_id", "execution_id"])
    mine = [
        r
        for r, e in zip(rows["row_id"].to_pylist(), rows["execution_id"].to_pylist(), strict=True)
        if e in ids
    ]
    assert len(mine) == len(set(mine)) == 3  # one root call each, none twice
    assert root_rows_in_clickhouse(world, s.euid_hex) == dict.fromkeys(ids, 1)
