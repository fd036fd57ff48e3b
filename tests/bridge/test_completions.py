"""The bookkeeping of the results the bridge finds by a visibility query (worker/bridge/completions.py)."""

from __future__ import annotations

import pytest

from worker.bridge.completions import ClosedWatch, closed_query


def test_packs_are_asked_first_and_meta_objects_round_robin() -> None:
    watch = ClosedWatch()
    for i in range(5):
        watch.watch(f"project/1/m{i}", pack=False)
    watch.watch("pack/p0", pack=True)
    assert watch.next_batch(3) == ["pack/p0", "project/1/m0", "project/1/m1"]
    # The ones asked went to the back of their line: every waiter is asked in turn.
    assert watch.next_batch(3) == ["pack/p0", "project/1/m2", "project/1/m3"]
    assert watch.next_batch(3) == ["pack/p0", "project/1/m4", "project/1/m0"]


def test_a_run_found_closed_wakes_its_waiters_and_is_not_asked_again() -> None:
    watch = ClosedWatch()
    first = watch.watch("project/1/a", pack=False)
    again = watch.watch("project/1/a", pack=False)  # a duplicate delivery waits on the same run
    watch.watch("project/1/b", pack=False)
    assert first is again
    assert watch.found_closed(["project/1/a", "project/1/unknown"]) == 1
    assert first.is_set()
    assert watch.next_batch(10) == ["project/1/b"]
    watch.release("project/1/a")
    assert len(watch) == 2  # the second message still waits on it
    watch.release("project/1/a")
    assert len(watch) == 1


def test_the_query_names_each_id_and_leaves_out_running_and_continued_runs() -> None:
    q = closed_query(["project/1/evidence/v1/t/p/e/streams/s/meta/1.bamlmeta.zst", "pack/k"])
    assert q == (
        "WorkflowId IN ('project/1/evidence/v1/t/p/e/streams/s/meta/1.bamlmeta.zst', 'pack/k')"
        " AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew'"
    )
    with pytest.raises(ValueError, match="quote"):
        closed_query(["x' OR '1'='1"])
