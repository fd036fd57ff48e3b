"""An activity waiting for a group commit, or inside one long call, heartbeats: real Temporal dev server.

In the 60-minute soak of 2026-12-05 a slow Lance commit (its own conflict retries, then the
upkeep after it) outlasted the projection activities' 30 s heartbeat timeout, and Temporal
cancelled every activity queued behind it, 256 at once; their re-tries did the same work again.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.group_commit import GroupCommit
from activities.heartbeat import beating, heartbeat

FLUSH_S = 3.0  # three times the heartbeat timeout below


def _slow_flush(key: str, items: list[int]) -> list[int]:
    time.sleep(FLUSH_S)
    return [i + 1 for i in items]


BEATING: GroupCommit[str, int, int] = GroupCommit(
    _slow_flush, interval_s=0.0, beat=heartbeat, beat_every_s=0.2
)
SILENT: GroupCommit[str, int, int] = GroupCommit(_slow_flush, interval_s=0.0)


@activity.defn(name="commit_behind_a_slow_flush")
def commit_behind_a_slow_flush(beating: bool) -> int:
    return (BEATING if beating else SILENT).submit("dataset", 41)


def _long_call() -> bool:
    time.sleep(FLUSH_S)
    return activity.in_activity()  # the call still sees its activity (its own beats reach Temporal)


@activity.defn(name="one_long_call")
def one_long_call(beat: bool) -> bool:
    """The shape of an IndexAndCompact fold: one call into Lance that runs for minutes."""
    return beating(_long_call, "folding", every_s=0.2) if beat else _long_call()


@workflow.defn(name="OneActivityAttempt")
class OneActivityAttempt:
    """One attempt of the activity named, with a heartbeat timeout a third of its wait."""

    @workflow.run
    async def run(self, activity_and_beat: tuple[str, bool]) -> Any:
        name, beat = activity_and_beat
        return await workflow.execute_activity(
            name,
            beat,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


def _run(temporal, activity_name: str, beat: bool) -> object:  # type: ignore[no-untyped-def]
    async def main() -> object:
        client = await Client.connect(temporal.address)
        tq = f"beat-{uuid.uuid4().hex[:8]}"
        with ThreadPoolExecutor(4) as pool:
            async with Worker(
                client,
                task_queue=tq,
                workflows=[OneActivityAttempt],
                activities=[commit_behind_a_slow_flush, one_long_call],
                activity_executor=pool,
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):
                return await client.execute_workflow(
                    OneActivityAttempt.run, (activity_name, beat), id=f"wait-{tq}", task_queue=tq
                )

    return asyncio.run(main())


def _heartbeat_timed_out(failed: pytest.ExceptionInfo[WorkflowFailureError]) -> bool:
    cause = failed.value.cause
    return (
        isinstance(cause, ActivityError)
        and isinstance(cause.cause, TimeoutError)
        and cause.cause.type == TimeoutType.HEARTBEAT
    )


def test_an_activity_waiting_behind_a_slow_commit_stays_alive_and_gets_its_answer(temporal) -> None:  # type: ignore[no-untyped-def]
    assert _run(temporal, "commit_behind_a_slow_flush", True) == 42


def test_without_the_beat_the_same_wait_times_out_its_heartbeat(temporal) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkflowFailureError) as failed:
        _run(temporal, "commit_behind_a_slow_flush", False)
    assert _heartbeat_timed_out(failed)


def test_an_activity_inside_one_long_call_beats_from_beside_it(temporal) -> None:  # type: ignore[no-untyped-def]
    assert _run(temporal, "one_long_call", True) is True


def test_the_same_long_call_without_beating_times_out_its_heartbeat(temporal) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkflowFailureError) as failed:
        _run(temporal, "one_long_call", False)
    assert _heartbeat_timed_out(failed)
