"""``baml-studio status`` accounting (worker/bridge/accounting.py) over constructed meta summaries."""

from __future__ import annotations

from collections.abc import Iterable

from worker.bridge.accounting import STATES, Accounting, LedgerRow, MetaSummary, account

NOW = 1_000_000.0
LIMIT = 900.0


def meta(
    stream: str,
    seq: int,
    *,
    age: float = 10.0,
    started: Iterable[str] = (),
    ended: Iterable[str] = (),
    lost: Iterable[str] = (),
    readable: bool = True,
    quarantined: bool = False,
) -> MetaSummary:
    return MetaSummary(
        key=f"evidence/v1/t/p/e/streams/{stream}/meta/{seq:020d}.bamlmeta.zst",
        last_modified=NOW - age,
        started=set(started),
        ended=set(ended) | set(lost),
        quarantined=quarantined,
        readable=readable,
        stream=stream,
        sequence=seq,
        started_lost=set(lost),
    )


def run(metas: list[MetaSummary], ledger: dict[str, LedgerRow] | None = None) -> Accounting:
    acc = account(metas, ledger or {}, now=NOW, silence_limit_s=LIMIT)
    # Every execution named by a readable meta object (or the ledger) is counted exactly once.
    named = {r for m in metas if m.readable for r in m.started | m.ended} | set(ledger or {})
    assert set(acc.by_execution) == named == set(acc.by_index_state)
    assert sum(acc.executions.values()) == len(named) == sum(acc.index_states.values())
    assert set(acc.executions) == set(STATES)
    return acc


def test_ledger_wins_and_decides_projected_abandoned_index_corrupt() -> None:
    metas = [meta("s", 1, started={"a", "b", "c"}), meta("s", 2, ended={"a", "b"})]
    ledger = {
        "a": LedgerRow("succeeded", "complete"),
        "b": LedgerRow("failed", "index_corrupt"),
        "c": LedgerRow("abandoned", "no_root_ended"),
        "d": LedgerRow("succeeded", "root_started_lost"),  # its meta objects are no longer listed
    }
    acc = run(metas, ledger)
    assert acc.by_execution == {"a": "projected", "b": "index_corrupt", "c": "abandoned", "d": "projected"}
    assert acc.by_index_state == {
        "a": "complete",
        "b": "index_corrupt",
        "c": "no_root_ended",
        "d": "root_started_lost",
    }
    assert acc.waiting_objects == 0 and acc.oldest_waiting is None


def test_unprojected_execution_straddling_a_missing_meta_object_is_index_corrupt() -> None:
    metas = [
        meta("s", 1, started={"straddle", "before"}, age=30),
        meta("s", 2, ended={"before"}, age=20),
        # 3 is missing from the bucket
        meta("s", 4, started={"after"}, ended={"straddle"}, age=10),
        meta("s", 5, ended={"after"}, age=5),
    ]
    acc = run(metas)
    assert acc.index_gaps == {"s": [3]}
    assert acc.by_execution == {"straddle": "index_corrupt", "before": "pending", "after": "pending"}
    assert acc.by_index_state == {"straddle": "index_corrupt", "before": "complete", "after": "complete"}
    assert acc.waiting_objects == 3 and acc.oldest_waiting == NOW - 20


def test_unreadable_interior_meta_object_is_a_gap_and_counted() -> None:
    metas = [
        meta("s", 1, started={"x"}),
        meta("s", 2, readable=False),
        meta("s", 3, ended={"x"}),
    ]
    acc = run(metas)
    assert acc.index_gaps == {"s": [2]} and acc.unreadable_objects == 1
    assert acc.by_execution == {"x": "index_corrupt"}


def test_root_started_in_a_lost_meta_object() -> None:
    # RootStarted of both was in meta 1, which is gone; only flag bit 0 says it is not needed.
    metas = [meta("s", 2, ended={"clear"}, lost={"flagged"})]
    acc = run(metas)
    assert acc.index_gaps == {"s": [1]}
    assert acc.by_execution == {"clear": "index_corrupt", "flagged": "pending"}
    assert acc.by_index_state == {"clear": "index_corrupt", "flagged": "root_started_lost"}


def test_root_started_lost_flag_with_every_meta_object_present() -> None:
    acc = run([meta("s", 1, started={"other"}), meta("s", 2, lost={"r"}, ended={"other"})])
    assert acc.index_gaps == {}
    assert acc.by_index_state == {"r": "root_started_lost", "other": "complete"}
    assert acc.executions["pending"] == 2


def test_open_executions_run_while_the_stream_is_alive_else_abandoned() -> None:
    metas = [
        meta("live", 1, started={"l"}, age=LIMIT - 1),
        meta("quiet", 1, started={"q"}, age=LIMIT + 1),
        meta("quiet", 2, ended={"q2"}, age=LIMIT + 1),
    ]
    acc = run(metas)
    assert acc.by_execution == {"l": "running", "q": "abandoned", "q2": "index_corrupt"}
    assert acc.by_index_state["l"] == "no_root_ended" and acc.by_index_state["q"] == "no_root_ended"
    assert (acc.alive_streams, acc.silent_streams) == (1, 1)
    # q2 has no RootStarted (flag clear): index_corrupt, and the quiet stream has no gap at 1.
    assert acc.index_gaps == {}


def test_torn_newest_meta_object_of_a_live_stream_is_not_a_gap() -> None:
    def stream(age: float) -> list[MetaSummary]:
        return [
            meta("s", 1, started={"open"}, age=age),
            meta("s", 2, ended={"gone"}, started={"gone"}, age=age),
            meta("s", 3, readable=False, age=age),  # newest, undecodable
        ]

    alive = run(stream(1.0))
    assert alive.index_gaps == {}
    assert alive.by_execution == {"open": "running", "gone": "pending"}
    assert alive.by_index_state["open"] == "no_root_ended"
    silent = run(stream(LIMIT * 2))
    assert silent.index_gaps == {"s": [3]}
    assert silent.by_execution == {"open": "abandoned", "gone": "pending"}
    assert silent.by_index_state == {"open": "index_corrupt", "gone": "complete"}


def test_gap_after_an_open_execution_makes_it_index_corrupt_but_still_running() -> None:
    metas = [meta("s", 1, started={"open"}), meta("s", 3, started={"later"})]
    acc = run(metas)
    assert acc.index_gaps == {"s": [2]}
    assert acc.by_execution == {"open": "running", "later": "running"}
    assert acc.by_index_state == {"open": "index_corrupt", "later": "no_root_ended"}
    assert acc.index_states["index_corrupt"] == 1 and acc.index_states["no_root_ended"] == 1


def test_quarantined_meta_object_holds_its_unprojected_roots() -> None:
    metas = [
        meta("s", 1, started={"a", "b"}),
        meta("s", 2, ended={"a", "b"}, quarantined=True),
    ]
    acc = run(metas, {"b": LedgerRow("succeeded", "complete")})
    assert acc.by_execution == {"a": "quarantined", "b": "projected"}
    assert acc.quarantined_objects == 1 and acc.waiting_objects == 0


def test_streams_have_their_own_gaps() -> None:
    metas = [
        meta("s1", 1, started={"x"}),
        meta("s1", 3, ended={"x"}),
        meta("s2", 1, started={"y"}),
        meta("s2", 2),
        meta("s2", 3, ended={"y"}),
    ]
    acc = run(metas)
    assert acc.index_gaps == {"s1": [2]}
    assert acc.by_execution == {"x": "index_corrupt", "y": "pending"}
