"""Pure accounting behind ``baml-studio status``: every execution of an environment in one state.

Inputs are what the bucket and Lance hold: the roots each readable meta object starts and ends,
which meta objects carry a quarantine marker, and the generation's ledger rows (root id ->
status, index_state). Each execution lands in exactly one of ``projected``, ``pending``,
``abandoned``, ``index_corrupt``, ``quarantined``; the ledger wins (it is written last, after
the facts are visible). ``pending`` covers executions with RootEnded not yet projected (waiting
for the bridge or for their values) and open executions the sweep has not closed yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

STATES = ("projected", "pending", "abandoned", "index_corrupt", "quarantined")


@dataclass
class MetaSummary:
    key: str
    last_modified: float  # unix seconds
    started: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    quarantined: bool = False
    readable: bool = True


@dataclass(frozen=True)
class LedgerRow:
    status: str
    index_state: str


@dataclass
class Accounting:
    executions: dict[str, int]
    by_execution: dict[str, str]
    waiting_objects: int
    oldest_waiting: float | None  # unix seconds of the oldest meta object with an unprojected RootEnded
    unreadable_objects: int
    quarantined_objects: int


def ledger_state(row: LedgerRow) -> str:
    if row.status == "abandoned":
        return "abandoned"
    if row.index_state == "index_corrupt":
        return "index_corrupt"
    return "projected"


def account(metas: Iterable[MetaSummary], ledger: Mapping[str, LedgerRow]) -> Accounting:
    metas = list(metas)
    quarantined_roots: set[str] = set()
    known: set[str] = set(ledger)
    for m in metas:
        known |= m.started | m.ended
        if m.quarantined:
            quarantined_roots |= m.started | m.ended
    by_execution: dict[str, str] = {}
    for root in sorted(known):
        row = ledger.get(root)
        if row is not None:
            by_execution[root] = ledger_state(row)
        elif root in quarantined_roots:
            by_execution[root] = "quarantined"
        else:
            by_execution[root] = "pending"
    counts = dict.fromkeys(STATES, 0)
    for state in by_execution.values():
        counts[state] += 1
    waiting = [m for m in metas if not m.quarantined and any(r not in ledger for r in m.ended)]
    return Accounting(
        executions=counts,
        by_execution=by_execution,
        waiting_objects=len(waiting),
        oldest_waiting=min((m.last_modified for m in waiting), default=None),
        unreadable_objects=sum(1 for m in metas if not m.readable),
        quarantined_objects=sum(1 for m in metas if m.quarantined),
    )
