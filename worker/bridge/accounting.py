"""Pure accounting behind ``baml-studio status``: every execution of an environment in one state.

Inputs are what the bucket and Lance hold: per meta object its stream, sequence, age and the
roots it starts and ends (and which RootEnded carry flag bit 0), which meta objects carry a
quarantine marker or failed to decode, and the generation's ledger rows (root id -> status,
index_state). Each execution named by a readable meta object or a ledger row lands in exactly one
of :data:`STATES`:

* a ledger row wins (it is written last, after the facts are visible): ``abandoned`` (closed by
  the sweep), ``index_corrupt`` (projected with that index_state) or ``projected``;
* else ``quarantined`` when a meta object naming it is quarantined;
* else with a RootEnded: ``index_corrupt`` when the reader rules (:mod:`formats.reader_rules`,
  over the stream's index gaps in the bucket) say so, otherwise ``pending`` (waiting for the
  bridge or for its values);
* else (RootStarted only): ``running`` while its stream is alive, ``abandoned`` once silent.

A stream is alive while its newest meta object is younger than the sweep's silence limit
(``ProjectionSettings.silence_limit_s``): the bucket has no ``stream.lock``, and that is the
rule the sweep uses to abandon open executions.

Every execution also has one ``index_state`` (``by_index_state``): the ledger's when projected,
else the reader rules' over the meta plane (data segments are not read here, so an unprojected
RootEnded whose data is damaged still shows ``complete`` until projection says otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from formats import reader_rules

STATES = ("projected", "pending", "running", "abandoned", "index_corrupt", "quarantined")


@dataclass
class MetaSummary:
    key: str
    last_modified: float  # unix seconds
    started: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    quarantined: bool = False
    readable: bool = True
    stream: str | None = None  # euid hex from the key; None: the key does not parse
    sequence: int | None = None
    started_lost: set[str] = field(default_factory=set)  # roots whose RootEnded has flag bit 0


@dataclass(frozen=True)
class LedgerRow:
    status: str
    index_state: str


@dataclass
class Accounting:
    executions: dict[str, int]
    by_execution: dict[str, str]
    index_states: dict[str, int]
    by_index_state: dict[str, str]
    waiting_objects: int
    oldest_waiting: float | None  # unix seconds of the oldest meta object with an unprojected RootEnded
    unreadable_objects: int
    quarantined_objects: int
    index_gaps: dict[str, list[int]]  # stream -> missing or unreadable interior meta sequences
    alive_streams: int
    silent_streams: int


def ledger_state(row: LedgerRow) -> str:
    if row.status == "abandoned":
        return "abandoned"
    if row.index_state == "index_corrupt":
        return "index_corrupt"
    return "projected"


@dataclass
class _Stream:
    present: set[int] = field(default_factory=set)
    decoded: set[int] = field(default_factory=set)
    newest: float = 0.0

    def alive(self, now: float, silence_limit_s: float) -> bool:
        return now - self.newest < silence_limit_s


@dataclass
class _Root:
    stream: str | None = None
    started_seq: int | None = None
    ended_seq: int | None = None
    root_started_lost: bool = False


def _streams(metas: list[MetaSummary]) -> dict[str | None, _Stream]:
    out: dict[str | None, _Stream] = {}
    for m in metas:
        s = out.setdefault(m.stream, _Stream())
        s.newest = max(s.newest, m.last_modified)
        if m.sequence is not None:
            s.present.add(m.sequence)
            if m.readable:
                s.decoded.add(m.sequence)
    return out


def _roots(metas: list[MetaSummary]) -> dict[str, _Root]:
    out: dict[str, _Root] = {}
    for m in metas:
        if not m.readable:
            continue
        # A key without a sequence (unparseable) sorts first: it can shadow no gap.
        seq = m.sequence if m.sequence is not None else 0
        for root in m.started:
            entry = out.setdefault(root, _Root(stream=m.stream))
            entry.started_seq = seq
        for root in m.ended:
            entry = out.setdefault(root, _Root(stream=m.stream))
            entry.ended_seq = seq
            entry.root_started_lost = root in m.started_lost
    return out


def account(
    metas: Iterable[MetaSummary],
    ledger: Mapping[str, LedgerRow],
    *,
    now: float,
    silence_limit_s: float,
) -> Accounting:
    metas = list(metas)
    streams = _streams(metas)
    gaps: dict[str | None, list[int]] = {}
    alive: dict[str | None, bool] = {}
    for name, s in streams.items():
        alive[name] = s.alive(now, silence_limit_s)
        meta_max = max(s.present, default=0)
        gaps[name] = reader_rules.index_gaps(meta_max, s.decoded, s.present, alive=alive[name])
    roots = _roots(metas)
    quarantined_roots: set[str] = set()
    for m in metas:
        if m.quarantined:
            quarantined_roots |= m.started | m.ended

    by_execution: dict[str, str] = {}
    by_index_state: dict[str, str] = {}
    for root in sorted(set(roots) | set(ledger)):
        row = ledger.get(root)
        if row is not None:
            by_execution[root] = ledger_state(row)
            by_index_state[root] = row.index_state
            continue
        entry = roots[root]
        index_state = reader_rules.index_state(
            started_seq=entry.started_seq,
            ended_seq=entry.ended_seq,
            root_started_lost=entry.root_started_lost,
            gaps=gaps[entry.stream] if entry.stream is not None else [],
        )
        by_index_state[root] = index_state
        if root in quarantined_roots:
            by_execution[root] = "quarantined"
        elif entry.ended_seq is not None:
            by_execution[root] = "index_corrupt" if index_state == reader_rules.INDEX_CORRUPT else "pending"
        else:
            by_execution[root] = reader_rules.open_status(alive[entry.stream])

    counts = dict.fromkeys(STATES, 0)
    for state in by_execution.values():
        counts[state] += 1
    index_counts = dict.fromkeys(reader_rules.INDEX_STATES, 0)
    for index_state in by_index_state.values():
        index_counts[index_state] = index_counts.get(index_state, 0) + 1
    waiting = [m for m in metas if not m.quarantined and any(r not in ledger for r in m.ended)]
    named = [name for name in streams if name is not None]
    return Accounting(
        executions=counts,
        by_execution=by_execution,
        index_states=index_counts,
        by_index_state=by_index_state,
        waiting_objects=len(waiting),
        oldest_waiting=min((m.last_modified for m in waiting), default=None),
        unreadable_objects=sum(1 for m in metas if not m.readable),
        quarantined_objects=sum(1 for m in metas if m.quarantined),
        index_gaps={name: gaps[name] for name in sorted(named) if gaps[name]},
        alive_streams=sum(1 for name in named if alive[name]),
        silent_streams=sum(1 for name in named if not alive[name]),
    )
