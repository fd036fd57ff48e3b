"""Two fact stores with no shared process state (each its own chdb handle, no common lock) on one
ClickHouse: a batch sent to both at once is visible once, a digest conflict is answered on either,
the same way whatever the order; concurrent callers of one store share inserts."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import clickhouse_connect
import pyarrow as pa
import pytest
from facts_fixtures import batch_id_for, execution_facts, make_batch

from api.boundary.facts import ddl
from api.boundary.facts import store as store_module
from api.boundary.facts.batch_check import BatchRejected, BatchScope
from api.boundary.facts.batch_registry import BatchMarks, decide
from api.boundary.facts.store import FLUSH_LINE, BatchIdentity, BatchState, FactStore, FlushTally
from formats import catalog

Item = tuple[BatchIdentity, BatchScope, pa.Table]


@pytest.fixture(scope="module")
def stores(chdb_path: Path, chdb_database: str) -> list[FactStore]:
    out = []
    for _ in range(2):
        client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path.resolve()))
        out.append(FactStore(client, database=chdb_database))
    for s in out:
        s.ensure_schema()
    assert out[0].client is not out[1].client and out[0]._lock is not out[1]._lock
    return out


def _item(tenant: str, idx: int, *, rows: int = 3) -> Item:
    facts = execution_facts(tenant, "p", "e", 1, idx)["calls_v1"][:rows]
    root = facts[0]["execution_id"]
    body, hdr = make_batch("calls_v1", facts, "e", 1, root)
    table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    bid = batch_id_for("calls_v1", root)
    return BatchIdentity(bid, "calls_v1", 1, root, hdr.content_digest), BatchScope(tenant, "p", "e", 1), table


def _both_at_once(stores: list[FactStore], items: list[Item]) -> list[BatchState | BatchRejected]:
    """items[k] goes to stores[k], released together."""
    out: list[Any] = [None] * len(items)
    gate = threading.Barrier(len(items))

    def go(k: int) -> None:
        gate.wait()
        out[k] = stores[k].ingest_many([items[k]])[0]

    ts = [threading.Thread(target=go, args=(k,)) for k in range(len(items))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def _final_rows(store: FactStore, tenant: str, root: str) -> int:
    return int(
        store.client.query(
            f"SELECT count() FROM {store.database}.calls_v1 FINAL"
            " WHERE tenant_id = {t:String} AND execution_id = {r:String}",
            parameters={"t": tenant, "r": root},
        ).result_rows[0][0]
    )


def test_the_same_batch_sent_to_both_replicas_at_once_is_visible_once(stores: list[FactStore]) -> None:
    for idx in range(15):
        item = _item("rsame", idx)
        got = _both_at_once(stores, [item, item])
        assert all(isinstance(g, BatchState) for g in got), got
        assert {(g.content_digest, g.rows) for g in got if isinstance(g, BatchState)} == {
            (item[0].content_digest, 3)
        }
        assert _final_rows(stores[0], "rsame", item[0].root_id) == 3
        # Both replicas answer the replay from the registry alone.
        for s in stores:
            again = s.ingest_many([item])[0]
            assert isinstance(again, BatchState) and again.replayed and again.rows == 3
            assert s.registered_batch(item[1], item[0].root_id, item[0].batch_id) == again


def test_another_digest_under_one_batch_id_is_a_conflict_on_either_replica(stores: list[FactStore]) -> None:
    for idx in range(15):
        a = _item("rconf", idx, rows=3)
        b_ident, scope, b_table = _item("rconf", idx, rows=2)
        b = (b_ident, scope, b_table)
        assert a[0].batch_id == b_ident.batch_id and a[0].content_digest != b_ident.content_digest
        got = _both_at_once(stores, [a, b] if idx % 2 else [b, a])
        visible = [g for g in got if isinstance(g, BatchState)]
        assert len(visible) <= 1, got
        assert all(isinstance(g, BatchState) or g.code == "batch_digest_conflict" for g in got)
        # Whatever the race decided, every later answer on either replica agrees with it.
        for s in stores:
            for cand in (a, b):
                again = s.ingest_many([cand])[0]
                if visible and cand[0].content_digest == visible[0].content_digest:
                    assert isinstance(again, BatchState) and again.replayed
                else:
                    assert isinstance(again, BatchRejected) and again.code == "batch_digest_conflict"
        want = visible[0].rows if visible else 0
        assert _final_rows(stores[1], "rconf", a[0].root_id) == want
        # A race that each side saw (both claims read back by both) has no winner: both answer
        # conflict and no rows are written, so nothing disagrees later.


def test_the_first_digest_wins_whatever_the_replica_order(stores: list[FactStore]) -> None:
    for idx, order in enumerate(((0, 1), (1, 0))):
        first, second = _item("rorder", idx, rows=3), _item("rorder", idx, rows=1)
        ok = stores[order[0]].ingest_many([first])[0]
        assert isinstance(ok, BatchState) and not ok.replayed
        lost = stores[order[1]].ingest_many([second])[0]
        assert isinstance(lost, BatchRejected) and lost.code == "batch_digest_conflict"
        assert _final_rows(stores[0], "rorder", first[0].root_id) == 3


def test_a_roots_batches_are_decided_each_by_its_own_claims(stores: list[FactStore]) -> None:
    """The registry is read by root (every batch of a flush's roots comes back): a batch is
    decided by its own batch id's claims and marks, never by another batch of its root."""
    store = stores[0]
    whole = _item("rroot", 0, rows=3)
    ident, scope, table = whole
    # A second batch of the same root (partition 1), with rows of its own.
    second_id = catalog.deterministic_row_id("projection_batch", ident.root_id, "calls_v1", 1)
    assert second_id != ident.batch_id
    second = (BatchIdentity(second_id, "calls_v1", 1, ident.root_id, "sha256:" + "1" * 64), scope, table[:1])
    first = store.ingest_many([whole])[0]
    assert isinstance(first, BatchState) and not first.replayed
    # Read with the first batch's visible mark, the second is new: inserted, not a replay.
    got = store.ingest_many([second])[0]
    assert isinstance(got, BatchState) and not got.replayed and got.rows == 1
    # Another digest under the first batch id is still a conflict; the second replays beside it.
    other = (BatchIdentity(ident.batch_id, "calls_v1", 1, ident.root_id, "sha256:" + "2" * 64), scope, table)
    conflict, replay = store.ingest_many([other, second])
    assert isinstance(conflict, BatchRejected) and conflict.code == "batch_digest_conflict"
    assert isinstance(replay, BatchState) and replay.replayed and replay.rows == 1
    assert store.registered_batch(scope, ident.root_id, second_id) == replay


def _inserts(store: FactStore, table: str) -> int:
    # Every insert takes the next block number, whatever merges did to the parts since.
    return int(
        store.client.query(
            "SELECT max(max_block_number) FROM system.parts"
            " WHERE database = {d:String} AND table = {t:String}",
            parameters={"d": store.database, "t": table},
        ).result_rows[0][0]
        or 0
    )


def test_concurrent_callers_of_one_store_share_inserts(stores: list[FactStore]) -> None:
    store, n = stores[0], 48
    before = {t: _inserts(store, t) for t in ("calls_v1", ddl.REGISTRY_TABLE)}
    items = [_item("rgroup", idx) for idx in range(n)]
    out: list[Any] = [None] * n

    def go(k: int) -> None:
        for i in range(k, n, 8):
            out[i] = store.ingest_many([items[i]])[0]

    ts = [threading.Thread(target=go, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(isinstance(o, BatchState) and not o.replayed for o in out)
    fact_inserts = _inserts(store, "calls_v1") - before["calls_v1"]
    assert fact_inserts < n / 2, fact_inserts
    # A claim and a mark insert per flush, so as many flushes as fact inserts.
    assert _inserts(store, ddl.REGISTRY_TABLE) - before[ddl.REGISTRY_TABLE] == 2 * fact_inserts
    assert all(_final_rows(store, "rgroup", it[0].root_id) == 3 for it in items)


def _cadenced(store: FactStore, interval_s: float, flush_rows: int = 1_000) -> FactStore:
    """Another store on the same ClickHouse handle, flushing at most once per ``interval_s``."""
    return FactStore(
        store.client, database=store.database, flush_interval_s=interval_s, flush_rows=flush_rows
    )


def test_callers_within_the_flush_interval_share_one_insert(stores: list[FactStore]) -> None:
    """Two workers' sets a fraction of a second apart, after a flush: one insert, not two (each
    worker sends about once a second, so without the interval every worker is a flush)."""
    store = _cadenced(stores[0], interval_s=3.0)
    first, later = _item("rcadence", 0), [_item("rcadence", 1), _item("rcadence", 2)]
    assert isinstance(store.ingest_many([first])[0], BatchState)
    before = _inserts(store, "calls_v1")
    out: list[Any] = [None, None]

    def go(k: int) -> None:
        out[k] = store.ingest_many([later[k]])[0]

    ts = [threading.Thread(target=go, args=(k,)) for k in range(2)]
    ts[0].start()
    time.sleep(0.5)  # well inside the interval, well after the first caller queued
    ts[1].start()
    for t in ts:
        t.join()
    assert all(isinstance(o, BatchState) and not o.replayed for o in out)
    assert _inserts(store, "calls_v1") - before == 1
    assert store.tally.flushes == 2
    assert all(_final_rows(store, "rcadence", it[0].root_id) == 3 for it in later)


def test_a_caller_after_a_quiet_interval_or_with_enough_rows_does_not_wait(stores: list[FactStore]) -> None:
    """The interval holds back only callers that come sooner than it after a flush, and only
    while fewer than flush_rows rows wait."""
    quiet = _cadenced(stores[0], interval_s=60.0)
    started = time.monotonic()
    assert isinstance(quiet.ingest_many([_item("rquiet", 0)])[0], BatchState)  # the first flush
    assert time.monotonic() - started < 30.0
    enough = _cadenced(stores[0], interval_s=60.0, flush_rows=3)
    enough.ingest_many([_item("rquiet", 1)])
    started = time.monotonic()
    assert isinstance(enough.ingest_many([_item("rquiet", 2)])[0], BatchState)  # 3 rows: at once
    assert time.monotonic() - started < 30.0
    assert enough.tally.flushes == 2


def test_a_store_logs_its_flush_rate_and_rows_per_insert(
    stores: list[FactStore], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the cadence gives ClickHouse is visible to an operator (and to bench/soak.py)."""
    store = _cadenced(stores[0], interval_s=0.0)
    monkeypatch.setattr(store_module, "FLUSH_REPORT_S", 0.0)
    with caplog.at_level(logging.INFO, logger=store_module.__name__):
        store.ingest_many([_item("rtally", 0), _item("rtally", 1)])
    lines = [r.getMessage() for r in caplog.records if r.name == store_module.__name__]
    assert len(lines) == 1 and lines[0].startswith("fact flushes: 1 in "), lines
    assert "for 1 requests; 1 fact-table inserts of 6 rows on average" in lines[0]


def test_the_flush_tally_line() -> None:
    tally = FlushTally(since=100.0, flushes=30, requests=75, inserts=120, rows=60_000)
    assert tally.line(160.0) == (
        "fact flushes: 30 in 60 s (0.50/s) for 75 requests; 120 fact-table inserts of 500 rows on average"
    )
    # bench/soak.py reads the line back with the pattern beside it
    found = FLUSH_LINE.search("2026-12-06 INFO api.boundary.facts.store " + tally.line(160.0))
    assert found is not None and found.groups() == ("30", "60", "75", "120", "500")


def test_decide_from_registry_rows() -> None:
    mine, other = ("calls_v1", "sha256:a"), ("calls_v1", "sha256:b")
    assert decide(BatchMarks(claims={mine}), mine) == -1
    assert decide(BatchMarks(claims={mine, other}), mine) is None
    assert decide(BatchMarks(claims={mine, other}, visible={mine: 3}), mine) == 3
    assert decide(BatchMarks(claims={mine}, visible={other: 3}), mine) is None
    assert decide(BatchMarks(claims={mine}), ("threads_v1", "sha256:a")) is None
    assert catalog.PUBLIC_RELATIONS  # the relation names above are real ones
    assert "calls_v1" in catalog.PUBLIC_RELATIONS
