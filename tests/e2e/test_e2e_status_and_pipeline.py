"""``baml-studio status`` accounts for every execution of a synthetic corpus with abandoned,
index_corrupt and pending cases (checked against the synth ground truth); and the whole pipeline:
the synthetic profiler writes, the publisher ships with the stack's token, and every execution the
ground truth lists is projected exactly once with the same spans, statuses and CIDs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from e2e_world import World, wait_for
from typer.testing import CliRunner

from formats import cas
from formats.ids import CallRef, ThreadRef
from formats.object_keys import data_segment_key
from formats.synth.config import SynthConfig
from formats.synth.generator import synthesize
from formats.synth.truth import TruthExecution, TruthSpan
from publisher import Publisher, PublisherSettings
from worker.cli_ops import register

pytestmark = pytest.mark.stack


def _status_json(world: World) -> dict:
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["status", "--run-dir", world.state.run_dir, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_status_accounts_for_every_execution(world: World, tmp_path: Path) -> None:
    # Abandoned: open executions, swept.
    swept = world.corpus(tmp_path, executions=8, unfinished_per_process=3)
    # Index-corrupt: an interior data segment never lands.
    gap = world.corpus(tmp_path, executions=30, p_long=0.5, segment_target_bytes=4096)
    spanning = [
        e
        for e in gap.truth.executions
        if e.status != "abandoned"
        and e.data_first_seq is not None
        and e.data_last_seq is not None
        and e.data_last_seq - e.data_first_seq >= 2
    ]
    assert spanning
    first = spanning[0].data_first_seq
    assert first is not None
    missing_seq = first + 1
    missing = data_segment_key(world.scope, spanning[0].stream, missing_seq)
    corrupt = {
        e.execution_id
        for e in spanning
        if e.data_first_seq is not None
        and e.data_last_seq is not None
        and e.data_first_seq < missing_seq < e.data_last_seq
    }
    # Pending: the packs never land.
    waiting = world.corpus(tmp_path, executions=10)

    world.upload(swept)
    world.upload(gap, skip={missing})
    world.wait_in_ledger(swept.ended() | gap.ended())
    time.sleep(1.5)
    world.sweep()
    world.upload(waiting, skip=set(waiting.up.pack_keys))
    wait_for(lambda: not world.queue_drained(), 20, "the pending messages to be held")

    doc = _status_json(world)
    counts = doc["executions"]
    total = len(swept.all()) + len(gap.all()) + len(waiting.all())
    assert sum(counts.values()) == total
    assert counts["abandoned"] == len(swept.open()) + len(gap.open())
    assert counts["pending"] == len(waiting.all())
    assert counts["quarantined"] == 0
    ledger = world.ledger()
    assert {r for r, row in ledger.items() if row.index_state == "index_corrupt"} >= corrupt
    assert counts["index_corrupt"] == sum(
        1 for row in ledger.values() if row.index_state == "index_corrupt" and row.status != "abandoned"
    )
    assert counts["projected"] + counts["index_corrupt"] == len(swept.ended()) + len(gap.ended())
    assert doc["objects"]["waiting"] >= 1 and doc["oldest_unprojected"] is not None
    assert doc["queue"]["in_flight"] >= 1
    # Once the packs land, the pending ones are projected without operator action.
    for key in waiting.up.pack_keys:
        world.put(key, waiting.up.bodies[key])
    world.wait_in_ledger(waiting.all(), timeout=150)
    after = _status_json(world)["executions"]
    assert after["pending"] == 0 and sum(after.values()) == total


def test_end_to_end_publisher_to_projection(world: World, tmp_path: Path) -> None:
    root = tmp_path / "profiles-v1"
    truth = synthesize(root, SynthConfig(seed=4242, executions=25, p_large_value=0.05))
    assert world.state.publisher_token
    pub = Publisher(
        PublisherSettings(
            gateway_url=world.state.gateway_url, token=world.state.publisher_token, profile_dir=root
        )
    )
    report = pub.run_once(60)
    assert report is not None and report.ok, pub.stopped_reason
    ids = {e.execution_id for e in truth.executions}
    ledger = world.wait_in_ledger(ids, timeout=120)
    assert all(ledger[i].status != "abandoned" for i in ids)
    assert world.root_rows(ids) == dict.fromkeys(ids, 1)
    quoted = ", ".join(f"'{i}'" for i in sorted(ids))
    cols = "execution_id, call_id, parent_call_id, function_name, status, args_cid, output_cid, error_cid"
    table = world.boundary.resident_query(
        f"SELECT {cols} FROM calls_v1 WHERE execution_id IN ({quoted})",
        world.scope.environment_id,
        generation=1,
        catalog_version=1,
    )
    got = sorted(zip(*(table[name].to_pylist() for name in cols.split(", ")), strict=True), key=repr)
    want = sorted((_expected_call(e, s) for e in truth.executions for s in e.spans), key=repr)
    assert len(set(got)) == len(got)  # no call twice
    assert got == want  # every span exactly once: ids, parent, function, status and value CIDs


# The synth's span statuses (record.rs FunctionEndStatus) in the catalog's vocabulary
# (activities/projection/assemble.py CALL_STATUS): ``exited`` has no catalog status of its own.
TRUTH_TO_CATALOG_STATUS = {
    "ok": "succeeded",
    "errored": "failed",
    "cancelled": "cancelled",
    "exited": "cancelled",
}
_ROLE_COLUMN = {"input": "args", "output": "output", "error": "error"}


def _expected_call(e: TruthExecution, s: TruthSpan) -> tuple[str | None, ...]:
    """The calls_v1 row the ground truth predicts: call ids as ``baml_call_1_`` strings of the
    execution's root thread (the synth runs every call on it), CIDs as 64 hex digits."""
    root = ThreadRef.from_bytes(bytes.fromhex(e.execution_id))

    def ref(call: int) -> str:
        return CallRef(root.euid, root.engine_id, root.thread_id, call).encode_string()

    cid = {_ROLE_COLUMN[v.role]: cas.cid_from_string(v.cid).hex() for v in s.values if v.cid is not None}
    status = TRUTH_TO_CATALOG_STATUS[s.status] if s.status is not None else "abandoned"
    return (
        e.execution_id,
        ref(s.call_id),
        ref(s.parent_call_id) if s.parent_call_id is not None else None,
        s.function,
        status,
        cid.get("args"),
        cid.get("output"),
        cid.get("error"),
    )
