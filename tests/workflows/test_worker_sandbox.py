"""The deployment's workers run workflows outside Temporal's sandbox unless the setting asks for
it (the sandbox doubled the worker's CPU per ProjectMetaObject run: bench/workflow_runner.py).
The tests' history replays keep the sandbox's checks. Real Temporal dev server.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sandbox_probe import SandboxProbe
from temporalio import activity
from temporalio.client import Client

from worker.settings import TemporalWorkerSettings
from worker.temporal_worker import build_worker


@activity.defn(name="unused_probe_activity")
def _unused() -> None:  # build_worker registers workflows only beside activities
    return None


def _in_sandbox(temporal, **sandboxed: bool) -> bool:  # type: ignore[no-untyped-def]
    async def main() -> bool:
        client = await Client.connect(temporal.address)
        tq = f"sandbox-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, tq, [_unused], workflows=[SandboxProbe], **sandboxed):
            result: bool = await client.execute_workflow(SandboxProbe.run, id=f"probe-{tq}", task_queue=tq)
            return result

    return asyncio.run(main())


def test_the_deployments_worker_runs_workflows_outside_the_sandbox_by_default(temporal) -> None:  # type: ignore[no-untyped-def]
    assert TemporalWorkerSettings().workflow_sandbox is False
    assert _in_sandbox(temporal) is False


def test_the_setting_puts_them_back_in_the_sandbox(temporal) -> None:  # type: ignore[no-untyped-def]
    assert _in_sandbox(temporal, sandboxed=True) is True


@pytest.mark.parametrize("value", ["1", "true"])
def test_the_setting_reads_its_environment_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("BAML_STUDIO_WORKER_WORKFLOW_SANDBOX", value)
    assert TemporalWorkerSettings().workflow_sandbox is True
