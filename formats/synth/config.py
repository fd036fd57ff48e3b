"""What the synthetic profiler generates: one frozen, seeded configuration.

Defaults follow the real profiler (``bex_prof_store`` sizing policy v1 for a 256 MiB
process): publish interval 1 s, segment target 4 MiB, single-value limit 14 MiB; the
large-value threshold is the publisher's 32 KiB.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

NS_PER_S = 1_000_000_000
# 2026-11-30T00:00:00Z: a fixed clock origin keeps bulk corpora byte-identical per seed.
DEFAULT_ZERO_UNIX_NS = 1_796_083_200 * NS_PER_S
DEFAULT_SEGMENT_TARGET_BYTES = 4 * 1024 * 1024
DEFAULT_SINGLE_VALUE_BYTES = 14_680_064
LARGE_VALUE_THRESHOLD_BYTES = 32 * 1024

# Damage modes (formats.synth.damage), each applied to the stream of process 0.
MISSING_META = "missing_meta"  # an interior meta-post object (RootEnded records) deleted
LOST_ADMITTED_BATCH = "lost_admitted_batch"  # a meta-pre batch Lost at write time: RootEnded flag bit 0
LOST_ROOT_STARTED = "lost_root_started"  # the meta-pre object holding RootStarted records deleted
MISSING_DATA = "missing_data"  # a data segment inside an execution's range deleted
CORRUPT_DATA = "corrupt_data"  # a data segment inside a range with one byte flipped (checksum fails)
NO_FUNCTION_TABLE = "no_function_table"  # an engine's EngineStarted without function_table_cid
DAMAGE_MODES = (
    MISSING_META,
    LOST_ADMITTED_BATCH,
    LOST_ROOT_STARTED,
    MISSING_DATA,
    CORRUPT_DATA,
    NO_FUNCTION_TABLE,
)


class SynthConfigError(ValueError):
    """A configuration value is out of range; the message names the field."""


@dataclass(frozen=True)
class SynthConfig:
    seed: int = 1
    processes: int = 1
    engines_per_process: int = 1
    executions: int = 100  # total over all processes (bulk mode; live mode runs until stopped)
    rate_per_second: float = 50.0  # executions started per second, per process (simulated in bulk)
    # Call-tree shape per execution (inclusive ranges). Only the root, LLM functions and
    # user-selected functions produce spans; every call counts in the CCT.
    llm_calls: tuple[int, int] = (1, 3)
    selected_calls: tuple[int, int] = (0, 2)
    unselected_calls: tuple[int, int] = (2, 6)
    call_duration_ms: tuple[int, int] = (5, 400)
    # Outcomes (fractions of executions).
    p_failed: float = 0.05
    p_cancelled: float = 0.01
    p_panicked: float = 0.005
    # Fraction of executions whose duration crosses several publish intervals.
    p_long: float = 0.02
    long_duration_s: tuple[float, float] = (1.5, 4.0)
    # Value shapes (fractions of values).
    p_large_value: float = 0.002  # >= 32 KiB
    p_too_large_value: float = 0.0005  # > single_value_bytes: lost:value_too_large, not written
    # Executions left running when the stream stops (no RootEnded), per process.
    unfinished_per_process: int = 0
    publish_interval_ns: int = NS_PER_S
    segment_target_bytes: int = DEFAULT_SEGMENT_TARGET_BYTES
    single_value_bytes: int = DEFAULT_SINGLE_VALUE_BYTES
    zero_unix_ns: int = DEFAULT_ZERO_UNIX_NS
    value_pool_size: int = 256  # distinct small values per kind, reused across calls
    baml_version: str = "0.0.0-synth"
    os_arch: str = "linux-x86_64"
    # Distinct builds of the project: process p runs build p % builds. With 1 (the default)
    # every process runs one byte-identical build: one program id, one function table CID.
    builds: int = 1
    # Long mode: each stream keeps starting executions until it has written at least this many
    # meta objects (0: off; ``executions`` is then a minimum, not the count).
    min_meta_objects: int = 0
    # The last engine of each process starts (EngineStarted, then its first root) only once the
    # stream has written this many meta objects (0: every engine starts with the stream).
    late_engine_after_meta: int = 0
    # Damage modes (DAMAGE_MODES), applied to the stream of process 0; bulk mode only.
    damage: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            if getattr(self, name) <= 0:
                raise SynthConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")

        for name in ("processes", "engines_per_process", "rate_per_second", "publish_interval_ns", "builds"):
            positive(name)
        for name in ("segment_target_bytes", "single_value_bytes", "value_pool_size"):
            positive(name)
        if self.executions < 0 or self.unfinished_per_process < 0:
            raise SynthConfigError("executions and unfinished_per_process must be >= 0")
        for name in ("llm_calls", "selected_calls", "unselected_calls", "call_duration_ms"):
            lo, hi = getattr(self, name)
            if lo < 0 or hi < lo:
                raise SynthConfigError(f"{name} must be a range (lo, hi) with 0 <= lo <= hi, got {(lo, hi)}")
        lo_s, hi_s = self.long_duration_s
        if lo_s <= 0 or hi_s < lo_s:
            raise SynthConfigError(f"long_duration_s must be a positive range, got {(lo_s, hi_s)}")
        outcome = self.p_failed + self.p_cancelled + self.p_panicked
        for name in ("p_failed", "p_cancelled", "p_panicked", "p_long", "p_large_value", "p_too_large_value"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SynthConfigError(f"{name} must be within [0, 1], got {getattr(self, name)!r}")
        if outcome > 1.0:
            raise SynthConfigError(f"p_failed + p_cancelled + p_panicked must be <= 1, got {outcome}")
        if self.single_value_bytes <= LARGE_VALUE_THRESHOLD_BYTES:
            raise SynthConfigError("single_value_bytes must exceed the 32 KiB large-value threshold")
        if self.min_meta_objects < 0 or self.late_engine_after_meta < 0:
            raise SynthConfigError("min_meta_objects and late_engine_after_meta must be >= 0")
        if self.late_engine_after_meta and self.engines_per_process < 2:
            raise SynthConfigError("late_engine_after_meta needs engines_per_process >= 2")
        unknown = [d for d in self.damage if d not in DAMAGE_MODES]
        if unknown or len(set(self.damage)) != len(self.damage):
            raise SynthConfigError(f"damage must be distinct names from {DAMAGE_MODES}, got {self.damage!r}")

    @classmethod
    def long_run(cls, meta_objects: int = 5000, **changes: object) -> SynthConfig:
        """One process, two engines (the second starts half-way), at least ``meta_objects`` meta objects.

        Small call trees and a low rate keep the run short: about two meta objects per publish
        interval (meta-pre and meta-post), so ``meta_objects / 2`` simulated seconds.
        """
        base = cls(
            processes=1,
            engines_per_process=2,
            executions=0,
            rate_per_second=4.0,
            llm_calls=(1, 1),
            selected_calls=(0, 1),
            unselected_calls=(0, 1),
            call_duration_ms=(5, 50),
            p_long=0.0,
            p_large_value=0.0,
            p_too_large_value=0.0,
            value_pool_size=16,
            min_meta_objects=meta_objects,
            late_engine_after_meta=meta_objects // 2,
        )
        return base.replace(**changes)

    def replace(self, **changes: object) -> SynthConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
