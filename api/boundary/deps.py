"""FastAPI dependencies: the runtime, the authenticated caller, idempotency context."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Header, Request

from api.boundary.facts.store import FactStore
from api.boundary.metastore import IdempotencyContext, Metastore, permissions_of
from api.boundary.policy import Principal
from api.boundary.settings import BoundarySettings
from api.common.auth import TokenKind, bearer_token, token_kind
from api.common.errors import Forbidden, Unauthenticated
from api.common.idempotency import IDEMPOTENCY_HEADER, request_digest, validate_key
from api.common.tls_asgi import client_cert_pem
from api.common.workload_identity import CertificateVerifier, WorkloadJwtSigner, WorkloadPeer


@dataclass
class BoundaryRuntime:
    settings: BoundarySettings
    metastore: Metastore
    verifier: CertificateVerifier | None = None
    signer: WorkloadJwtSigner | None = None
    facts: FactStore | None = None
    _facts_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fact_store(self) -> FactStore:
        """Opened on first use: chdb allows one engine path per process, so nothing touches it
        until a fact route (or the server start) needs it."""
        with self._facts_lock:
            if self.facts is None:
                self.facts = FactStore.open(
                    url=self.settings.resolved_clickhouse_url(),
                    path=self.settings.resolved_clickhouse_path(),
                    database=self.settings.clickhouse_database,
                    flush_interval_s=self.settings.fact_flush_interval_s,
                    flush_rows=self.settings.fact_flush_rows,
                )
            return self.facts


def get_runtime(request: Request) -> BoundaryRuntime:
    runtime: BoundaryRuntime = request.app.state.runtime
    return runtime


Runtime = Annotated[BoundaryRuntime, Depends(get_runtime)]


def get_principal(
    runtime: Runtime, authorization: Annotated[str | None, Header(include_in_schema=False)] = None
) -> Principal:
    token = bearer_token(authorization)
    if token_kind(token) is TokenKind.PUBLISHER:
        raise Forbidden(
            "publisher tokens call only the data-plane gateway",
            code="token_kind_not_allowed",
            remedy="Use a Boundary user or operator token for the control API.",
        )
    row = runtime.metastore.authenticate(token)
    if row is None:
        raise Unauthenticated(
            "token is unknown, expired or revoked",
            code="token_inactive",
            remedy="Issue or rotate a token with the control API.",
        )
    return Principal(
        token_id=row.id,
        kind=TokenKind(row.kind),
        tenant_id=row.tenant_id,
        project_id=row.project_id,
        environment_id=row.environment_id,
        permissions=frozenset(permissions_of(row)),
    )


Caller = Annotated[Principal, Depends(get_principal)]


def idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="Repeat a mutation safely: the same key and body return the same resource.",
        ),
    ] = None,
) -> str | None:
    return validate_key(idempotency_key)


IdemKey = Annotated[str | None, Depends(idempotency_key)]


def idem_context(
    caller_scope: str, key: str | None, operation: str, body: object
) -> IdempotencyContext | None:
    if key is None:
        return None
    method, _, route = operation.partition(" ")
    return IdempotencyContext(
        caller_scope=caller_scope,
        operation=operation,
        key=key,
        request_digest=request_digest(method, route, body),  # type: ignore[arg-type]
    )


# --- workload identity ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadCaller:
    deployment_id: str
    cell: str
    tenant_id: str


def get_workload_peer(request: Request, runtime: Runtime) -> WorkloadPeer:
    if runtime.verifier is None:
        raise Unauthenticated("workload identity is not configured on this listener", code="mtls_unavailable")
    return runtime.verifier.verify(client_cert_pem(request.scope))


Peer = Annotated[WorkloadPeer, Depends(get_workload_peer)]


def resolve_deployment(runtime: BoundaryRuntime, deployment_id: str, cell: str) -> WorkloadCaller:
    dep = runtime.metastore.find_deployment(deployment_id)
    if dep is None or dep.cell != cell:
        raise Forbidden(
            "the certificate's deployment and cell are not registered together",
            code="deployment_unknown",
            remedy="Register the deployment with the control API and issue its certificate for its cell.",
        )
    return WorkloadCaller(deployment_id=dep.id, cell=dep.cell, tenant_id=dep.tenant_id)


def get_workload_caller(
    peer: Peer,
    runtime: Runtime,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> WorkloadCaller:
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthenticated(
            "workload calls need a workload JWT",
            code="workload_token_missing",
            remedy="POST /workload-tokens with the client certificate, then send the JWT as a Bearer token.",
        )
    assert runtime.signer is not None
    claims = runtime.signer.verify(authorization.split(" ", 1)[1].strip())
    if (claims.deployment_id, claims.cell, claims.thumbprint) != (
        peer.deployment_id,
        peer.cell,
        peer.thumbprint,
    ):
        raise Unauthenticated(
            "workload JWT was issued to a different certificate or deployment", code="workload_token_mismatch"
        )
    return resolve_deployment(runtime, peer.deployment_id, peer.cell)


Workload = Annotated[WorkloadCaller, Depends(get_workload_caller)]
