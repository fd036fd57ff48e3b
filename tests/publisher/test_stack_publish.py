"""The publisher against the real embedded stack (``stack up --detach``): real gateway, real Boundary
token introspection, moto S3. Ships a live synth corpus with the stack's publisher token; a revoked
token stops shipping and keeps every file; a newly issued token resumes it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from synth_check import RootSnapshot, assert_all_shipped, snapshot

from api.boundary.control_client import ControlClient
from formats import boundary_wire as bw
from formats.object_keys import Scope
from formats.synth import LiveSynth, SynthConfig
from publisher import FlushHooks, Publisher, PublisherSettings
from publisher.transport import GatewayClient, GatewayStopped
from worker.stack.state import StackState, load_stack_state, pid_alive

sys.path.insert(0, str(Path(__file__).parents[1] / "stack"))
from stack_fixtures import free_base_port, stack_pids, start_stack, stop_stack

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackState]:
    run_dir = tmp_path_factory.mktemp("pubstack")
    state = start_stack(run_dir, free_base_port())
    try:
        yield state
    finally:
        final = load_stack_state(run_dir) or state
        stop_stack(run_dir)
        left = [pid for pid in stack_pids(final) if pid_alive(pid)]
        assert not left, f"processes left running after stack down: {left}"


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def _live_corpus(root: Path, seed: int, seconds: float) -> None:
    synth = LiveSynth(root, SynthConfig(seed=seed, rate_per_second=80.0, p_large_value=0.02), tick_s=0.02)
    synth.start()
    time.sleep(seconds)
    synth.stop()


def _token_refused(gateway_url: str, token: str) -> bool:
    client = GatewayClient(gateway_url, token)
    try:
        client.get_config()
        return False
    except GatewayStopped:
        return True
    finally:
        client.close()


def test_publisher_ships_through_the_real_stack_and_obeys_revocation(
    stack: StackState, tmp_path: Path
) -> None:
    assert stack.publisher_token and stack.operator_token and stack.environment_id
    assert stack.tenant_id and stack.project_id
    scope = Scope(stack.tenant_id, stack.project_id, stack.environment_id)
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.s3_endpoint_url,
        region_name=stack.aws_region,
        aws_access_key_id=stack.aws_access_key_id,
        aws_secret_access_key=stack.aws_secret_access_key,
    )

    def keys() -> list[str]:
        out: list[str] = []
        prefix = f"evidence/v1/{scope.tenant_id}/{scope.project_id}/{scope.environment_id}/"
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out

    def get(key: str) -> bytes:
        return bytes(s3.get_object(Bucket=stack.bucket, Key=key)["Body"].read())

    root = tmp_path / "profiles-v1"
    seen = RootSnapshot()
    settings = PublisherSettings(
        gateway_url=stack.gateway_url,
        token=stack.publisher_token,
        profile_dir=root,
        stopped_poll_seconds=0.5,
        backoff_base_seconds=0.05,
        backoff_cap_seconds=0.5,
    )
    pub = Publisher(settings, hooks=FlushHooks(before_cursor=lambda: seen.merge(snapshot(root))))

    # 1. A live corpus ships completely with the stack's own publisher token.
    _live_corpus(root, seed=21, seconds=1.5)
    seen.merge(snapshot(root))
    report = pub.run_once(60)
    assert report is not None and report.ok and report.shipped > 0, (report, pub.stopped_reason)
    counts = assert_all_shipped(seen, keys(), get, scope)
    assert counts.get("meta_segment") and counts.get("data_segment") and counts.get("table")
    shipped_keys = set(keys())

    # 2. Revoke the token: once the gateway refuses it (its introspection cache expires), shipping
    # stops and every new file stays on disk.
    control = ControlClient(stack.boundary_control_url, stack.operator_token)
    token_id = next(
        t.token_id
        for t in control.list_tokens(kind="publisher", environment_id=stack.environment_id)
        if stack.publisher_token.startswith(t.display_prefix) and t.revoked_at is None
    )
    control.revoke_token(token_id)
    _wait(lambda: _token_refused(stack.gateway_url, stack.publisher_token), 45, "the gateway to refuse")
    _live_corpus(root, seed=22, seconds=1.0)
    pending = snapshot(root)
    assert pending.segments
    pub.start()
    _wait(lambda: pub.stopped_reason == "unauthorized", 15, "the publisher to stop")
    time.sleep(1.0)  # a few polls while stopped
    assert set(keys()) == shipped_keys
    assert snapshot(root).segments.keys() >= pending.segments.keys()  # files are kept
    assert pub.stats()["state"] == "unauthorized"

    # 3. A newly issued token: the publisher resumes and ships what waited.
    issued = control.issue_token(
        bw.TokenIssue(
            kind="publisher",
            name="publisher-test-resume",
            environment_id=stack.environment_id,
            permissions=["publish"],
        )
    )
    control.close()
    assert issued.secret
    pub.set_token(issued.secret)
    seen.merge(pending)
    try:
        _wait(lambda: _remaining_segments(root) == 0, 30, "the waiting files to ship")
    finally:
        assert pub.flush_and_join(10)
    assert pub.stopped_reason is None
    assert_all_shipped(seen, keys(), get, scope)


def _remaining_segments(root: Path) -> int:
    return sum(1 for _ in (root / "streams").glob("*/*/*.baml*"))
