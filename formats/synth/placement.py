"""Where the write cycle put each execution's records: what a reader of the stream will meet.

The cycle fills one :class:`Placement` per execution as it writes; the truth is judged from
it (:mod:`formats.synth.reading`), after damage when a damage mode ran. :class:`MetaEntry`
remembers what each meta object holds, so the damage modes can pick their targets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from formats.ids import ThreadRef
from formats.synth.plan import ExecutionPlan


@dataclass
class Placement:
    plan: ExecutionPlan
    root: ThreadRef
    cutoff_ns: int | None = None  # the stream stopped here (no RootEnded); None: the execution finished
    started_seq: int | None = None  # meta sequence holding its RootStarted; None: that batch was Lost
    started_high_water: int = 0  # data_high_water of that meta object (the reader's lower bound)
    ended_seq: int | None = None  # meta sequence holding its RootEnded
    root_started_lost: bool = False  # RootEnded flag bit 0
    first: int = 0  # RootEnded data_first_seq / data_last_seq / data_segment_count
    last: int = 0
    count: int = 0
    # publish interval -> the data sequence holding this execution's group of that interval
    # (one group per execution per cycle, so a fact's interval names its segment).
    segments: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MetaEntry:
    """What one written meta object holds (by root ThreadRef bytes)."""

    seq: int
    data_high_water: int
    headers: bool  # holds a StreamStarted or an EngineStarted
    started: tuple[bytes, ...]
    ended: tuple[bytes, ...]
