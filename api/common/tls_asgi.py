"""Expose the verified TLS client certificate to the ASGI app (the ASGI ``tls`` extension).

uvicorn verifies client certificates (``ssl_cert_reqs=CERT_REQUIRED``) but does not pass the
peer certificate into the request scope. This protocol subclass reads it from the TLS
connection once per connection and adds ``scope["extensions"]["tls"]["client_cert_chain"]``
(a list with the PEM leaf), the shape the ASGI TLS extension specifies.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol


def client_cert_pem(scope: Scope) -> str | None:
    tls = (scope.get("extensions") or {}).get("tls") or {}
    chain = tls.get("client_cert_chain") or []
    return chain[0] if chain else None


class _WithTlsExtension:
    def __init__(self, app: ASGIApp, tls: dict[str, Any]) -> None:
        self.app = app
        self.tls = tls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope.setdefault("extensions", {})["tls"] = self.tls
        await self.app(scope, receive, send)


class ClientCertH11Protocol(H11Protocol):
    """``uvicorn.Config(http=ClientCertH11Protocol, ...)``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object: ssl.SSLObject | None = transport.get_extra_info("ssl_object")
        chain: list[str] = []
        if ssl_object is not None:
            der = ssl_object.getpeercert(binary_form=True)
            if der:
                chain.append(ssl.DER_cert_to_PEM_cert(der))
        tls = {
            "client_cert_chain": chain,
            "tls_version": None,
            "cipher_suite": None,
            "client_cert_name": None,
            "client_cert_error": None,
            "server_cert": None,
        }
        self.app = _WithTlsExtension(self.app, tls)  # type: ignore[assignment]
