"""Real servers for publisher tests: moto (S3 over HTTP), the real gateway app, and a fault proxy.

The gateway is ``api.gateway.app.create_app`` with its real routes, authorize logic and S3 HEADs
against moto. Only Boundary is replaced: the token check and the environment's config come from
:class:`GatewayControl` (a revoked token answers 401 exactly as ``publisher_auth`` would), because
a Boundary control plane with mTLS is out of scope for a publisher test.

:class:`FaultProxy` is a real HTTP proxy in front of S3 (presigned URLs point at it) or the gateway.
Rules inject network behaviour: a status instead of forwarding, a dropped response after the
request reached the server, or a PUT forwarded twice (the second gets S3's real 412).
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import uvicorn
from moto.server import ThreadedMotoServer

from api.common.errors import Unauthenticated
from api.gateway.app import create_app
from api.gateway.deps import get_publisher
from api.gateway.publisher_auth import PublisherIdentity
from api.gateway.runtime import GatewayRuntime
from api.gateway.settings import GatewaySettings
from formats import cas
from formats.data_segment import DataSegment, encode_data_segment
from formats.meta_segment import MetaSegment, encode_meta_segment
from formats.object_keys import Scope
from formats.profile_store import ProfileStore
from formats.upload_wire import PublisherConfig

BUCKET = "baml-evidence"
SCOPE = Scope("t1", "p1", "e1")
TOKEN = "bst_pub_test_token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"port {port} did not open")


class Moto:
    def __init__(self) -> None:
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        wait_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.s3 = boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def fresh_bucket(self, name: str) -> str:
        self.s3.create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        out: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(out)

    def get(self, bucket: str, key: str) -> bytes:
        return bytes(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def stop(self) -> None:
        self.server.stop()


@dataclass
class GatewayControl:
    """What Boundary would answer: whether the token is valid and the environment's config."""

    config: PublisherConfig = field(default_factory=PublisherConfig)
    revoked: bool = False
    config_calls: int = 0


class _TestRuntime(GatewayRuntime):
    def __init__(self, settings: GatewaySettings, control: GatewayControl) -> None:
        super().__init__(settings)
        self.control = control

    def config_for(self, environment_id: str) -> PublisherConfig:
        self.control.config_calls += 1
        return self.control.config


class Gateway:
    """The real gateway app on a free port, in a thread, signing URLs for ``presign_url``."""

    def __init__(self, moto: Moto, bucket: str, *, presign_url: str | None = None) -> None:
        self.control = GatewayControl()
        settings = GatewaySettings(
            s3_endpoint_url=moto.url,
            s3_presign_endpoint_url=presign_url,
            bucket=bucket,
            rate_limit_per_second=10_000,
            rate_limit_burst=10_000,
        )
        self.runtime = _TestRuntime(settings, self.control)
        app = create_app(settings, self.runtime)
        control = self.control

        def publisher_override() -> PublisherIdentity:
            if control.revoked:
                raise Unauthenticated("the token is not active")
            return PublisherIdentity(token_id="tok1", scope=SCOPE)

        app.dependency_overrides[get_publisher] = publisher_override
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="test-gateway", daemon=True)
        self.thread.start()
        wait_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.runtime.close()


@dataclass
class Rule:
    """Match ``method`` and a substring of the path; act ``times`` times."""

    method: str
    path_contains: str
    action: str  # "status:<code>", "drop" (forward, then no response), "twice" (forward twice)
    times: int = 1
    hits: int = 0


class FaultProxy:
    """A real HTTP proxy to ``target``; rules inject faults, everything else is forwarded as is."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target_host = parts.hostname or "127.0.0.1"
        self.target_port = parts.port or 80
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str, int | None]] = []  # (method, path, status)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                rule = proxy._match(self.command, self.path)
                if rule is not None and rule.action.startswith("status:"):
                    code = int(rule.action.split(":", 1)[1])
                    payload = b'{"title":"injected"}'
                    self.send_response(code)
                    if code in (429, 503):
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    proxy._record(self.command, self.path, code)
                    return
                status, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                if rule is not None and rule.action == "twice":
                    status, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                if rule is not None and rule.action == "drop":
                    proxy._record(self.command, self.path, None)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in (
                        "transfer-encoding",
                        "connection",
                        "content-length",
                        "date",
                        "server",
                    ):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                proxy._record(self.command, self.path, status)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)
        self.thread.start()

    def add(self, method: str, path_contains: str, action: str, times: int = 1) -> Rule:
        rule = Rule(method, path_contains, action, times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self.seen.clear()

    def _match(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.method == method and rule.path_contains in path and rule.hits < rule.times:
                    rule.hits += 1
                    return rule
        return None

    def _record(self, method: str, path: str, status: int | None) -> None:
        with self._lock:
            self.seen.append((method, path.split("?", 1)[0], status))

    def _forward(
        self, method: str, path: str, headers: object, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.target_host, self.target_port, timeout=30)
        try:
            out = {k: v for k, v in headers.items() if k.lower() not in ("connection",)}  # type: ignore[attr-defined]
            conn.request(method, path, body=body if body else None, headers=out)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- profile fixtures -------------------------------------------------------------------------------


EUID = "0192f0c1a2b34c5d8e9f00112233aabb"


def meta_bytes(euid: str, seq: int, data_high_water: int) -> bytes:
    return encode_meta_segment(MetaSegment(seq, bytes.fromhex(euid), data_high_water, ()))


def data_bytes(euid: str, seq: int) -> bytes:
    return encode_data_segment(DataSegment(seq, bytes.fromhex(euid), ()))


def value_file(body: bytes, codec: int = cas.CODEC_VALUE) -> bytes:
    return cas.encode_cas_object(codec, body)


def write_stream(root: Path, euid: str, *, data: int, meta: int, values: list[bytes] = ()) -> list[Path]:  # type: ignore[assignment]
    """Closed segments 1..data and 1..meta (meta i names data through min(i, data)), plus CAS files."""
    store = ProfileStore(root)
    paths: list[Path] = []
    with store.open_stream(euid) as w:
        for v in values:
            paths.append(w.put_cas(v))
        for s in range(1, data + 1):
            w.write_data(s, data_bytes(euid, s))
        for s in range(1, meta + 1):
            w.write_meta(s, meta_bytes(euid, s, min(s, data)))
    return paths


def corrupt(path: Path) -> bytes:
    """Flip one payload byte; return the original bytes so a test can restore them."""
    original = path.read_bytes()
    raw = bytearray(original)
    raw[len(raw) // 2] ^= 0xFF
    os.chmod(path, 0o644)
    path.write_bytes(bytes(raw))
    return original


def iter_evidence(keys: list[str], kind: str) -> Iterator[str]:
    suffix = {"meta": ".bamlmeta.zst", "data": ".bamldata.zst", "pack": ".bamlpack.zst"}[kind]
    return (k for k in keys if k.endswith(suffix))
