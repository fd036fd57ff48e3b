"""``baml-studio publish DIR``: ship a profile directory once, or continuously, and print counters.

Settings resolve option → ``BAML_PUBLISHER_*`` environment variable → the running embedded stack's
``stack.json`` (its gateway URL and publisher token) → default (docs/configuration.md). With no
token from any of them the command exits 2 before any request; the token is never printed.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from formats.deployment_settings import ConfigurationError
from publisher import Publisher, PublisherSettings

EXIT_CONFIGURATION = 2


def _print_stats(stats: dict[str, Any], console: Console) -> None:
    console.print_json(json.dumps(stats, sort_keys=True))


def publish_command(
    profile_dir: Annotated[Path, typer.Argument(help="Profile root (…/.baml/profiles-v1).")],
    gateway_url: Annotated[str | None, typer.Option(help="Gateway base URL.")] = None,
    token: Annotated[str | None, typer.Option(help="Publisher token (prefer BAML_PUBLISHER_TOKEN).")] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Embedded stack run directory (default ./run/stack)."),
    ] = None,
    continuous: Annotated[bool, typer.Option("--continuous", help="Keep shipping until Ctrl-C.")] = False,
    duration: Annotated[
        float | None, typer.Option(help="Continuous mode: stop after this many seconds.")
    ] = None,
    stats: Annotated[
        bool, typer.Option("--stats", help="Print counters and gauges as JSON at the end.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="Once: flush deadline; continuous: final flush_and_join.")
    ] = 60.0,
) -> None:
    """Ship the profile directory's closed files to the bucket through the gateway."""
    console = Console()
    overrides: dict[str, Any] = {"profile_dir": profile_dir}
    for name, value in (("gateway_url", gateway_url), ("token", token), ("stack_run_dir", run_dir)):
        if value is not None:
            overrides[name] = value
    try:
        settings = PublisherSettings(**overrides)
        settings.require_token()
    except (ConfigurationError, ValidationError) as exc:
        Console(stderr=True).print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(EXIT_CONFIGURATION) from None
    publisher = Publisher(settings)
    code = 0
    if continuous:
        stop = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
        try:
            publisher.start()
            stop.wait(duration)
        finally:
            signal.signal(signal.SIGINT, previous)
            if not publisher.flush_and_join(timeout):
                code = 1
    else:
        report = publisher.run_once(timeout)
        publisher.close()
        if report is None:
            reason = publisher.stopped_reason or "error"
            Console(stderr=True).print(f"[yellow]not shipped: {reason}; files are kept[/yellow]")
            code = 2
        else:
            Console(stderr=True).print(
                f"flush {report.flush_id}: {report.shipped} shipped, {report.stored} already stored, "
                f"{len(report.failed)} failed, {len(report.conflicts)} conflicts, "
                f"{len(report.skipped)} skipped"
            )
            code = 0 if report.ok else 1
    if stats:
        _print_stats(publisher.stats(), console)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("publish")(publish_command)
