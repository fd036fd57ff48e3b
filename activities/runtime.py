"""Builds the projection activities' clients once per worker process from settings.

The worker (worker/temporal_worker.py) takes the deployment :class:`Identity` from
:class:`activities.settings.ProjectionSettings` (variables, else the running stack's ``stack.json``,
through the one resolver) and passes it in; :func:`build_projection_activities`
returns None (and says why) when the client certificate is missing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.fact_sink import fact_sink
from activities.heartbeat import heartbeat
from activities.projection_activities import ProjectionActivities
from activities.settings import ProjectionSettings
from api.dataplane.aws import object_store_client
from api.dataplane.lance_store import LanceStore
from api.dataplane.workload_tls import ClientTls
from formats.contracts import projection as c

log = logging.getLogger("baml_studio.projection")


@dataclass(frozen=True)
class Identity:
    deployment_id: str
    cell: str
    tenant_id: str
    environments: tuple[tuple[str, str], ...]  # (project_id, environment_id) the schedules cover
    queue_url: str | None
    control_url: str | None
    operator_token: SecretStr | None  # a SecretStr so that no repr or log line shows it


class GenerationSwitch:
    """The rebuild's last step: set the environment's active generation via the control API.

    The workload identity cannot change the generation (a control-plane decision), so this
    activity holds an operator (or environment admin) token from settings.
    """

    def __init__(self, control_url: str | None, token: SecretStr | None) -> None:
        self.control_url = control_url
        self.token = token

    @activity.defn(name="switch_generation")
    def switch_generation(self, inp: c.SwitchGenerationInput) -> c.SwitchGenerationResult:
        if not self.control_url or not self.token:
            raise ApplicationError(
                "no operator credentials configured for the generation switch",
                type="NoOperatorCredentials",
                non_retryable=True,
            )
        resp = httpx.put(
            f"{self.control_url.rstrip('/')}/v1/environments/{inp.environment_id}/active-generation",
            json={"generation": inp.generation},
            headers={"Authorization": f"Bearer {self.token.get_secret_value()}"},
            timeout=30,
        )
        if resp.status_code >= 400:
            raise ApplicationError(
                f"generation switch answered {resp.status_code}",
                type="GenerationSwitchFailed",
                non_retryable=resp.status_code < 500,
            )
        return c.SwitchGenerationResult(inp.environment_id, inp.generation, True)


def build_projection_activities(
    ws: Any, ps: ProjectionSettings, identity: Identity
) -> tuple[ProjectionActivities, GenerationSwitch] | None:
    """``ws`` is a worker.settings.TemporalWorkerSettings (S3, bucket, Boundary URL, TLS dir)."""
    from api.dataplane.boundary_client import BoundaryClient

    tls = ClientTls.in_dir(Path(ws.tls_dir), identity.deployment_id)
    if not tls.client_cert.exists():
        log.warning("client certificate %s missing: projection activities not registered", tls.client_cert)
        return None
    client = BoundaryClient(ws.boundary_workload_url, tls, identity.deployment_id, identity.cell)
    lance = LanceStore.in_bucket(ws.bucket, ws, **ps.lance_store_options())
    acts = ProjectionActivities(
        s3=object_store_client(ws),
        bucket=ws.bucket,
        lance=lance,
        sink=fact_sink(client, beat=partial(heartbeat, "batches")),
        settings=ps,
        tenant_id=identity.tenant_id,
        sqs=object_store_client(ws, "sqs"),
        queue_url=identity.queue_url,
    )
    return acts, GenerationSwitch(identity.control_url, identity.operator_token)
