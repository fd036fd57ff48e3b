"""The embedded stack keeps its state across ``stack down``/``stack up`` (issue 13).

On a real stack: evidence shipped and projected, the stack stopped and started again: every
evidence object with all its versions, every Lance dataset object and the answers of a public and
a private query are the same; new evidence is projected; a bridge stopped with SIGSTOP while
messages wait shows unhealthy in ``stack status``. A run directory whose bucket is gone while
facts and Temporal state remain is refused with what to run.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from stack_fixtures import cli, free_base_port, start_stack, stop_stack, wait_for_ledger

from api.dataplane.aws import aws_client
from worker.cli_demo import run_query, ship, wait_for_projection, write_evidence
from worker.stack.restore import derived_stores
from worker.stack.state import StackState, load_stack_state


def _bucket(state: StackState) -> dict[str, list[tuple[int, bool, bool]]]:
    """key -> (size, is delete marker, is latest) of every version, in listing order."""
    secret = state.aws_secret_access_key
    s3 = aws_client(
        "s3",
        state.s3_endpoint_url,
        state.aws_region,
        state.aws_access_key_id,
        secret.get_secret_value() if hasattr(secret, "get_secret_value") else secret,
    )
    out: dict[str, list[tuple[int, bool, bool]]] = {}
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=state.bucket):
        for v in page.get("Versions", []):
            out.setdefault(v["Key"], []).append((v["Size"], False, v["IsLatest"]))
        for m in page.get("DeleteMarkers", []):
            out.setdefault(m["Key"], []).append((0, True, m["IsLatest"]))
    return out


def _queries(streams: list[str], sample: dict[str, Any]) -> list[str]:
    scope = "(" + " OR ".join(f"execution_id LIKE '{e}%'" for e in streams) + ")"
    public = (
        "SELECT function_name, count() AS calls, sum(duration_ns) AS total FROM calls_v1 "
        f"WHERE {scope} GROUP BY function_name ORDER BY function_name"
    )
    private = (
        "SELECT execution_id, function_name, args['invoice']['id'] AS invoice FROM calls_v1 "
        f"WHERE function_name = '{sample['function']}' AND {scope} "
        f"AND args['invoice']['id'] = '{sample['invoice']}' ORDER BY execution_id"
    )
    return [public, private]


def _bridge_health(run_dir: Path) -> str | None:
    done = cli("stack", "status", "--json", "--run-dir", str(run_dir))
    return json.loads(done.stdout)["health"]["bridge"]


def test_stack_down_and_up_keep_evidence_datasets_and_answers_and_new_evidence_projects(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "stack"
    base = free_base_port()
    state = start_stack(run_dir, base)
    try:
        root, streams, sample = write_evidence(run_dir, 12)
        assert sample.get("invoice"), "the corpus has an invoice to look up"
        ship(state, root)
        wait_for_projection(state, streams, sample["finished"], 240)
        # Facts show before the ledger commit that ends a projection: snapshot after it, or the
        # stores are compared mid-write (the ledger's last version lands after the snapshot).
        wait_for_ledger(state, sample["finished"], 60)
        sql = _queries(streams, sample)
        answers = [run_query(state, q).rows for q in sql]
        assert answers[0] and answers[1]
        bucket = _bucket(state)
        assert any(k.startswith("evidence/") for k in bucket)
        assert any(".lance/" in k for k in bucket)

        assert stop_stack(run_dir).returncode == 0
        state = start_stack(run_dir, base)
        # Every object is still there, unchanged. The restarted stack may add some: its
        # IndexAndCompact schedule can fire at once and build indexes (seen once in a full run).
        after = _bucket(state)
        assert {k: after.get(k) for k in bucket} == bucket
        assert [run_query(state, q).rows for q in sql] == answers

        # New evidence after the restart is projected.
        root2, streams2, sample2 = write_evidence(run_dir, 6)
        ship(state, root2)
        wait_for_projection(state, streams2, sample2["finished"], 240)
        assert [run_query(state, q).rows for q in sql] == answers

        # A bridge stopped while messages wait: unhealthy in `stack status` (its heartbeat stops).
        state = load_stack_state(run_dir) or state
        bridge_pid = state.parts["bridge"].pid
        assert bridge_pid and _bridge_health(run_dir) is None
        os.kill(bridge_pid, signal.SIGSTOP)
        try:
            root3, streams3, sample3 = write_evidence(run_dir, 3)
            ship(state, root3)
            started = time.monotonic()
            while _bridge_health(run_dir) is None:
                assert time.monotonic() - started < 40, "the stopped bridge still shows healthy"
                time.sleep(1)
            reason = _bridge_health(run_dir)
            assert reason is not None and "heartbeat" in reason
        finally:
            os.kill(bridge_pid, signal.SIGCONT)
        wait_for_projection(state, streams3, sample3["finished"], 240)
    finally:
        stop_stack(run_dir)


def test_a_run_directory_whose_bucket_is_gone_but_facts_remain_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "stack"
    (run_dir / "chdb").mkdir(parents=True)
    (run_dir / "chdb" / "metadata").write_text("facts of an earlier run")
    (run_dir / "temporal.db").write_bytes(b"")
    done = cli("stack", "up", "--detach", "--run-dir", str(run_dir), "--base-port", str(free_base_port()))
    assert done.returncode != 0
    message = " ".join((done.stderr + done.stdout).split())
    assert "evidence bucket" in message and "rm -rf" in message and "chdb" in message
    assert load_stack_state(run_dir) is None or load_stack_state(run_dir).status != "healthy"  # type: ignore[union-attr]


def test_a_write_ahead_log_left_by_a_killed_temporal_counts_as_its_store(tmp_path: Path) -> None:
    # A log left beside a removed database would be replayed into the next one: it must be named.
    run_dir = tmp_path / "stack"
    run_dir.mkdir()
    (run_dir / "temporal.db-wal").write_bytes(b"frames of an earlier run")
    assert derived_stores(run_dir) == [str(run_dir / "temporal.db-wal")]
    (run_dir / "temporal.db").write_bytes(b"")
    assert derived_stores(run_dir) == [str(run_dir / "temporal.db"), str(run_dir / "temporal.db-wal")]
