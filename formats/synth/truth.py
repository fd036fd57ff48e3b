"""The ground truth of a synthetic run: what was written, in the shape ``inspect`` prints.

One :class:`TruthExecution` per execution. ``to_json()`` gives exactly the object
``baml-studio inspect --json --values`` prints for that execution once the run has
finished and its streams are closed (``status`` of an unfinished execution is
``abandoned``; ``running`` exists only while a live stream holds its lock).

The truth follows the upstream reader's rules (:mod:`formats.reader_rules`) on what remains
on disk after any damage mode ran (:mod:`formats.synth.damage`): ``index_state`` from the
index gaps and RootEnded flags, spans from the readable data segments only (a span whose
SpanStart was lost keeps ``function``, ``parent_call_id`` and ``started_ns`` null), and
``data_issues`` naming each missing or corrupt data segment the reader meets in the
execution's range (``missing_data_segment N``, ``corrupt_data_segment N``). ``data_issues``
is not part of the ``inspect`` shape: ``to_json(issues=True)`` adds it.

A run's truth is written as JSON lines (``truth.jsonl``, one execution per line, sorted
by stream then execution id) beside the profile directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TruthValue:
    role: str  # input | output | error
    state: str  # available | lost:<reason>
    cid: str | None  # bamlv_1_<hex64> when available
    json: Any = None  # the project's JSON rendering (formats.value_json), None when lost

    def to_json(self, *, values: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "state": self.state, "cid": self.cid}
        if values:
            out["json"] = self.json
        return out


@dataclass
class TruthSpan:
    call_id: int
    parent_call_id: int | None  # None for the root, or when the SpanStart is unreadable
    function: str | None  # None when the SpanStart is unreadable or the engine has no function table
    status: str | None  # ok | errored | cancelled | exited; None while the call is open
    started_ns: int | None  # None when the SpanStart is unreadable
    ended_ns: int | None
    values: list[TruthValue] = field(default_factory=list)

    def to_json(self, *, values: bool = True) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "parent_call_id": self.parent_call_id,
            "function": self.function,
            "status": self.status,
            "started_ns": self.started_ns,
            "ended_ns": self.ended_ns,
            "values": [v.to_json(values=values) for v in self.values],
        }


@dataclass
class TruthExecution:
    stream: str
    execution_id: str
    status: str  # succeeded | failed | cancelled | panicked | abandoned | running
    index_state: str  # complete | index_corrupt | root_started_lost | no_root_ended
    started_unix_ns: int | None  # None when the RootStarted is not on disk
    ended_unix_ns: int | None
    data_first_seq: int | None
    data_last_seq: int | None
    spans: list[TruthSpan] = field(default_factory=list)
    data_issues: list[str] = field(default_factory=list)  # reader.rs DataIssue, snake_case + sequence

    def to_json(self, *, values: bool = True, issues: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stream": self.stream,
            "execution_id": self.execution_id,
            "status": self.status,
            "index_state": self.index_state,
            "started_unix_ns": self.started_unix_ns,
            "ended_unix_ns": self.ended_unix_ns,
            "data_first_seq": self.data_first_seq,
            "data_last_seq": self.data_last_seq,
            "spans": [s.to_json(values=values) for s in self.spans],
        }
        if issues:
            out["data_issues"] = list(self.data_issues)
        return out


@dataclass
class GroundTruth:
    """Everything one run wrote, in memory (tests) and on disk (``truth.jsonl``)."""

    executions: list[TruthExecution] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    calls: int = 0  # every call, selected or not
    spans: int = 0
    meta_segments: int = 0
    data_segments: int = 0
    data_bytes: int = 0
    meta_bytes: int = 0
    cas_objects: int = 0
    # Executions a reader no longer lists: neither their RootStarted nor their RootEnded is on disk.
    orphans: list[str] = field(default_factory=list)
    # What each damage mode did, one entry per mode (see formats.synth.damage.DamageReport).
    damage: list[dict[str, Any]] = field(default_factory=list)

    def sorted_executions(self) -> list[TruthExecution]:
        return sorted(self.executions, key=lambda e: (e.stream, e.execution_id))

    def by_id(self) -> dict[str, TruthExecution]:
        return {e.execution_id: e for e in self.executions}

    def write_jsonl(self, path: Path, *, issues: bool = False) -> None:
        write_truth_jsonl(path, self.sorted_executions(), issues=issues)


def write_truth_jsonl(path: Path, executions: Iterable[TruthExecution], *, issues: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for execution in executions:
            out.write(json.dumps(execution.to_json(issues=issues), ensure_ascii=False, sort_keys=True))
            out.write("\n")


def read_truth_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as src:
        for line in src:
            if line.strip():
                yield json.loads(line)
