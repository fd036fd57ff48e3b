"""A trivial workflow and activity that prove a Temporal worker polls its task queue.

``stack status`` and the launcher run it: a completed run means the server accepted the start,
a worker picked the workflow task, ran the activity and reported back.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow


@dataclass(frozen=True)
class HealthCheckInput:
    probe_id: str


@dataclass(frozen=True)
class HealthCheckResult:
    probe_id: str
    worker_identity: str


@activity.defn(name="HealthCheckActivity")
async def health_check_activity(probe: HealthCheckInput) -> HealthCheckResult:
    return HealthCheckResult(probe_id=probe.probe_id, worker_identity=f"{socket.gethostname()}:{os.getpid()}")


@workflow.defn(name="HealthCheck")
class HealthCheckWorkflow:
    @workflow.run
    async def run(self, probe: HealthCheckInput) -> HealthCheckResult:
        return await workflow.execute_activity(
            health_check_activity, probe, start_to_close_timeout=timedelta(seconds=10)
        )
