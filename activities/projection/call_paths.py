"""CCT counters merged per execution and call path: the rows of ``call_path_stats_v1``.

A group carries counter *deltas*; an execution that spans several data segments has one
delta per path in each, and the per-path totals are their sums. A context's tuple (program,
parent key, function, call site, edge kind) may travel in only one of the deltas, so the
merge keeps the first tuple it sees. Overflow deltas (paths the profiler could not key) are
merged per (reason, edge kind).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from formats.cct import CctCounters, CctPayload, OverflowReason
from formats.ids import ContextTuple, EdgeKind

U64_MAX = (1 << 64) - 1
_COUNTER_FIELDS = tuple(f.name for f in fields(CctCounters))
assert len(_COUNTER_FIELDS) == 10, "add_counters spells out every CctCounters field"


def add_counters(a: CctCounters, b: CctCounters) -> CctCounters:
    # Spelled out: this runs once per path per segment and getattr loops cost 5x more.
    return CctCounters(
        a.invocations_started + b.invocations_started,
        a.spans_selected + b.spans_selected,
        a.completed_ok + b.completed_ok,
        a.completed_error + b.completed_error,
        a.completed_cancelled + b.completed_cancelled,
        a.completed_exit + b.completed_exit,
        a.inclusive_ns + b.inclusive_ns,
        a.direct_call_child_inclusive_ns + b.direct_call_child_inclusive_ns,
        a.await_ns + b.await_ns,
        a.await_count + b.await_count,
    )


@dataclass
class MergedPath:
    key: bytes
    tuple: ContextTuple | None
    counters: CctCounters


@dataclass
class MergedCct:
    paths: dict[bytes, MergedPath] = field(default_factory=dict)
    overflow: dict[tuple[OverflowReason, EdgeKind], CctCounters] = field(default_factory=dict)

    def tuple_for(self, key: bytes) -> ContextTuple | None:
        path = self.paths.get(key)
        return path.tuple if path is not None else None


def merge_cct(payloads: Iterable[CctPayload]) -> MergedCct:
    """Sum every delta per context key (and overflow deltas per reason and edge kind)."""
    merged = MergedCct()
    for payload in payloads:
        for ctx in payload.contexts:
            have = merged.paths.get(ctx.key)
            if have is None:
                merged.paths[ctx.key] = MergedPath(ctx.key, ctx.tuple, ctx.counters)
            else:
                have.counters = add_counters(have.counters, ctx.counters)
                if have.tuple is None:
                    have.tuple = ctx.tuple
        for ov in payload.overflow:
            slot = (ov.reason, ov.edge_kind)
            prev = merged.overflow.get(slot)
            merged.overflow[slot] = ov.counters if prev is None else add_counters(prev, ov.counters)
    return merged


def completed(c: CctCounters) -> int:
    return c.completed_ok + c.completed_error + c.completed_cancelled + c.completed_exit


def duration_bounds(c: CctCounters, span_durations: list[int]) -> tuple[int, int]:
    """(min, max) inclusive duration on a path.

    The CCT holds sums, not extremes. They are exact when every completed call on the path
    has a span (or there is exactly one); otherwise the honest bounds are (0, total).
    """
    total = min(c.inclusive_ns, U64_MAX)
    done = completed(c)
    if span_durations and len(span_durations) >= done:
        return min(span_durations), max(span_durations)
    if done == 1:
        return total, total
    return 0, total


def overflow_path_id(reason: OverflowReason, edge: EdgeKind) -> str:
    return f"overflow:{reason.name.lower()}:{edge.name.lower()}"
