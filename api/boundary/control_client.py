"""A small typed client for the Boundary control API (used by ``baml-studio tenants|tokens``).

Every mutation can carry an ``Idempotency-Key``; errors raise :class:`ControlApiError` with the
problem+json body.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from api.common.idempotency import IDEMPOTENCY_HEADER
from api.common.request_id import REQUEST_ID_HEADER, new_request_id
from formats import boundary_wire as w

M = TypeVar("M", bound=BaseModel)


class ControlApiError(Exception):
    def __init__(self, status: int, problem: w.Problem | None) -> None:
        self.status = status
        self.problem = problem
        text = f"{problem.code}: {problem.detail}" if problem else "no problem body"
        remedy = f" ({problem.remedy})" if problem and problem.remedy else ""
        super().__init__(f"control API answered {status} {text}{remedy}")


class ControlClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ):
        kwargs: dict[str, Any] = {"base_url": base_url.rstrip("/"), "timeout": timeout}
        if transport is not None:
            kwargs["transport"] = transport
        self._http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> M:
        headers = {REQUEST_ID_HEADER: new_request_id()}
        if idempotency_key:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        resp = self._http.request(method, path, json=json, params=params, headers=headers)
        if resp.status_code >= 400:
            try:
                problem: w.Problem | None = w.Problem.model_validate(resp.json())
            except ValueError:
                problem = None
            raise ControlApiError(resp.status_code, problem)
        return model.model_validate(resp.json())

    # tenants, projects, environments, deployments
    def create_tenant(self, name: str, *, idempotency_key: str | None = None) -> w.Tenant:
        return self._call(
            w.Tenant, "POST", "/v1/tenants", json={"name": name}, idempotency_key=idempotency_key
        )

    def list_tenants(self) -> list[w.Tenant]:
        return self._call(w.TenantList, "GET", "/v1/tenants").items

    def create_project(self, tenant_id: str, name: str, *, idempotency_key: str | None = None) -> w.Project:
        return self._call(
            w.Project,
            "POST",
            f"/v1/tenants/{tenant_id}/projects",
            json={"name": name},
            idempotency_key=idempotency_key,
        )

    def list_projects(self, tenant_id: str) -> list[w.Project]:
        return self._call(w.ProjectList, "GET", f"/v1/tenants/{tenant_id}/projects").items

    def create_environment(
        self, project_id: str, name: str, *, idempotency_key: str | None = None
    ) -> w.Environment:
        return self._call(
            w.Environment,
            "POST",
            f"/v1/projects/{project_id}/environments",
            json={"name": name},
            idempotency_key=idempotency_key,
        )

    def list_environments(self, project_id: str) -> list[w.Environment]:
        return self._call(w.EnvironmentList, "GET", f"/v1/projects/{project_id}/environments").items

    def create_deployment(
        self, tenant_id: str, name: str, cell: str, kind: str = "byoc", *, idempotency_key: str | None = None
    ) -> w.Deployment:
        return self._call(
            w.Deployment,
            "POST",
            f"/v1/tenants/{tenant_id}/deployments",
            json={"name": name, "cell": cell, "kind": kind},
            idempotency_key=idempotency_key,
        )

    # tokens
    def issue_token(self, body: w.TokenIssue, *, idempotency_key: str | None = None) -> w.IssuedToken:
        return self._call(
            w.IssuedToken,
            "POST",
            "/v1/tokens",
            json=body.model_dump(exclude_none=True),
            idempotency_key=idempotency_key,
        )

    def list_tokens(
        self, *, tenant_id: str | None = None, environment_id: str | None = None, kind: str | None = None
    ) -> list[w.Token]:
        params = {
            k: v
            for k, v in {"tenant_id": tenant_id, "environment_id": environment_id, "kind": kind}.items()
            if v
        }
        return self._call(w.TokenList, "GET", "/v1/tokens", params=params).items

    def rotate_token(
        self, token_id: str, *, grace_seconds: int = 0, idempotency_key: str | None = None
    ) -> w.TokenRotation:
        return self._call(
            w.TokenRotation,
            "POST",
            f"/v1/tokens/{token_id}/rotate",
            json={"grace_seconds": grace_seconds},
            idempotency_key=idempotency_key,
        )

    def revoke_token(self, token_id: str) -> w.Token:
        return self._call(w.Token, "POST", f"/v1/tokens/{token_id}/revoke")

    def whoami(self) -> w.Token:
        return self._call(w.Token, "GET", "/v1/whoami")

    # environment settings
    def active_generation(self, environment_id: str) -> w.ActiveGeneration:
        return self._call(w.ActiveGeneration, "GET", f"/v1/environments/{environment_id}/active-generation")

    def set_active_generation(self, environment_id: str, generation: int) -> w.ActiveGeneration:
        return self._call(
            w.ActiveGeneration,
            "PUT",
            f"/v1/environments/{environment_id}/active-generation",
            json={"generation": generation},
        )

    def publisher_config(self, environment_id: str) -> w.PublisherConfig:
        return self._call(w.PublisherConfig, "GET", f"/v1/environments/{environment_id}/publisher-config")

    def update_publisher_config(self, environment_id: str, changes: dict[str, Any]) -> w.PublisherConfig:
        return self._call(
            w.PublisherConfig, "PATCH", f"/v1/environments/{environment_id}/publisher-config", json=changes
        )
