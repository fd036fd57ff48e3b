"""Workload API: exchange a verified client certificate for a short-lived workload JWT."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.boundary.deps import Peer, Runtime, resolve_deployment
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(
    prefix="/workload-tokens", tags=["workload identity"], responses=problem_responses(401, 403)
)


@router.post(
    "",
    operation_id="createWorkloadToken",
    status_code=status.HTTP_201_CREATED,
    response_model=w.WorkloadToken,
)
def create_workload_token(peer: Peer, runtime: Runtime) -> w.WorkloadToken:
    caller = resolve_deployment(runtime, peer.deployment_id, peer.cell)
    assert runtime.signer is not None
    token, expires_at = runtime.signer.issue(peer)
    return w.WorkloadToken(
        token=token,
        expires_at=expires_at,
        deployment_id=caller.deployment_id,
        cell=caller.cell,
        tenant_id=caller.tenant_id,
    )
