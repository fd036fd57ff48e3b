"""``baml-studio tenants ...`` and ``baml-studio tokens ...``: the operator side of the control API.

The URL and the bearer token come from ``--boundary-url``/``--token``, else
``BAML_STUDIO_CLI_BOUNDARY_URL``/``BAML_STUDIO_CLI_TOKEN``, else the running stack's
``stack.json`` (its operator token): one resolver, :class:`worker.settings.CliSettings`. A missing
URL or token exits 2 before any request. Every request carries ``X-Baml-Request-Id``; mutations carry
an ``Idempotency-Key``. Token secrets are printed once, when issued or rotated.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from formats.deployment_settings import ConfigurationError, require_setting
from worker.settings import CliSettings
from worker.stack.state import StackState, load_stack_state, resolve_run_dir

tenants_app = typer.Typer(help="Tenants in the Boundary control plane.", no_args_is_help=True)
tokens_app = typer.Typer(help="Publisher, user and operator tokens.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

RunDir = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Stack run directory holding stack.json (default ./run/stack)."),
]
BoundaryUrl = Annotated[
    str | None, typer.Option("--boundary-url", help="Control API URL (env BAML_STUDIO_CLI_BOUNDARY_URL).")
]
Token = Annotated[str | None, typer.Option("--token", help="Bearer token (env BAML_STUDIO_CLI_TOKEN).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of a table.")]


EXIT_CONFIGURATION = 2


class ControlError(Exception):
    """Something the operator must act on; the message says what to do next."""


@dataclass
class ControlTarget:
    url: str
    token: str
    stack: StackState | None
    timeout_s: float


def cli_settings(run_dir: Path | None, **flags: str | None) -> CliSettings:
    """The CLI's settings: these flags, else ``BAML_STUDIO_CLI_*``, else the running stack's stack.json."""
    given: dict[str, object] = {k: v for k, v in flags.items() if v is not None}
    if run_dir is not None:
        given["stack_run_dir"] = run_dir
    return CliSettings(**given)  # type: ignore[arg-type]


def resolve_target(run_dir: Path | None, boundary_url: str | None, token: str | None) -> ControlTarget:
    settings = cli_settings(run_dir, boundary_url=boundary_url, token=token)
    directory = resolve_run_dir(run_dir)
    if not settings.boundary_url:
        raise ConfigurationError(
            f"no running stack found in {directory}: start one with `baml-studio stack up` "
            "or pass --boundary-url (BAML_STUDIO_CLI_BOUNDARY_URL) and --token (BAML_STUDIO_CLI_TOKEN)"
        )
    bearer = require_setting(
        settings.token, setting="operator token", env="BAML_STUDIO_CLI_TOKEN", flag="--token", run_dir=run_dir
    )
    # The stack lends its dev scope (tokens issue) only when the URL is its own.
    stack = load_stack_state(directory)
    if stack is not None and stack.boundary_control_url != settings.boundary_url:
        stack = None
    return ControlTarget(settings.boundary_url.rstrip("/"), bearer, stack, settings.timeout_s)


def call(
    target: ControlTarget, method: str, path: str, body: dict[str, Any] | None = None, **params: Any
) -> Any:
    headers = {"Authorization": f"Bearer {target.token}", "X-Baml-Request-Id": uuid.uuid4().hex}
    if method == "POST":
        headers["Idempotency-Key"] = uuid.uuid4().hex
    query = {k: v for k, v in params.items() if v is not None}
    try:
        response = httpx.request(
            method, f"{target.url}{path}", json=body, params=query, headers=headers, timeout=target.timeout_s
        )
    except httpx.HTTPError as exc:
        raise ControlError(
            f"cannot reach the Boundary control API at {target.url} ({type(exc).__name__}): "
            "check `baml-studio stack status` or --boundary-url"
        ) from None
    if response.status_code >= 400:
        raise ControlError(_problem_text(response))
    return response.json()


def _problem_text(response: httpx.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return f"HTTP {response.status_code} from the control API"
    if not isinstance(problem, dict):
        return f"HTTP {response.status_code} from the control API"
    text = f"{problem.get('title') or 'error'} (HTTP {response.status_code}"
    text += f", {problem['code']})" if problem.get("code") else ")"
    if problem.get("detail"):
        text += f": {problem['detail']}"
    if isinstance(problem.get("detail"), list):  # FastAPI validation errors
        text = f"invalid request (HTTP {response.status_code}): {json.dumps(problem['detail'])}"
    if problem.get("remedy"):
        text += f"\n  what to do: {problem['remedy']}"
    if response.status_code == 401:
        text += "\n  the token was refused: pass a valid operator token with --token"
    return text


def _run(action: Any) -> None:
    try:
        action()
    except ConfigurationError as exc:
        err_console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(EXIT_CONFIGURATION) from None
    except ControlError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if row.get(c) in (None, "", []) else _fmt(row.get(c)) for c in columns))
    return table


def _fmt(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _print(data: Any, as_json: bool, title: str, columns: list[str]) -> None:
    if as_json:
        console.print_json(json.dumps(data))
        return
    rows = data["items"] if isinstance(data, dict) and "items" in data else [data]
    console.print(_table(title, rows, columns))


TENANT_COLUMNS = ["tenant_id", "name", "created_at"]
TOKEN_COLUMNS = [
    "token_id",
    "kind",
    "name",
    "display_prefix",
    "tenant_id",
    "environment_id",
    "permissions",
    "expires_at",
    "revoked_at",
]


@tenants_app.command("create")
def tenants_create(
    name: str,
    run_dir: RunDir = None,
    boundary_url: BoundaryUrl = None,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Create a tenant (operator token)."""

    def action() -> None:
        target = resolve_target(run_dir, boundary_url, token)
        _print(call(target, "POST", "/v1/tenants", {"name": name}), as_json, "tenant", TENANT_COLUMNS)

    _run(action)


