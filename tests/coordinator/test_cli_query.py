"""``baml-studio query`` against a coordinator served by uvicorn (a real HTTP stream)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import typer
import uvicorn
from typer.testing import CliRunner

from api.coordinator.app import create_app
from api.coordinator.runtime import CoordinatorRuntime
from formats import query_output as qo
from worker.cli_query import register

PUBLIC = "SELECT function_name, count() AS n FROM calls_v1 GROUP BY function_name ORDER BY function_name"


@pytest.fixture(scope="module")
def coordinator_url(runtime: CoordinatorRuntime) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(runtime.settings, runtime),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        pass

    register(app)
    return app


def test_query_prints_a_table_and_the_outcome(
    coordinator_url: str, user_headers: dict[str, str], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    token = user_headers["Authorization"].removeprefix("Bearer ")
    args = ["--coordinator-url", coordinator_url, "--token", token, "--run-dir", str(tmp_path)]
    result = CliRunner().invoke(_app(), ["query", PUBLIC, *args])
    assert result.exit_code == 0, result.output
    assert "function_name" in result.output and "complete:" in result.output


def test_query_ndjson_passes_the_stream_through(
    coordinator_url: str, user_headers: dict[str, str], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    token = user_headers["Authorization"].removeprefix("Bearer ")
    args = ["--coordinator-url", coordinator_url, "--token", token, "--run-dir", str(tmp_path)]
    result = CliRunner().invoke(_app(), ["query", PUBLIC, "--ndjson", *args])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
    parsed = qo.read_query_stream(lines)
    assert parsed.outcome.status == "complete" and parsed.rows
    assert json.loads(lines[-1])["queryOutcome"]["rows"] == len(parsed.rows)


def test_query_reports_plan_errors(coordinator_url: str, user_headers: dict[str, str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    token = user_headers["Authorization"].removeprefix("Bearer ")
    args = ["--coordinator-url", coordinator_url, "--token", token, "--run-dir", str(tmp_path)]
    result = CliRunner().invoke(_app(), ["query", "DROP TABLE calls_v1", *args])
    assert result.exit_code == 1 and "statement_not_allowed" in result.output
