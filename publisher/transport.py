"""HTTP to the gateway (config, authorize) and to S3 (presigned PUT), mapped to typed outcomes.

Status handling follows the guide's tables ("The two endpoints", "The S3 PUT"). Nothing here
retries: the caller (publisher/flush.py) owns the retry policy. Presigned URLs are credentials,
so they are never logged, and the ``httpx`` logger is filtered so it cannot print them either.
"""

from __future__ import annotations

import enum
import logging
import uuid
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from formats.upload_wire import (
    AUTHORIZE_PATH,
    CONFIG_PATH,
    AuthorizeRequest,
    AuthorizeResponse,
    PublisherConfig,
)


class GatewayError(Exception):
    """Base of gateway call failures; ``status`` is the HTTP status, or None for network errors."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def label(self) -> str:
        """How the error is counted: the HTTP status, else ``network``."""
        return str(self.status) if self.status is not None else "network"


class GatewayStopped(GatewayError):
    """401, 403 or 409: the token is invalid or does not cover the scope. Stop shipping, poll config."""


class GatewayRetryable(GatewayError):
    """429, 5xx, a network error or a timeout: back off with jitter and retry."""


class GatewayRejected(GatewayError):
    """400, or a response that does not parse: a bug on one side. Drop this request until next flush."""


class GatewayRequestInvalid(GatewayRejected):
    """The request could not be sent as built (a header or URL httpx refuses): ours to fix, not the
    network's, so it is never retried as a network error."""

    @property
    def label(self) -> str:
        return str(self.status) if self.status is not None else "local"


# httpx raises these before anything leaves the host: a bad setting or a bug, never the network.
_LOCAL_ERRORS = (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)


class GatewayTooLarge(GatewayError):
    """413: too many entries, or one object above ``max_object_bytes``."""


class _DropPresignedUrls(logging.Filter):
    """httpx logs every request URL at INFO; a presigned URL is a credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any("X-Amz-Signature" in str(a) or "Signature=" in str(a) for a in args)


_HTTPX_FILTER = _DropPresignedUrls()
logging.getLogger("httpx").addFilter(_HTTPX_FILTER)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date: fall back to our own backoff


def _raise_for_gateway(response: httpx.Response, what: str) -> None:
    status = response.status_code
    if status == 200:
        return
    if status in (401, 403, 409):
        raise GatewayStopped(f"{what}: gateway answered {status}", status=status)
    if status == 413:
        raise GatewayTooLarge(f"{what}: gateway answered 413", status=status)
    if status == 429 or status >= 500:
        raise GatewayRetryable(
            f"{what}: gateway answered {status}", status=status, retry_after=_retry_after(response)
        )
    raise GatewayRejected(f"{what}: gateway answered {status}", status=status)


class GatewayClient:
    """The two publisher endpoints over one pooled httpx client."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_connections: int = 8,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._token = token
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            follow_redirects=False,
            limits=limits,
        )

    def set_token(self, token: str) -> None:
        self._token = token

    def _headers(self) -> dict[str, str]:
        headers = {"X-Baml-Request-Id": str(uuid.uuid4())}
        # No token, no Authorization header: the gateway answers 401 ("unauthorized"), where an empty
        # "Bearer " would be refused by httpx itself and look like a network error.
        if self._token.strip():
            headers["Authorization"] = f"Bearer {self._token.strip()}"
        return headers

    def get_config(self) -> PublisherConfig:
        try:
            response = self._http.get(self._base + CONFIG_PATH, headers=self._headers())
        except _LOCAL_ERRORS as exc:
            raise GatewayRequestInvalid(f"config: request not sent ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            raise GatewayRetryable(f"config: {type(exc).__name__}") from None
        _raise_for_gateway(response, "config")
        try:
            return PublisherConfig.model_validate_json(response.content)
        except ValidationError:
            raise GatewayRejected("config: response does not parse", status=200) from None

    def authorize(self, request: AuthorizeRequest) -> AuthorizeResponse:
        body = request.model_dump_json(exclude_none=True).encode()
        headers = self._headers() | {"Content-Type": "application/json"}
        try:
            response = self._http.post(self._base + AUTHORIZE_PATH, content=body, headers=headers)
        except _LOCAL_ERRORS as exc:
            raise GatewayRequestInvalid(f"authorize: request not sent ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            raise GatewayRetryable(f"authorize: {type(exc).__name__}") from None
        _raise_for_gateway(response, "authorize")
        try:
            parsed = AuthorizeResponse.model_validate_json(response.content)
        except ValidationError:
            raise GatewayRejected("authorize: response does not parse", status=200) from None
        if parsed.flush_id != request.flush_id or len(parsed.objects) != len(request.objects):
            raise GatewayRejected("authorize: response does not answer the request", status=200)
        for asked, got in zip(request.objects, parsed.objects, strict=True):
            if asked.kind != got.kind:
                raise GatewayRejected("authorize: response entries are out of order", status=200)
        return parsed

    def close(self) -> None:
        self._http.close()


class PutOutcome(enum.Enum):
    CREATED = "created"  # 200
    EXISTS = "exists"  # 412: re-authorize, expect stored
    REAUTHORIZE = "reauthorize"  # 403: URL expired or headers/body mismatch
    CHECKSUM = "checksum"  # 400: recompute, re-authorize, PUT again
    RETRY = "retry"  # 5xx, 429, connection refused: retry with backoff
    LOST = "lost"  # sent, but no answer: re-authorize, stored means it landed


@dataclass(frozen=True)
class PutResult:
    outcome: PutOutcome
    status: int | None
    retry_after: float | None = None


class S3Putter:
    """Presigned create-only PUTs, sending exactly the headers the gateway required."""

    def __init__(
        self,
        *,
        connect_timeout: float = 5.0,
        min_body_timeout: float = 30.0,
        bytes_per_second: int = 1 << 20,
        max_connections: int = 8,
    ):
        self._connect = connect_timeout
        self._min_body = min_body_timeout
        self._rate = bytes_per_second
        # One client for every PUT: kept-alive connections, as many as PUTs run side by side.
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.Client(follow_redirects=False, limits=limits)

    def body_timeout(self, size: int) -> float:
        """The guide's PUT timeout: 1 MiB per second of body, at least 30 seconds."""
        return max(self._min_body, size / self._rate)

    def put(self, url: str, headers: dict[str, str], body: bytes) -> PutResult:
        t = self.body_timeout(len(body))
        timeout = httpx.Timeout(t, connect=self._connect)
        try:
            response = self._http.put(url, content=body, headers=headers, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            return PutResult(PutOutcome.RETRY, None)
        except httpx.HTTPError:
            return PutResult(PutOutcome.LOST, None)
        status = response.status_code
        if 200 <= status < 300:
            return PutResult(PutOutcome.CREATED, status)
        if status == 412:
            return PutResult(PutOutcome.EXISTS, status)
        if status == 403:
            return PutResult(PutOutcome.REAUTHORIZE, status)
        if status == 400:
            return PutResult(PutOutcome.CHECKSUM, status)
        return PutResult(PutOutcome.RETRY, status, _retry_after(response))

    def close(self) -> None:
        self._http.close()
