"""A byte pipe between a client and a server that can lose one response on purpose.

TLS passes through untouched (mTLS still authenticates end to end), so the proxy cannot read
requests. It recognises a large upload by volume instead: when the server starts answering a
connection whose client sent at least ``drop_after_upload_bytes`` since the server last spoke,
the proxy relays nothing more either way, drains the server until it has been quiet for
``quiet_s`` (TLS 1.3 session tickets can arrive just before the answer), then closes both sides;
``drops`` times in all. The server has by then handled the request (it answers after its handler
returns), so the client sees exactly a lost response.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class DropLog:
    dropped: list[int] = field(default_factory=list)  # upload sizes of the connections cut
    connections: int = 0


class DroppingProxy:
    def __init__(
        self, target: tuple[str, int], *, drop_after_upload_bytes: int, drops: int = 1, quiet_s: float = 2.0
    ) -> None:
        self.target = target
        self.quiet_s = quiet_s
        self.threshold = drop_after_upload_bytes
        self.drops_left = drops
        self.log = DropLog()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="drop-proxy", daemon=True)

    def __enter__(self) -> DroppingProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for s in list(self._open):
                _close(s)
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self.log.connections += 1
                self._open |= {client, server}
            _Pair(self, client, server).start()

    def _take_drop(self, uploaded: int) -> bool:
        with self._lock:
            if self.drops_left > 0 and uploaded >= self.threshold:
                self.drops_left -= 1
                self.log.dropped.append(uploaded)
                return True
            return False

    def _forget(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open -= set(socks)


class _Pair:
    """One client connection: two pumps and the bytes the client sent since the server spoke."""

    def __init__(self, proxy: DroppingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy, self.client, self.server = proxy, client, server
        self.uploaded = 0
        self.lock = threading.Lock()
        self.cut = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def _up(self) -> None:
        while data := _recv(self.client):
            if self.cut.is_set():
                break
            with self.lock:
                self.uploaded += len(data)
            if not _send(self.server, data):
                break
        if not self.cut.is_set():
            self._shut(self.server)

    def _down(self) -> None:
        while data := _recv(self.server):
            with self.lock:
                uploaded, self.uploaded = self.uploaded, 0
            if self.proxy._take_drop(uploaded):
                self.cut.set()  # lose this answer: relay nothing, let the server finish, close
                self._drain()
                break
            if not _send(self.client, data):
                break
        _close(self.client)
        _close(self.server)
        self.proxy._forget(self.client, self.server)

    def _drain(self) -> None:
        self.server.settimeout(self.proxy.quiet_s)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if not self.server.recv(65536):
                    return
            except OSError:  # quiet for quiet_s (timeout) or closed
                return

    def _shut(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
    except OSError:
        return False
    return True


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
