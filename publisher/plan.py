"""Pure planning: what a flush ships, in which order, and how far each plane's cursor may move.

No I/O here, so every rule is unit-tested without servers (tests/publisher/test_plan.py). The rules
come from the publisher guide, "The flush algorithm":

- segments ship in ``(cursor, high_water]``, ascending; a plane never advances past a sequence that
  did not ship, except a bad file that stayed bad for the block window (then it is skipped);
- upload order: tables, large values, packs, data ascending, meta ascending;
- a meta segment is PUT only when the data segments it can reference (``data_high_water`` in its
  header) are shipped, so no ``RootEnded`` reaches the bucket before its data (checklist item 12).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from formats.upload_wire import PACK_MAX_ENTRIES, ObjectKind

PackPart = Literal["pack", "value", "table"]

UPLOAD_RANK: dict[ObjectKind, int] = {
    "table": 0,
    "value": 1,
    "value_pack": 2,
    "data_segment": 3,
    "meta_segment": 4,
}


class SegmentVerdict(enum.Enum):
    """What collection found for one segment sequence."""

    OK = "ok"
    MISSING = "missing"  # a hole below the high-water: dense sequences mean corruption
    BAD_CHECKSUM = "bad_checksum"
    MALFORMED = "malformed"  # wrong magic, cut header, sequence or euid not matching the path
    UNSUPPORTED_VERSION = "unsupported_version"
    OVERSIZE = "oversize"  # compressed object above max_object_bytes


# A bad file waits for the profiler (or an operator) to fix it, then is skipped after the window.
# Unsupported versions and oversize objects wait for a config change instead: never skipped.
SKIPPABLE_AFTER_WINDOW = frozenset(
    {SegmentVerdict.MISSING, SegmentVerdict.BAD_CHECKSUM, SegmentVerdict.MALFORMED}
)


def classify_cas(codec: int, size_bytes: int, large_value_threshold_bytes: int) -> PackPart:
    """Codec 2 is a function table (own object); a codec-1 value at or above the threshold is large."""
    if codec == 2:
        return "table"
    return "value" if size_bytes >= large_value_threshold_bytes else "pack"


def split_packs(
    sizes: Sequence[int], max_entry_bytes: int, max_entries: int = PACK_MAX_ENTRIES
) -> list[range]:
    """Greedy split of small values (in order) into packs of at most ``max_entry_bytes`` / ``max_entries``.

    A single entry larger than the byte cap gets a pack of its own (only possible when the gateway
    sets the cap below the large-value threshold).
    """
    if max_entry_bytes < 1 or max_entries < 1:
        raise ValueError("pack limits must be positive")
    groups: list[range] = []
    start = used = 0
    for i, size in enumerate(sizes):
        if i > start and (used + size > max_entry_bytes or i - start >= max_entries):
            groups.append(range(start, i))
            start, used = i, 0
        used += size
    if start < len(sizes):
        groups.append(range(start, len(sizes)))
    return groups


@dataclass(frozen=True)
class BlockState:
    """The first sequence of a plane that cannot ship, and since when (monotonic seconds)."""

    sequence: int
    verdict: SegmentVerdict
    since: float


@dataclass
class PlaneBlocks:
    """In-memory block timers per (euid, plane). Lost on restart: the window simply starts again."""

    window_seconds: float = 60.0
    _blocks: dict[tuple[str, str], BlockState] = field(default_factory=dict)

    def observe(self, euid: str, plane: str, sequence: int, verdict: SegmentVerdict, now: float) -> bool:
        """Record a bad sequence; True when it may now be skipped (bad for longer than the window)."""
        key = (euid, plane)
        state = self._blocks.get(key)
        if state is None or state.sequence != sequence:
            state = BlockState(sequence, verdict, now)
            self._blocks[key] = state
        return verdict in SKIPPABLE_AFTER_WINDOW and now - state.since >= self.window_seconds

    def clear(self, euid: str, plane: str, below_or_at: int | None = None) -> None:
        key = (euid, plane)
        state = self._blocks.get(key)
        if state is not None and (below_or_at is None or state.sequence <= below_or_at):
            del self._blocks[key]

    def blocked(self) -> dict[tuple[str, str], BlockState]:
        return dict(self._blocks)


@dataclass(frozen=True)
class PlaneSelection:
    """The sequences one plane ships this flush, and the sequences it skips past (reported)."""

    ship: tuple[int, ...]
    skipped: tuple[int, ...]
    blocked_at: int | None  # first sequence that blocks the plane, if any


def select_plane(
    cursor: int,
    verdicts: Sequence[tuple[int, SegmentVerdict]],
    may_skip: Iterable[int] = (),
) -> PlaneSelection:
    """Walk ``(cursor, high_water]`` ascending; stop at the first bad sequence unless it may be skipped.

    ``verdicts`` holds every sequence above the cursor up to the high-water, ascending and dense.
    """
    skippable = set(may_skip)
    ship: list[int] = []
    skipped: list[int] = []
    expected = cursor + 1
    for seq, verdict in verdicts:
        if seq != expected:
            raise ValueError(f"verdicts must be dense from {cursor + 1}: got {seq}, expected {expected}")
        expected += 1
        if verdict is SegmentVerdict.OK:
            ship.append(seq)
        elif seq in skippable:
            skipped.append(seq)
        else:
            return PlaneSelection(tuple(ship), tuple(skipped), seq)
    return PlaneSelection(tuple(ship), tuple(skipped), None)


def advance_cursor(cursor: int, candidates: Sequence[int], done: Iterable[int]) -> int:
    """The new cursor: the longest dense run above ``cursor`` of sequences in ``done``.

    ``candidates`` are the sequences this flush dealt with (shipped or skipped), ascending. A
    sequence that failed breaks the run, so the plane never advances past it.
    """
    finished = set(done)
    new = cursor
    for seq in candidates:
        if seq != new + 1 or seq not in finished:
            break
        new = seq
    return new


def split_object_budget(
    budget: int,
    pending_data: int,
    pending_meta: int,
    *,
    data_cursor: int = 0,
    meta_data_high_water: Callable[[int], int | None] | None = None,
) -> tuple[int, int]:
    """Share a flush's object budget between a stream's data and meta planes: ``(data, meta)``.

    A bounded flush of a backlog should carry metas together with the data they name, so the
    projector sees progress every flush (all data first would hold every meta back until the whole
    data backlog had shipped). With ``meta_data_high_water(k)`` (the header's ``data_high_water``
    of the k-th pending meta, None when unknown) the split is exact: the most metas m such that m
    plus the data they need fit the budget, and the rest of the budget to data. Without it (or
    when a header is unknown), in proportion to what each plane has pending.
    """
    budget = max(0, budget)
    if pending_data + pending_meta <= budget:
        return pending_data, budget - pending_data
    if meta_data_high_water is not None and pending_meta:

        def cost(m: int) -> int | None:
            if m == 0:
                return 0
            dhw = meta_data_high_water(m)
            return None if dhw is None else m + min(pending_data, max(0, dhw - data_cursor))

        lo, hi = 0, min(budget, pending_meta)  # cost(lo) <= budget; cost grows with m
        exact = True
        while lo < hi:
            mid = (lo + hi + 1) // 2
            c = cost(mid)
            if c is None:
                exact = False
                break
            lo, hi = (mid, hi) if c <= budget else (lo, mid - 1)
        if exact:
            data = min(pending_data, budget - lo)
            return data, budget - data
    data = -(-budget * pending_data // (pending_data + pending_meta)) if pending_data else 0
    if pending_meta and data >= budget and budget > 1:
        data = budget - 1
    return data, budget - data


def meta_may_ship(meta_data_high_water: int, data_cursor_after_flush: int) -> bool:
    """A meta segment may be PUT once every data segment committed before it is in the bucket."""
    return meta_data_high_water <= data_cursor_after_flush


def upload_sort_key(kind: ObjectKind, sequence: int | None, tiebreak: str = "") -> tuple[int, int, str]:
    return (UPLOAD_RANK[kind], sequence or 0, tiebreak)


def chunk(items: Sequence[int], size: int) -> list[Sequence[int]]:
    """Split indexes into authorize calls of at most ``size`` entries."""
    if size < 1:
        raise ValueError("chunk size must be positive")
    return [items[i : i + size] for i in range(0, len(items), size)]


def authorize_chunk_size(count: int, max_per_call: int, concurrency: int, min_per_call: int = 8) -> int:
    """Entries per authorize call: spread ``count`` over ``concurrency`` calls in flight (the gateway
    checks each entry against the bucket, so one big call is slow), never above the gateway's cap
    and never below ``min_per_call`` (a call has a fixed cost too)."""
    if count < 1:
        return max(1, min(max_per_call, min_per_call))
    spread = -(-count // max(1, concurrency))
    return max(1, min(max_per_call, max(min_per_call, spread)))


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float, rand: float) -> float:
    """``base * 2**attempt`` capped at ``cap``, times a jitter factor in ``[1 - jitter, 1 + jitter]``.

    ``rand`` is a uniform sample in [0, 1) supplied by the caller, so this stays pure.
    """
    raw = min(cap, base * (2 ** max(0, attempt)))
    return raw * (1 - jitter + 2 * jitter * rand)
