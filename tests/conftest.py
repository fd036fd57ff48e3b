"""Suite-wide fixtures. chdb allows ONE engine path per process for the process's lifetime
(PLATFORM.md section 6), so every in-process use of chdb goes through ``chdb_path``; tests
isolate themselves by database (``chdb_database``), not by path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


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
