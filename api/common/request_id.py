"""``X-Baml-Request-Id``: accept the caller's id, or make one, and echo it on every response.

A pure ASGI middleware (not ``BaseHTTPMiddleware``) so streaming responses pass through
untouched. The id lives in ``scope["state"]`` and in a context variable for log records.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from ulid import ULID

REQUEST_ID_HEADER = "X-Baml-Request-Id"
_HEADER_BYTES = REQUEST_ID_HEADER.lower().encode()
# Printable token characters only: the id is logged and echoed, so it must not carry
# whitespace, quotes or control bytes, and it is bounded.
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")

current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "baml_request_id", default=None
)


def new_request_id() -> str:
    return str(ULID())


def valid_request_id(value: str) -> bool:
    return bool(_VALID.match(value))


def request_id_of(request: Request) -> str | None:
    state: dict[str, Any] = request.scope.get("state") or {}
    rid = state.get("request_id")
    return rid if isinstance(rid, str) else current_request_id.get()


class RequestIdMiddleware:
    """Adopt a valid caller id or generate one; a malformed id is replaced, not rejected."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        rid: str | None = None
        for name, value in scope.get("headers", []):
            if name == _HEADER_BYTES:
                candidate = value.decode("latin-1")
                if valid_request_id(candidate):
                    rid = candidate
                break
        if rid is None:
            rid = new_request_id()
        scope.setdefault("state", {})["request_id"] = rid
        token = current_request_id.set(rid)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != _HEADER_BYTES]
                headers.append((_HEADER_BYTES, rid.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            current_request_id.reset(token)
