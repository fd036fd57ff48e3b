"""``baml-studio erase``: start an erasure at the gateway, follow it, print the receipt.

Exactly one selector: ``--process-euid`` (repeatable), ``--execution-id`` (repeatable) or
``--from``/``--to`` (RFC 3339). It asks for confirmation unless ``--yes``. The gateway URL and the
user token (with the ``erasure`` permission) come from the options, else
``BAML_STUDIO_CLI_GATEWAY_URL``/``BAML_STUDIO_CLI_USER_TOKEN``, else the running stack's
``stack.json``; a missing one exits 2 before any request. The Idempotency-Key is ``--key`` or
a new ULID (printed, so a retry can reuse it).
With ``--json`` the prompt and the progress go to stderr and stdout holds only the final erasure
(receipt included) as one JSON document, for scripts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from ulid import ULID

from formats.deployment_settings import ConfigurationError, require_setting
from worker.cli_control import EXIT_CONFIGURATION, cli_settings
from worker.stack.state import resolve_run_dir

console = Console()
err_console = Console(stderr=True)


class EraseError(Exception):
    pass


def _target(run_dir: Path | None, gateway_url: str | None, token: str | None) -> tuple[str, str]:
    """Flags, else ``BAML_STUDIO_CLI_GATEWAY_URL``/``_USER_TOKEN``, else the running stack's."""
    settings = cli_settings(run_dir, gateway_url=gateway_url, user_token=token)
    if not settings.gateway_url:
        raise ConfigurationError(
            f"no running stack found in {resolve_run_dir(run_dir)}: start one with `baml-studio stack up` "
            "or pass --gateway-url (BAML_STUDIO_CLI_GATEWAY_URL) and --token"
        )
    bearer = require_setting(
        settings.user_token,
        setting="user token (with the erasure permission)",
        env="BAML_STUDIO_CLI_USER_TOKEN",
        flag="--token",
        run_dir=run_dir,
    )
    return settings.gateway_url.rstrip("/"), bearer


def selector_body(
    euids: list[str], executions: list[str], start: str | None, end: str | None
) -> dict[str, Any]:
    given = sum(1 for x in (euids, executions, start or end) if x)
    if given != 1 or (bool(start) != bool(end)):
        raise EraseError("give exactly one selector: --process-euid, --execution-id, or --from with --to")
    if euids:
        return {"process_euids": euids}
    if executions:
        return {"execution_ids": executions}
    return {"time_range": {"from": start, "to": end}}


def _describe(body: dict[str, Any]) -> str:
    kind, value = next(iter(body.items()))
    if kind == "time_range":
        return f"time_range [{value['from']}, {value['to']})"
    return f"{kind} ({len(value)}: {', '.join(value[:3])}{', ...' if len(value) > 3 else ''})"


def _problem(resp: httpx.Response) -> str:
    try:
        body = resp.json()
        return f"{resp.status_code} {body.get('code')}: {body.get('detail')}"
    except ValueError:
        return f"HTTP {resp.status_code}"


def run_erasure(
    url: str,
    token: str,
    body: dict[str, Any],
    key: str,
    *,
    poll_s: float = 1.0,
    timeout_s: float = 3600.0,
    progress: Console = console,
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    with httpx.Client(base_url=url, timeout=30) as client:
        resp = client.post("/v1/erasures", json=body, headers=headers)
        if resp.status_code not in (200, 202):
            raise EraseError(_problem(resp))
        erasure = resp.json()
        progress.print(
            f"erasure [bold]{erasure['erasure_id']}[/bold] {erasure['state']} (Idempotency-Key {key})"
        )
        deadline = time.monotonic() + timeout_s
        last = None
        while erasure["state"] not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                raise EraseError(f"erasure {erasure['erasure_id']} still {erasure['state']}; check it later")
            time.sleep(poll_s)
            resp = client.get(f"/v1/erasures/{erasure['erasure_id']}", headers=headers)
            if resp.status_code != 200:
                raise EraseError(_problem(resp))
            erasure = resp.json()
            seen = (erasure["state"], erasure.get("step"), erasure.get("streams_matched"))
            if seen != last:
                progress.print(
                    f"  {erasure['state']}: step {erasure.get('step') or '-'}, streams matched "
                    f"{erasure.get('streams_matched')}, deleted {erasure.get('streams_deleted')}"
                )
                last = seen
        return dict(erasure)


def erase(
    process_euid: Annotated[
        list[str] | None, typer.Option("--process-euid", help="Stream to erase (repeatable).")
    ] = None,
    execution_id: Annotated[
        list[str] | None, typer.Option("--execution-id", help="Erase the stream holding it (repeatable).")
    ] = None,
    start: Annotated[str | None, typer.Option("--from", help="Time range start, RFC 3339.")] = None,
    end: Annotated[str | None, typer.Option("--to", help="Time range end (exclusive), RFC 3339.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    key: Annotated[str | None, typer.Option("--key", help="Idempotency-Key (default: a new ULID).")] = None,
    gateway_url: Annotated[str | None, typer.Option("--gateway-url", help="Gateway base URL.")] = None,
    token: Annotated[
        str | None, typer.Option("--token", help="User token with the erasure permission.")
    ] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Stack run directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final erasure as JSON.")] = False,
) -> None:
    """Erase whole streams (every object version, facts, Lance rows) and print the receipt."""
    try:
        body = selector_body(process_euid or [], execution_id or [], start, end)
        url, bearer = _target(run_dir, gateway_url, token)
        if not yes:
            typer.confirm(
                f"Erase every stream selected by {_describe(body)}? This cannot be undone",
                abort=True,
                err=as_json,  # keep stdout for the JSON document alone
            )
        result = run_erasure(
            url, bearer, body, key or str(ULID()), progress=err_console if as_json else console
        )
    except ConfigurationError as exc:
        err_console.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(EXIT_CONFIGURATION) from None
    except EraseError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    if as_json:
        # Plain text, not rich: a terminal-width console would wrap long lines.
        typer.echo(json.dumps(result))
    else:
        console.print(f"state: [bold]{result['state']}[/bold]")
        if result.get("receipt"):
            console.print("receipt:")
            console.print_json(json.dumps(result["receipt"]))
        if result.get("error"):
            console.print_json(json.dumps(result["error"]))
    if result["state"] != "succeeded":
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    app.command("erase")(erase)
