"""Execution plans: the call tree, timings, outcomes and values of one synthetic execution.

Pure and seeded. A plan says what happened; :mod:`formats.synth.cycle` decides when each
fact reaches disk. Times are nanoseconds since the stream's clock origin
(``StreamStarted.zero_unix_ns``), like every timestamp the real profiler writes.

Shape: a root call with children run one after another: LLM calls (each may call
unselected helpers), user-selected functions and unselected helpers. Only the root,
LLM and user-selected functions produce spans (the profiler's default selection);
every call counts in the calling-context tree.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from formats.synth.config import NS_PER_S, SynthConfig
from formats.synth.values import PooledValue, ValuePool


class Kind(enum.Enum):
    ROOT = "root"
    LLM = "llm"
    SELECTED = "selected"
    HELPER = "helper"


@dataclass(frozen=True)
class FunctionDef:
    function_id: int
    fqn: str
    kind: Kind

    @property
    def display_name(self) -> str:
        return self.fqn.rsplit(".", 1)[-1]

    @property
    def namespace(self) -> tuple[str, ...]:
        return tuple(self.fqn.split(".")[:-1])


FUNCTIONS: tuple[FunctionDef, ...] = (
    FunctionDef(0, "invoices.ProcessInvoice", Kind.ROOT),
    FunctionDef(1, "support.HandleTicket", Kind.ROOT),
    FunctionDef(2, "invoices.llm.ExtractInvoice", Kind.LLM),
    FunctionDef(3, "support.llm.ClassifyTicket", Kind.LLM),
    FunctionDef(4, "support.llm.DraftReply", Kind.LLM),
    FunctionDef(5, "billing.ComputeTotal", Kind.SELECTED),
    FunctionDef(6, "billing.ApplyDiscount", Kind.SELECTED),
    FunctionDef(7, "utils.NormalizeText", Kind.HELPER),
    FunctionDef(8, "utils.ParseDate", Kind.HELPER),
    FunctionDef(9, "utils.FormatCurrency", Kind.HELPER),
)
BY_KIND: dict[Kind, tuple[FunctionDef, ...]] = {
    kind: tuple(f for f in FUNCTIONS if f.kind is kind) for kind in Kind
}
FQN_BY_ID = {f.function_id: f.fqn for f in FUNCTIONS}


class Outcome(enum.Enum):
    SUCCEEDED = 0
    FAILED = 1
    CANCELLED = 2
    PANICKED = 3


# Span end statuses (``record.rs`` FunctionEndStatus).
OK, ERRORED, CANCELLED = "ok", "errored", "cancelled"
LOST_TOO_LARGE = "lost:value_too_large"


@dataclass
class ValueRef:
    """A value attached to a call: available with its pooled body, or lost with a reason."""

    role: str  # input | output | error
    value: PooledValue | None
    lost: str | None = None  # e.g. "value_too_large"


@dataclass
class CallPlan:
    call_id: int
    parent_call_id: int | None
    function: FunctionDef
    started_ns: int
    ended_ns: int
    status: str
    values: list[ValueRef] = field(default_factory=list)

    @property
    def selected(self) -> bool:
        return self.function.kind is not Kind.HELPER


@dataclass
class ExecutionPlan:
    engine_id: int
    thread_id: int
    outcome: Outcome
    started_ns: int
    ended_ns: int
    calls: list[CallPlan]  # in start order; calls[0] is the root
    finished: bool = True  # False: the stream stops before this execution ends (no RootEnded)


def _ms(rng: random.Random, bounds: tuple[int, int]) -> int:
    return rng.randint(bounds[0], bounds[1]) * 1_000_000 + rng.randrange(1_000_000)


class Planner:
    """Draws execution plans from a config; one planner per stream, seeded per stream."""

    def __init__(self, config: SynthConfig, pool: ValuePool, rng: random.Random) -> None:
        self.config = config
        self.pool = pool
        self.rng = rng

    def _value(self, role: str, kind: str, *, allow_big: bool) -> ValueRef:
        rng, cfg = self.rng, self.config
        if allow_big:
            roll = rng.random()
            if roll < cfg.p_too_large_value:
                # Bigger than single_value_bytes: the profiler does not write it.
                return ValueRef(role, None, "value_too_large")
            if roll < cfg.p_too_large_value + cfg.p_large_value:
                return ValueRef(role, self.pool.pick_large(rng))
        return ValueRef(role, self.pool.pick(kind, rng))

    def plan(self, engine_id: int, thread_id: int, started_ns: int) -> ExecutionPlan:
        rng, cfg = self.rng, self.config
        roll = rng.random()
        if roll < cfg.p_failed:
            outcome = Outcome.FAILED
        elif roll < cfg.p_failed + cfg.p_cancelled:
            outcome = Outcome.CANCELLED
        elif roll < cfg.p_failed + cfg.p_cancelled + cfg.p_panicked:
            outcome = Outcome.PANICKED
        else:
            outcome = Outcome.SUCCEEDED
        long = rng.random() < cfg.p_long

        # Children of the root, in the order they run.
        kinds: list[Kind] = [Kind.LLM] * rng.randint(*cfg.llm_calls)
        kinds += [Kind.SELECTED] * rng.randint(*cfg.selected_calls)
        kinds += [Kind.HELPER] * rng.randint(*cfg.unselected_calls)
        rng.shuffle(kinds)

        root_fn = rng.choice(BY_KIND[Kind.ROOT])
        calls: list[CallPlan] = []
        root = CallPlan(1, None, root_fn, started_ns, 0, OK)
        root.values.append(self._value("input", "root_args", allow_big=True))
        calls.append(root)
        next_id = 2
        t = started_ns + rng.randrange(50_000, 500_000)
        gap_scale = 1
        if long:
            want = int(rng.uniform(*cfg.long_duration_s) * NS_PER_S)
            gap_scale = max(1, want // max(1, len(kinds) + 1))
        for kind in kinds:
            fn = rng.choice(BY_KIND[kind])
            duration = (
                _ms(rng, cfg.call_duration_ms)
                if kind is not Kind.HELPER
                else rng.randrange(10_000, 2_000_000)
            )
            call = CallPlan(next_id, 1, fn, t, t + duration, OK)
            next_id += 1
            calls.append(call)
            if kind is Kind.LLM:
                call.values.append(self._value("input", "llm_args", allow_big=False))
                # An LLM call may use helpers of its own (not selected: counters only).
                if rng.random() < 0.3:
                    hfn = rng.choice(BY_KIND[Kind.HELPER])
                    hs = t + duration // 4
                    calls.append(CallPlan(next_id, call.call_id, hfn, hs, hs + duration // 4, OK))
                    next_id += 1
            elif kind is Kind.SELECTED:
                call.values.append(self._value("input", "helper_args", allow_big=False))
            t = t + duration + (gap_scale if long else rng.randrange(10_000, 200_000))

        selected_children = [c for c in calls[1:] if c.selected and c.parent_call_id == 1]
        if outcome is Outcome.FAILED and selected_children:
            # An LLM or selected call throws; the root rethrows the same error.
            culprit = selected_children[-1]
            err = self._value("error", "error", allow_big=False)
            culprit.status = ERRORED
            culprit.values.append(err)
            root.status = ERRORED
            root.values.append(ValueRef("error", err.value, err.lost))
            self._truncate_after(calls, culprit)
        elif outcome is Outcome.FAILED:
            root.status = ERRORED
            root.values.append(self._value("error", "error", allow_big=False))
        elif outcome is Outcome.CANCELLED:
            if len(calls) > 1:
                calls[-1].status = CANCELLED
            root.status = CANCELLED
        elif outcome is Outcome.PANICKED:
            # A panic unwinds frames like an exception but carries no error value.
            if len(calls) > 1:
                calls[-1].status = ERRORED
            root.status = ERRORED
        for call in calls[1:]:
            if call.status == OK and call.selected:
                value_kind = "llm_output" if call.function.kind is Kind.LLM else "helper_output"
                call.values.append(
                    self._value("output", value_kind, allow_big=call.function.kind is Kind.LLM)
                )
        if root.status == OK:
            root.values.append(self._value("output", "root_output", allow_big=True))
        root.ended_ns = (
            max(c.ended_ns for c in calls[1:]) + rng.randrange(20_000, 300_000) if len(calls) > 1 else t
        )
        return ExecutionPlan(engine_id, thread_id, outcome, started_ns, root.ended_ns, calls)

    @staticmethod
    def _truncate_after(calls: list[CallPlan], culprit: CallPlan) -> None:
        """Calls that would have started after the failing one never ran."""
        cut = {c.call_id for c in calls if c.parent_call_id == 1 and c.started_ns > culprit.started_ns}
        calls[:] = [c for c in calls if c.call_id not in cut and c.parent_call_id not in cut]
