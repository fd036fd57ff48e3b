"""The data plane's client for Boundary's workload API (mTLS + workload JWT).

One instance per process, thread-safe. It fetches a workload JWT with the client certificate
and refreshes it a minute before expiry (or once on a 401 saying it expired), sends
``X-Baml-Request-Id`` on every call (the same id across retries of one call), and retries
only transient failures: connection errors, timeouts, 429, 502, 503 and 504. Token
introspections are cached briefly, keyed by the token's hash, never by the token itself.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

import httpx
import pyarrow as pa
from pydantic import BaseModel
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from api.common.auth import hash_token
from api.common.request_id import REQUEST_ID_HEADER, current_request_id, new_request_id
from api.common.workload_identity import client_ssl_context
from api.dataplane.workload_tls import TlsMaterial
from formats import boundary_wire as w
from formats.batch_set_body import encode_batch_set

M = TypeVar("M", bound=BaseModel)
_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
_REFRESH_MARGIN = dt.timedelta(seconds=60)


class BoundaryError(Exception):
    """A non-2xx answer from Boundary, carrying its problem+json when there was one."""

    def __init__(self, status: int, problem: w.Problem | None, *, path: str) -> None:
        self.status = status
        self.problem = problem
        self.path = path
        code = problem.code if problem else "http_error"
        detail = problem.detail if problem else ""
        super().__init__(f"Boundary {path} answered {status} {code}: {detail}")

    @property
    def code(self) -> str | None:
        return self.problem.code if self.problem else None

    @property
    def retryable(self) -> bool:
        return self.status in _TRANSIENT_STATUS


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, BoundaryError):
        return exc.retryable
    return isinstance(exc, httpx.TransportError)


class _TtlCache:
    def __init__(self) -> None:
        self._data: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            if hit[0] <= time.monotonic():
                del self._data[key]
                return None
            return hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        with self._lock:
            if len(self._data) > 10_000:  # bounded: drop expired, then everything if still large
                now = time.monotonic()
                self._data = {k: v for k, v in self._data.items() if v[0] > now}
                if len(self._data) > 10_000:
                    self._data.clear()
            self._data[key] = (time.monotonic() + ttl, value)


class BoundaryClient:
    def __init__(
        self,
        workload_url: str,
        tls: TlsMaterial,
        deployment_id: str,
        cell: str,
        *,
        timeout: float = 10.0,
        attempts: int = 4,
        introspection_ttl_seconds: float = 30.0,
        inactive_ttl_seconds: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.deployment_id = deployment_id
        self.cell = cell
        self._attempts = attempts
        self._introspection_ttl = introspection_ttl_seconds
        self._inactive_ttl = inactive_ttl_seconds
        kwargs: dict[str, Any] = {"base_url": workload_url.rstrip("/"), "timeout": timeout}
        if transport is not None:
            kwargs["transport"] = transport
        else:
            kwargs["verify"] = client_ssl_context(tls.ca_cert, tls.client_cert, tls.client_key)
        self._http = httpx.Client(**kwargs)
        self._jwt: str | None = None
        self._jwt_expires: dt.datetime | None = None
        self._jwt_lock = threading.Lock()
        self._introspections = _TtlCache()
        self._snapshots = _TtlCache()
        self._schemas: dict[int, w.ProjectionSchemaDocument] = {}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BoundaryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- workload JWT ------------------------------------------------------------------------

    def workload_token(self, *, force: bool = False) -> str:
        with self._jwt_lock:
            now = dt.datetime.now(dt.UTC)
            if (
                force
                or self._jwt is None
                or self._jwt_expires is None
                or self._jwt_expires - _REFRESH_MARGIN <= now
            ):
                tok = self._call(w.WorkloadToken, "POST", "/workload-tokens", auth=False)
                if tok.deployment_id != self.deployment_id or tok.cell != self.cell:
                    raise RuntimeError(
                        f"client certificate names {tok.deployment_id}/{tok.cell}, "
                        f"configured {self.deployment_id}/{self.cell}"
                    )
                self._jwt, self._jwt_expires = tok.token, tok.expires_at
            return self._jwt

    # --- calls -------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any,
        auth: bool,
        request_id: str,
        content: bytes | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        headers = {REQUEST_ID_HEADER: request_id, **(extra_headers or {})}
        if auth:
            headers["Authorization"] = f"Bearer {self.workload_token()}"
        resp = self._http.request(method, path, json=json, content=content, headers=headers)
        if resp.status_code == 401 and auth:
            # The JWT may have expired between our check and the server's; refresh once.
            headers["Authorization"] = f"Bearer {self.workload_token(force=True)}"
            resp = self._http.request(method, path, json=json, content=content, headers=headers)
        if resp.status_code >= 400:
            problem = None
            try:
                problem = w.Problem.model_validate(resp.json())
            except ValueError:
                problem = None
            raise BoundaryError(resp.status_code, problem, path=path)
        return resp

    def _raw(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        auth: bool = True,
        content: bytes | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        request_id = current_request_id.get() or new_request_id()

        @retry(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self._attempts),
            wait=wait_random_exponential(multiplier=0.2, max=5),
            reraise=True,
        )
        def attempt() -> httpx.Response:
            return self._send(
                method,
                path,
                json=json,
                auth=auth,
                request_id=request_id,
                content=content,
                extra_headers=extra_headers,
            )

        return attempt()

    def _call(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        json: Any = None,
        auth: bool = True,
        content: bytes | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> M:
        resp = self._raw(method, path, json=json, auth=auth, content=content, extra_headers=extra_headers)
        return model.model_validate(resp.json())

    # --- API ---------------------------------------------------------------------------------

    def introspect_token(self, token: str) -> w.TokenIntrospection:
        key = hash_token(token)
        cached = self._introspections.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        result = self._call(
            w.TokenIntrospection,
            "POST",
            "/token-introspections",
            json=w.TokenIntrospectionRequest(token=token).model_dump(),
        )
        ttl = self._introspection_ttl if result.active else self._inactive_ttl
        if result.active and result.expires_at is not None:
            ttl = max(0.0, min(ttl, (result.expires_at - dt.datetime.now(dt.UTC)).total_seconds()))
        self._introspections.put(key, result, ttl)
        return result

    def active_generation(self, environment_id: str) -> w.ActiveGeneration:
        return self._call(w.ActiveGeneration, "GET", f"/environments/{environment_id}/active-generation")

    def publisher_config(self, environment_id: str) -> w.PublisherConfig:
        return self._call(w.PublisherConfig, "GET", f"/environments/{environment_id}/publisher-config")

    def projection_schema(self, catalog_version: int) -> w.ProjectionSchemaDocument:
        doc = self._schemas.get(catalog_version)
        if doc is None:  # registered catalog versions are immutable
            doc = self._call(w.ProjectionSchemaDocument, "GET", f"/projection-schemas/{catalog_version}")
            self._schemas[catalog_version] = doc
        return doc

    def query_snapshot(self, environment_id: str, catalog_version: int | None = None) -> w.QuerySnapshot:
        key = (environment_id, catalog_version)
        cached = self._snapshots.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        body = w.QuerySnapshotRequest(environment_id=environment_id, catalog_version=catalog_version)
        snap = self._call(w.QuerySnapshot, "POST", "/query-snapshots", json=body.model_dump())
        # Cache until shortly before expiry so a query never binds an expiring snapshot.
        ttl = (snap.expires_at - dt.datetime.now(dt.UTC)).total_seconds() - 30
        if ttl > 0:
            self._snapshots.put(key, snap, ttl)
        return snap

    # --- projection facts ---------------------------------------------------------------------

    def put_projection_batch(
        self, batch_id: str, headers: w.ProjectionBatchHeaders, body: bytes
    ) -> w.ProjectionBatchState:
        """PUT one batch (idempotent: a replay with the same digest returns the visible state)."""
        return self._call(
            w.ProjectionBatchState,
            "PUT",
            f"/projection-batches/{batch_id}",
            content=body,
            extra_headers=headers.http_headers(),
        )

    def put_projection_batch_set(
        self,
        batches: Sequence[tuple[str, w.ProjectionBatchHeaders, bytes]],
        *,
        encoding: Literal["binary", "json"] = "binary",
    ) -> w.ProjectionBatchSetResult:
        """POST many batches at once (``(batch_id, headers, body)`` each): every batch is checked and
        made visible or refused on its own, answered in the order given; the set as a whole is
        idempotent, so a transient failure retries it. The caller keeps the set under the
        per-request limit. ``binary`` (the default) sends one Arrow IPC stream per relation
        (``formats.batch_set_body``); ``json`` the base64 form."""
        if encoding == "json":
            payload = {
                "batches": [
                    {
                        **headers.model_dump(exclude_none=True),
                        "batch_id": batch_id,
                        "body": base64.b64encode(body).decode("ascii"),
                    }
                    for batch_id, headers, body in batches
                ]
            }
            return self._call(
                w.ProjectionBatchSetResult,
                "POST",
                "/projection-batch-sets",
                content=json.dumps(payload, separators=(",", ":")).encode(),
                extra_headers={"Content-Type": "application/json"},
            )
        encoded = encode_batch_set(batches)
        answer = self._call(
            w.ProjectionBatchSetResult,
            "POST",
            "/projection-batch-sets",
            content=encoded.body,
            extra_headers={"Content-Type": w.BATCH_SET_MEDIA_TYPE},
        )
        if len(answer.results) != len(encoded.order):
            raise RuntimeError("Boundary answered a batch set with another number of results")
        # Answers come in manifest order (grouped by relation): back to the caller's order.
        results: list[w.ProjectionBatchSetOutcome | None] = [None] * len(batches)
        for result, i in zip(answer.results, encoded.order, strict=True):
            results[i] = result
        answer.results = [r for r in results if r is not None]
        return answer

    def resident_query(
        self,
        sql: str,
        environment_id: str,
        *,
        snapshot_id: str | None = None,
        generation: int | None = None,
        catalog_version: int | None = None,
        budget: w.ResidentBudget | None = None,
    ) -> pa.Table:
        """Run the public part of a plan; the table's schema metadata carries the generation."""
        req = w.ResidentQueryRequest(
            sql=sql,
            environment_id=environment_id,
            snapshot_id=snapshot_id,
            generation=generation,
            catalog_version=catalog_version,
            budget=budget or w.ResidentBudget(),
        )
        resp = self._raw("POST", "/resident-queries", json=req.model_dump(mode="json"))
        table = pa.ipc.open_stream(pa.py_buffer(resp.content)).read_all()
        meta = table.schema.metadata or {}
        header = resp.headers.get(w.HEADER_PROJECTION_GENERATION)
        if header is None or meta.get(w.META_PROJECTION_GENERATION.encode()) != header.encode():
            raise RuntimeError("resident query answer lacks a consistent projection generation")
        return table

    def projection_erasure(
        self, environment_id: str, generation: int, root_ids: list[str], *, idempotency_key: str
    ) -> w.ProjectionErasure:
        body = w.ProjectionErasureRequest(
            environment_id=environment_id, generation=generation, root_ids=root_ids
        )
        return self._call(
            w.ProjectionErasure,
            "POST",
            "/projection-erasures",
            json=body.model_dump(mode="json"),
            extra_headers={"Idempotency-Key": idempotency_key},
        )

    def projection_fact_counts(
        self, environment_id: str, root_ids: list[str], *, generation: int | None = None
    ) -> w.ProjectionFactCounts:
        body = w.ProjectionFactCountsRequest(
            environment_id=environment_id, generation=generation, root_ids=root_ids
        )
        return self._call(
            w.ProjectionFactCounts, "POST", "/projection-fact-counts", json=body.model_dump(mode="json")
        )