@tenants_app.command("list")
def tenants_list(
    run_dir: RunDir = None, boundary_url: BoundaryUrl = None, token: Token = None, as_json: AsJson = False
) -> None:
    """List the tenants the token can see."""

    def action() -> None:
        target = resolve_target(run_dir, boundary_url, token)
        _print(call(target, "GET", "/v1/tenants"), as_json, "tenants", TENANT_COLUMNS)

    _run(action)


def _print_secret(issued: dict[str, Any], as_json: bool) -> None:
    if not as_json and issued.get("secret"):
        console.print(f"secret (shown once): [bold]{issued['secret']}[/bold]")


@tokens_app.command("issue")
def tokens_issue(
    kind: Annotated[str, typer.Option("--kind", help="publisher, user or operator.")],
    name: Annotated[str, typer.Option("--name", help="A name for the token (letters, digits, . _ -).")],
    tenant_id: Annotated[str | None, typer.Option(help="Scope; default: the stack's dev scope.")] = None,
    project_id: Annotated[str | None, typer.Option(help="Scope; default: the stack's dev scope.")] = None,
    environment_id: Annotated[str | None, typer.Option(help="Scope; default: the stack's dev scope.")] = None,
    permission: Annotated[
        list[str] | None, typer.Option("--permission", help="query, erasure, admin or publish (repeatable).")
    ] = None,
    expires_in: Annotated[int | None, typer.Option(help="Lifetime in seconds; default: no expiry.")] = None,
    run_dir: RunDir = None,
    boundary_url: BoundaryUrl = None,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Issue a token; its secret is printed once."""

    def action() -> None:
        if kind not in ("publisher", "user", "operator"):
            raise ControlError(f"--kind must be publisher, user or operator, not {kind!r}")
        target = resolve_target(run_dir, boundary_url, token)
        scope = {"tenant_id": tenant_id, "project_id": project_id, "environment_id": environment_id}
        stack = target.stack
        if kind != "operator" and not any(scope.values()) and stack is not None:
            scope = {
                "tenant_id": stack.tenant_id,
                "project_id": stack.project_id,
                "environment_id": stack.environment_id,
            }
        body: dict[str, Any] = {"kind": kind, "name": name, **{k: v for k, v in scope.items() if v}}
        if permission:
            body["permissions"] = permission
        if expires_in is not None:
            body["expires_in_seconds"] = expires_in
        issued = call(target, "POST", "/v1/tokens", body)
        _print(issued, as_json, "token", TOKEN_COLUMNS)
        _print_secret(issued, as_json)

    _run(action)


@tokens_app.command("list")
def tokens_list(
    tenant_id: Annotated[str | None, typer.Option(help="Only this tenant's tokens.")] = None,
    environment_id: Annotated[str | None, typer.Option(help="Only this environment's tokens.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind.")] = None,
    run_dir: RunDir = None,
    boundary_url: BoundaryUrl = None,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List tokens (metadata only; secrets are never shown again)."""

    def action() -> None:
        target = resolve_target(run_dir, boundary_url, token)
        data = call(
            target, "GET", "/v1/tokens", tenant_id=tenant_id, environment_id=environment_id, kind=kind
        )
        _print(data, as_json, "tokens", TOKEN_COLUMNS)

    _run(action)


@tokens_app.command("rotate")
def tokens_rotate(
    token_id: str,
    grace_seconds: Annotated[int, typer.Option(help="Seconds the old secret keeps working.")] = 0,
    run_dir: RunDir = None,
    boundary_url: BoundaryUrl = None,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Replace a token's secret; the old one stops working after the grace period."""

    def action() -> None:
        target = resolve_target(run_dir, boundary_url, token)
        rotation = call(target, "POST", f"/v1/tokens/{token_id}/rotate", {"grace_seconds": grace_seconds})
        if as_json:
            console.print_json(json.dumps(rotation))
            return
        console.print(_table("replacement", [rotation["replacement"]], TOKEN_COLUMNS))
        _print_secret(rotation["replacement"], as_json)

    _run(action)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: str,
    run_dir: RunDir = None,
    boundary_url: BoundaryUrl = None,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Revoke a token at once."""

    def action() -> None:
        target = resolve_target(run_dir, boundary_url, token)
        _print(call(target, "POST", f"/v1/tokens/{token_id}/revoke"), as_json, "revoked", TOKEN_COLUMNS)

    _run(action)


def register(app: typer.Typer) -> None:
    app.add_typer(tenants_app, name="tenants")
    app.add_typer(tokens_app, name="tokens")
