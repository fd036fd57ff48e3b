"""Damaged streams shipped by the continuous publisher and projected on the embedded stack.

The synthetic profiler writes two processes; the first gets every damage mode the real writer
can produce (a missing interior meta object, a lost admitted batch, a RootEnded whose RootStarted
was in a lost meta object, a missing and a corrupt data segment inside ranges, an engine without
a function table). Its ground truth follows the upstream reader's rules, and ``inspect`` reads the
same store. Projection must give every execution the reader's ``index_state`` (finished ones when
their meta object is projected, open ones when the sweep closes them), the same spans ``inspect``
lists, and ``status`` must account for every execution.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_world import World, wait_for

from formats import inspect
from formats.ids import CallRef, ThreadRef
from formats.synth.config import DAMAGE_MODES, SynthConfig
from formats.synth.generator import synthesize
from publisher import Publisher, PublisherSettings

pytestmark = pytest.mark.stack

CALL_STATUS = {"ok": "succeeded", "errored": "failed", "cancelled": "cancelled", "exited": "cancelled"}


def _calls(world: World, ids: set[str]) -> dict[str, set[tuple[str, str, str]]]:
    quoted = ", ".join(f"'{i}'" for i in sorted(ids))
    table = world.boundary.resident_query(
        "SELECT execution_id, call_id, function_name, status FROM calls_v1 FINAL"
        f" WHERE execution_id IN ({quoted})",
        world.scope.environment_id,
        generation=1,
        catalog_version=1,
    )
    out: dict[str, set[tuple[str, str, str]]] = {}
    for row in table.to_pylist():
        out.setdefault(row["execution_id"], set()).add((row["call_id"], row["function_name"], row["status"]))
    return out


def _expected_calls(execution: dict) -> set[tuple[str, str, str]]:
    """inspect's spans as calls_v1 rows: an unknown function (no SpanStart, or no table entry) is
    ``<unknown>`` / ``function#<id>`` in the catalog, which has no null function names."""
    root = ThreadRef.from_bytes(bytes.fromhex(execution["execution_id"]))
    out = set()
    for span in execution["spans"]:
        ref = CallRef(root.euid, root.engine_id, root.thread_id, span["call_id"]).encode_string()
        status = CALL_STATUS[span["status"]] if span["status"] is not None else "abandoned"
        out.add((ref, span["function"] or "?", status))
    return out


def _same_calls(got: set[tuple[str, str, str]], want: set[tuple[str, str, str]]) -> bool:
    def norm(rows: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
        return {(r, "?" if f == "<unknown>" or f.startswith("function#") else f, s) for r, f, s in rows}

    return norm(got) == norm(want)


def test_every_damage_mode_is_projected_to_the_readers_states(world: World, tmp_path: Path) -> None:
    root = tmp_path / "profiles-v1"
    cfg = SynthConfig(
        seed=9191,
        rate_per_second=4.0,
        processes=2,
        executions=60,
        unfinished_per_process=2,
        p_long=0.3,
        segment_target_bytes=4096,
        damage=DAMAGE_MODES,
    )
    truth = synthesize(root, cfg)
    report = inspect.inspect_path(root)
    seen = {e["execution_id"]: e for e in report.executions}
    by_truth = {e.execution_id: e for e in truth.executions}
    # inspect and the ground truth agree on every execution's state (the reader's rules).
    assert {i: (e["status"], e["index_state"]) for i, e in seen.items()} == {
        i: (e.status, e.index_state) for i, e in by_truth.items()
    }
    states = {e.index_state for e in truth.executions}
    assert {"complete", "index_corrupt", "root_started_lost", "no_root_ended"} <= states

    pub = Publisher(
        PublisherSettings(
            gateway_url=world.state.gateway_url,
            token=world.state.publisher_token,
            profile_dir=root,
            checksum_block_seconds=0,  # the damaged files are skipped at once, not after 60 s
        )
    )
    pub.run_once(120)
    finished = {i for i, e in by_truth.items() if e.ended_unix_ns is not None}  # a RootEnded on disk
    ledger = world.wait_in_ledger(finished, timeout=240)
    assert {i: ledger[i].index_state for i in finished} == {i: by_truth[i].index_state for i in finished}
    assert {i: ledger[i].status for i in finished} == {i: by_truth[i].status for i in finished}

    # The open executions: the stream stopped without their RootEnded; the sweep closes them.
    opened = set(by_truth) - finished
    assert opened
    time.sleep(1.5)
    world.sweep()
    ledger = world.wait_in_ledger(set(by_truth), timeout=120)
    assert {i: (ledger[i].status, ledger[i].index_state) for i in opened} == {
        i: ("abandoned", by_truth[i].index_state) for i in opened
    }

    # The same spans inspect lists, damaged executions included (partial facts).
    calls = _calls(world, set(by_truth))
    mismatched = [i for i in by_truth if not _same_calls(calls.get(i, set()), _expected_calls(seen[i]))]
    assert mismatched == []

    # status accounts for every execution, each once.
    wait_for(lambda: world.status()["executions"].get("pending", 0) == 0, 30, "nothing pending")
    counts = world.status()["executions"]
    assert sum(counts.values()) == len(by_truth), counts
