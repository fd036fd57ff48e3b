"""One domain error family for every HTTP service, rendered as ``application/problem+json``.

Contract: a handler raises an :class:`ApiError` subclass (or lets FastAPI raise a validation
error); :func:`install_error_handlers` turns every failure into the RFC 9457 body that
DESIGN.md section 6 fixes: ``type``, ``title``, ``status``, ``detail``, ``code``,
``request_id``, ``retryable`` and ``remedy``. Details never carry values: they name fields,
identifiers and states only.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.common.request_id import request_id_of

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://docs.boundaryml.com/studio/problems/"

_log = logging.getLogger(__name__)


class ApiError(Exception):
    """Base of every error a service reports to its caller."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    title: ClassVar[str] = "Internal error"
    retryable: ClassVar[bool] = False

    def __init__(self, detail: str, *, remedy: str | None = None, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.remedy = remedy
        self._code = code

    @property
    def error_code(self) -> str:
        return self._code or self.code

    def headers(self) -> dict[str, str]:
        return {}


class BadRequest(ApiError):
    status = 400
    code = "bad_request"
    title = "Bad request"


class Unauthenticated(ApiError):
    status = 401
    code = "unauthenticated"
    title = "Authentication required"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="baml"'}


class Forbidden(ApiError):
    status = 403
    code = "forbidden"
    title = "Not permitted"


class NotFound(ApiError):
    status = 404
    code = "not_found"
    title = "Not found"


class Conflict(ApiError):
    status = 409
    code = "conflict"
    title = "Conflict"


class IdempotencyConflict(Conflict):
    code = "idempotency_key_reused"
    title = "Idempotency key reused with a different request"


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload_too_large"
    title = "Payload too large"


class Unprocessable(ApiError):
    status = 422
    code = "invalid_request"
    title = "Invalid request"


class TooManyRequests(ApiError):
    status = 429
    code = "rate_limited"
    title = "Too many requests"
    retryable = True


class ServiceUnavailable(ApiError):
    status = 503
    code = "unavailable"
    title = "Service unavailable"
    retryable = True


def problem_body(
    *,
    status: int,
    code: str,
    title: str,
    detail: str,
    request_id: str | None,
    retryable: bool,
    remedy: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "request_id": request_id,
        "retryable": retryable,
        "remedy": remedy,
    }
    if extra:
        body.update(extra)
    return body


def problem_response(request: Request, err: ApiError) -> JSONResponse:
    body = problem_body(
        status=err.status,
        code=err.error_code,
        title=err.title,
        detail=err.detail,
        request_id=request_id_of(request),
        retryable=err.retryable,
        remedy=err.remedy,
    )
    return JSONResponse(body, status_code=err.status, media_type=PROBLEM_MEDIA_TYPE, headers=err.headers())


async def _api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return problem_response(request, exc)


async def _validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # Name the fields that failed, never echo the submitted input (it may hold values).
    problems = []
    for item in exc.errors():
        loc = ".".join(str(part) for part in item.get("loc", ()))
        problems.append(f"{loc}: {item.get('msg', 'invalid')}")
    err = Unprocessable("; ".join(problems) or "request failed validation", remedy="Fix the named fields.")
    return problem_response(request, err)


_HTTP_CODES = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: Unprocessable,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


async def _http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    cls = _HTTP_CODES.get(exc.status_code)
    if cls is None:
        body = problem_body(
            status=exc.status_code,
            code="http_error" if exc.status_code != 405 else "method_not_allowed",
            title="HTTP error",
            detail=str(exc.detail),
            request_id=request_id_of(request),
            retryable=exc.status_code >= 500,
        )
        return JSONResponse(body, status_code=exc.status_code, media_type=PROBLEM_MEDIA_TYPE)
    return problem_response(request, cls(str(exc.detail)))


async def _unhandled_handler(request: Request, exc: Exception) -> JSONResponse:
    # Log the type and request id only: the message may carry input text.
    _log.error("unhandled %s request_id=%s", type(exc).__name__, request_id_of(request))
    err = ApiError("the service failed while handling the request", remedy="Retry; report the request_id.")
    return problem_response(request, err)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(StarletteHTTPException, _http_exception_handler)
    app.add_exception_handler(Exception, _unhandled_handler)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting problem bodies for the given statuses."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        cls = _HTTP_CODES.get(status, ApiError)
        out[status] = {
            "description": cls.title,
            "content": {
                PROBLEM_MEDIA_TYPE: {
                    "schema": {"$ref": "#/components/schemas/Problem"},
                    "example": problem_body(
                        status=status,
                        code=cls.code,
                        title=cls.title,
                        detail="what went wrong, naming fields and identifiers only",
                        request_id="01JD4Z8Q6W3V6J5X9T2N8K7M4C",
                        retryable=cls.retryable,
                        remedy="what the caller can do",
                    ),
                }
            },
        }
    return out
