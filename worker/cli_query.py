"""``baml-studio query "SQL"`` and ``baml-studio jobs list|status|cancel|result``: the coordinator's CLI.

The coordinator URL and the user token come from ``--coordinator-url``/``--token``, else
``BAML_STUDIO_CLI_COORDINATOR_URL``/``BAML_STUDIO_CLI_USER_TOKEN``, else the running stack's
``stack.json`` (:class:`worker.settings.CliSettings`); a missing URL or token exits 2 before any
request. ``query`` prints a table (``--ndjson`` passes the stream through; ``--job`` submits a
background job, shows its progress and prints its result). A stream that ends without its
``queryOutcome`` is reported as incomplete (exit status 3). ``jobs list`` lists the jobs this CLI
submitted from this run directory (the API has no listing endpoint).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from formats import query_output as qo
from formats.deployment_settings import ConfigurationError, require_setting
from worker.cli_control import EXIT_CONFIGURATION, cli_settings
from worker.stack.state import resolve_run_dir

jobs_app = typer.Typer(help="Background query jobs.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

RunDir = Annotated[Path | None, typer.Option("--run-dir", help="Stack run directory (default ./run/stack).")]
Url = Annotated[
    str | None,
    typer.Option("--coordinator-url", help="Coordinator URL (env BAML_STUDIO_CLI_COORDINATOR_URL)."),
]
Token = Annotated[str | None, typer.Option("--token", help="User token (env BAML_STUDIO_CLI_USER_TOKEN).")]
EXIT_INCOMPLETE = 3


@dataclass
class Target:
    url: str
    token: str
    run_dir: Path


def resolve(run_dir: Path | None, url: str | None, token: str | None) -> Target:
    directory = resolve_run_dir(run_dir)
    try:
        settings = cli_settings(run_dir, coordinator_url=url, user_token=token)
        if not settings.coordinator_url:
            raise ConfigurationError(
                f"no coordinator URL: no running stack found in {directory}; start one with "
                "`baml-studio stack up` or pass --coordinator-url (BAML_STUDIO_CLI_COORDINATOR_URL)"
            )
        bearer = require_setting(
            settings.user_token,
            setting="user token",
            env="BAML_STUDIO_CLI_USER_TOKEN",
            flag="--token",
            run_dir=run_dir,
        )
    except ConfigurationError as exc:
        err_console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(EXIT_CONFIGURATION) from None
    return Target(settings.coordinator_url.rstrip("/"), bearer, directory)


def _client(t: Target) -> httpx.Client:
    return httpx.Client(base_url=t.url, headers={"Authorization": f"Bearer {t.token}"}, timeout=600)


def _problem(resp: httpx.Response) -> None:
    try:
        body = resp.json()
        err_console.print(f"[red]{resp.status_code} {body.get('code')}[/red]: {body.get('detail')}")
        if body.get("remedy"):
            err_console.print(f"remedy: {body['remedy']}")
    except ValueError:
        err_console.print(f"[red]HTTP {resp.status_code}[/red]")
    raise typer.Exit(1)


def _cell(value: Any) -> str:
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 120 else text[:117] + "..."
    return "" if value is None else str(value)


def print_result(rows: list[dict[str, Any]], outcome: qo.QueryOutcome) -> None:
    if rows:
        table = Table(show_lines=False)
        columns = list(dict.fromkeys(k for r in rows for k in r))
        for col in columns:
            table.add_column(col)
        for r in rows:
            table.add_row(*(_cell(r.get(c)) for c in columns))
        console.print(table)
    pending = outcome.pending
    line = f"{outcome.status}: {outcome.rows} rows in {outcome.elapsed_ms} ms"
    line += f", snapshot {outcome.snapshot.snapshot_id}"
    if pending.private_rows:
        line += f", {pending.private_rows} rows pending in {pending.executions} executions"
    console.print(line)
    if outcome.error is not None:
        err_console.print(f"[red]{outcome.error.code}[/red]: {outcome.error.message}")
        if outcome.error.remedy:
            err_console.print(f"remedy: {outcome.error.remedy}")


def _read_stream(lines: Any, *, ndjson: bool) -> qo.QueryResult:
    stream = qo.iter_query_stream(lines)
    rows: list[dict[str, Any]] = []
    try:
        for row in stream:
            if ndjson:
                sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                rows.append(row)
    except qo.IncompleteResultError as exc:
        err_console.print(f"[red]incomplete result[/red]: {exc.message}")
        raise typer.Exit(EXIT_INCOMPLETE) from None
    assert stream.outcome is not None
    if ndjson:
        sys.stdout.write(qo.outcome_line(stream.outcome).decode())
    return qo.QueryResult(rows, stream.outcome)


def _jobs_file(t: Target) -> Path:
    return t.run_dir / "cli-query-jobs.json"


def _remember(t: Target, job: dict[str, Any], sql: str) -> None:
    path = _jobs_file(t)
    try:
        known = json.loads(path.read_text()) if path.exists() else []
    except ValueError:
        known = []
    known = [j for j in known if j.get("job_id") != job["job_id"]]
    known.append({"job_id": job["job_id"], "sql": sql[:200], "submitted_at": time.time()})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known[-200:], indent=1))


def _fetch_result(t: Target, job_id: str, *, ndjson: bool) -> None:
    with _client(t) as c, c.stream("GET", f"/v1/query-jobs/{job_id}/result") as resp:
        if resp.status_code != 200:
            resp.read()
            _problem(resp)
        try:
            result = _read_stream(resp.iter_lines(), ndjson=ndjson)
        except httpx.HTTPError as exc:
            err_console.print(f"[red]incomplete result[/red]: {type(exc).__name__}")
            raise typer.Exit(EXIT_INCOMPLETE) from None
    if not ndjson:
        print_result(result.rows, result.outcome)


def query(
    sql: Annotated[str, typer.Argument(help="SQL over the catalog relations (ClickHouse dialect).")],
    ndjson: Annotated[bool, typer.Option("--ndjson", help="Print the NDJSON stream as it arrives.")] = False,
    job: Annotated[
        bool, typer.Option("--job", help="Run as a background job, wait, then print the result.")
    ] = False,
    wall_ms: Annotated[int | None, typer.Option("--wall-ms", help="Wall-time budget.")] = None,
    rows: Annotated[int | None, typer.Option("--rows", help="Row budget.")] = None,
    run_dir: RunDir = None,
    coordinator_url: Url = None,
    token: Token = None,
) -> None:
    """Run a query against the coordinator and print the rows and the outcome."""
    t = resolve(run_dir, coordinator_url, token)
    budget = {k: v for k, v in {"wall_ms": wall_ms, "rows": rows}.items() if v is not None}
    if job:
        with _client(t) as c:
            resp = c.post(
                "/v1/query-jobs",
                json={"sql": sql, "budget": budget},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            if resp.status_code != 202:
                _problem(resp)
            submitted = resp.json()
            _remember(t, submitted, sql)
            job_id = submitted["job_id"]
            err_console.print(f"job {job_id} accepted")
            with Progress(console=err_console, transient=True) as bar:
                task = bar.add_task("running", total=1.0)
                while True:
                    state = c.get(f"/v1/query-jobs/{job_id}")
                    if state.status_code != 200:
                        _problem(state)
                    body = state.json()
                    bar.update(
                        task,
                        completed=body["progress"],
                        description=f"{body['state']} {body['rows_so_far']} rows",
                    )
                    if body["state"] in ("succeeded", "failed", "cancelled"):
                        break
                    time.sleep(0.5)
        if body["state"] != "succeeded":
            err = body.get("error") or {}
            err_console.print(
                f"[red]job {body['state']}[/red]: {err.get('code', '')} {err.get('message', '')}"
            )
            raise typer.Exit(1)
        _fetch_result(t, job_id, ndjson=ndjson)
        return
    with _client(t) as c, c.stream("POST", "/v1/query", json={"sql": sql, "budget": budget}) as resp:
        if resp.status_code != 200:
            resp.read()
            _problem(resp)
        try:
            result = _read_stream(resp.iter_lines(), ndjson=ndjson)
        except httpx.HTTPError as exc:
            err_console.print(
                f"[red]incomplete result[/red]: the connection ended early ({type(exc).__name__})"
            )
            raise typer.Exit(EXIT_INCOMPLETE) from None
    if not ndjson:
        print_result(result.rows, result.outcome)
    if result.outcome.status == "failed":
        raise typer.Exit(1)


@jobs_app.command("list")
def jobs_list(run_dir: RunDir = None, coordinator_url: Url = None, token: Token = None) -> None:
    """Jobs submitted by this CLI from this run directory, with their current state."""
    t = resolve(run_dir, coordinator_url, token)
    path = _jobs_file(t)
    known = json.loads(path.read_text()) if path.exists() else []
    table = Table("job_id", "state", "rows", "expires_at", "sql")
    with _client(t) as c:
        for j in known:
            resp = c.get(f"/v1/query-jobs/{j['job_id']}")
            body = resp.json() if resp.status_code == 200 else {"state": "gone"}
            table.add_row(
                j["job_id"],
                body.get("state", ""),
                str(body.get("rows_so_far", "")),
                str(body.get("expires_at", "")),
                j["sql"],
            )
    console.print(table)


@jobs_app.command("status")
def jobs_status(
    job_id: str, run_dir: RunDir = None, coordinator_url: Url = None, token: Token = None
) -> None:
    """A job's state, progress, rows so far, snapshot and expiry (JSON)."""
    t = resolve(run_dir, coordinator_url, token)
    with _client(t) as c:
        resp = c.get(f"/v1/query-jobs/{job_id}")
    if resp.status_code != 200:
        _problem(resp)
    console.print_json(json.dumps(resp.json()))


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: str, run_dir: RunDir = None, coordinator_url: Url = None, token: Token = None
) -> None:
    """Cancel a queued or running job (a finished job is left as it is)."""
    t = resolve(run_dir, coordinator_url, token)
    with _client(t) as c:
        resp = c.delete(f"/v1/query-jobs/{job_id}")
    if resp.status_code != 200:
        _problem(resp)
    console.print(f"{job_id}: {resp.json()['state']}")


@jobs_app.command("result")
def jobs_result(
    job_id: str,
    ndjson: Annotated[bool, typer.Option("--ndjson", help="Print the NDJSON result.")] = False,
    run_dir: RunDir = None,
    coordinator_url: Url = None,
    token: Token = None,
) -> None:
    """Print a succeeded job's result."""
    _fetch_result(resolve(run_dir, coordinator_url, token), job_id, ndjson=ndjson)


def register(app: typer.Typer) -> None:
    app.command("query")(query)
    app.add_typer(jobs_app, name="jobs")
