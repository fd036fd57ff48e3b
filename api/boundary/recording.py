"""Test-only request recorder: every request Boundary receives, appended to a JSON-lines file.

Enabled by ``BAML_STUDIO_BOUNDARY_RECORD_REQUESTS_PATH`` (unset in every real deployment). The
privacy conformance test (tests/e2e/test_e2e_projection_conformance.py) reads the file to prove
that no value crossed into Boundary: it must see exactly the bytes the apps see after TLS, so
this is a pure ASGI middleware outermost on both apps. ``Authorization`` is dropped (a bearer
token is a secret, not evidence); everything else (method, path, query, headers, body) is kept.

One line per request: ``{"app", "method", "path", "query", "headers": [[name, value]...],
"body_b64"}``. Lines are written whole under a lock with one ``write`` each, so the two apps
(one process, one event loop, handlers on threads) never interleave.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_DROPPED_HEADERS = frozenset({b"authorization"})
_lock = threading.Lock()


def _record_line(app_name: str, scope: Scope, body: bytes) -> str:
    headers = [
        [name.decode("latin-1"), value.decode("latin-1")]
        for name, value in scope.get("headers", [])
        if name.lower() not in _DROPPED_HEADERS
    ]
    record = {
        "app": app_name,
        "method": scope.get("method", ""),
        "path": scope.get("path", ""),
        "query": scope.get("query_string", b"").decode("latin-1"),
        "headers": headers,
        "body_b64": base64.b64encode(body).decode("ascii"),
    }
    return json.dumps(record, separators=(",", ":")) + "\n"


class RequestRecorder:
    """Reads the whole body, appends the record, then replays the body to the app."""

    def __init__(self, app: ASGIApp, path: Path, app_name: str) -> None:
        self.app = app
        self.path = path
        self.app_name = app_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away before sending the body: nothing was received
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        line = _record_line(self.app_name, scope, body)
        with _lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The recorded requests in arrival order, each with its body decoded to ``body`` (bytes)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as src:
        for line in src:
            if line.strip():
                record = json.loads(line)
                record["body"] = base64.b64decode(record.pop("body_b64"))
                yield record
