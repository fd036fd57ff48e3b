"""``baml-studio stack up|down|status``: the embedded stack on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from worker.settings import StackSettings
from worker.stack.launcher import Launcher, StackError, check_not_running, part_specs
from worker.stack.report import stack_report, state_document
from worker.stack.state import StackState, load_stack_state, pid_alive, resolve_run_dir
from worker.stack.supervisor import stop_groups

stack_app = typer.Typer(help="Start, stop and inspect the embedded stack.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

RunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Run directory (env BAML_STUDIO_STACK_RUN_DIR; default ./run/stack)."),
]


def _settings(
    run_dir: Path | None, base_port: int | None = None, timeout: float | None = None
) -> StackSettings:
    overrides: dict[str, object] = {"run_dir": resolve_run_dir(run_dir)}
    if base_port is not None:
        overrides["base_port"] = base_port
    if timeout is not None:
        overrides["startup_timeout_s"] = timeout
    return StackSettings(**overrides)  # type: ignore[arg-type]


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(1)


def _no_stack(run_dir: Path) -> typer.Exit:
    return _fail(f"no stack found in {run_dir}: start one with `baml-studio stack up` or pass --run-dir")


@stack_app.command("up")
def up(
    run_dir: RunDirOption = None,
    base_port: Annotated[
        int | None,
        typer.Option(
            "--base-port", help="Lay every port out from this base (env BAML_STUDIO_STACK_BASE_PORT)."
        ),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Return once healthy; the stack keeps running.")
    ] = False,
    timeout: Annotated[float | None, typer.Option(help="Seconds to become healthy (default 60).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the state file instead of tables.")] = False,
) -> None:
    """Start the whole stack (Temporal, moto, Boundary, gateway, coordinator, worker, bridge)."""
    settings = _settings(run_dir, base_port, timeout)
    try:
        check_not_running(settings.run_dir)
    except StackError as exc:
        raise _fail(str(exc)) from None
    if detach:
        _up_detached(settings, as_json)
        return

    def show(state: StackState) -> None:
        if as_json:
            console.print_json(json.dumps(state_document(state)))
        else:
            console.print(stack_report(state))
            console.print("[green]stack healthy[/green]; Ctrl-C stops it")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        code = Launcher(settings, stop, on_ready=show).run()
    except StackError as exc:
        raise _fail(str(exc)) from None
    state = load_stack_state(settings.run_dir)
    if code:
        raise _fail(f"stack failed: {state.error if state else 'unknown'}; logs in {settings.run_dir}/logs")
    console.print("stack stopped")


def _up_detached(settings: StackSettings, as_json: bool) -> None:
    run_dir = settings.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "BAML_STUDIO_STACK_RUN_DIR": str(run_dir),
        "BAML_STUDIO_STACK_STARTUP_TIMEOUT_S": str(settings.startup_timeout_s),
    }
    if settings.base_port is not None:
        env["BAML_STUDIO_STACK_BASE_PORT"] = str(settings.base_port)
    launcher_log = run_dir / "launcher.log"
    with open(launcher_log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "worker.stack.launcher"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + settings.startup_timeout_s + 15
    while True:
        state = load_stack_state(run_dir)
        mine = state is not None and state.launcher_pid == process.pid
        if mine and state and state.status == "healthy":
            if as_json:
                console.print_json(json.dumps(state_document(state)))
            else:
                console.print(stack_report(state))
                console.print(
                    f"[green]stack healthy[/green] (launcher pid {process.pid}); stop it with "
                    "`baml-studio stack down`"
                )
            return
        code = process.poll()
        if code is not None or (mine and state and state.status == "failed"):
            reason = state.error if mine and state else f"launcher exited with code {code}"
            raise _fail(f"stack failed to start: {reason}; see {launcher_log} and {run_dir}/logs")
        if time.monotonic() > deadline:
            process.terminate()
            raise _fail(f"stack not healthy after {settings.startup_timeout_s:.0f}s; see {run_dir}/logs")
        time.sleep(0.1)


def stop_stack(run_dir: Path, timeout_s: float = 20.0) -> StackState | None:
    """Stop the stack recorded in ``run_dir``: its launcher, then any part still alive. None if no stack."""
    state = load_stack_state(run_dir)
    if state is None:
        return None
    if state.launcher_alive():
        os.kill(state.launcher_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(state.launcher_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    # Whatever the launcher could not stop (it was killed, or timed out): stop the groups directly.
    leftovers = [p.pid for p in state.parts.values() if p.pid and pid_alive(p.pid)]
    if leftovers:
        stop_groups(leftovers, 5.0)
    if pid_alive(state.launcher_pid):
        os.kill(state.launcher_pid, signal.SIGKILL)
    state = load_stack_state(run_dir) or state
    return state


@stack_app.command("down")
def down(
    run_dir: RunDirOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a clean stop before SIGKILL.")] = 20.0,
) -> None:
    """Stop the stack: SIGTERM to every process group, SIGKILL after the timeout."""
    directory = resolve_run_dir(run_dir)
    state = stop_stack(directory, timeout)
    if state is None:
        raise _no_stack(directory)
    alive = [name for name, part in state.parts.items() if part.pid and pid_alive(part.pid)]
    if alive:
        raise _fail(f"still running after stop: {', '.join(alive)}")
    console.print(f"stack in {directory} stopped")


def probe_parts(state: StackState) -> dict[str, str | None]:
    """Health of every part now: None when healthy, else the reason."""
    specs = {spec.name: spec for spec in part_specs(StackSettings(), state, lambda: None)}
    health: dict[str, str | None] = {}
    for name, part in state.parts.items():
        if not pid_alive(part.pid):
            health[name] = "process not running"
        elif name in specs:
            health[name] = specs[name].probe()
        else:
            health[name] = None
    return health


@stack_app.command("status")
def status(
    run_dir: RunDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="Print the tokens and the AWS secret in full.")
    ] = False,
) -> None:
    """Report each part: up or down, pid, URL and a live health check. Exit code 1 if any is unhealthy.

    Tokens and the AWS secret are masked (prefix and last four characters) unless --show-secrets.
    """
    directory = resolve_run_dir(run_dir)
    state = load_stack_state(directory)
    if state is None:
        raise _no_stack(directory)
    running = state.launcher_alive() and state.status in ("starting", "healthy")
    health: dict[str, str | None] = (
        probe_parts(state) if running else dict.fromkeys(state.parts, "stack not running")
    )
    healthy = running and all(reason is None for reason in health.values())
    if as_json:
        document = state_document(state, show_secrets=show_secrets)
        document["health"] = health
        document["healthy"] = healthy
        console.print_json(json.dumps(document))
    else:
        console.print(stack_report(state, health, show_secrets=show_secrets))
        console.print("[green]all parts healthy[/green]" if healthy else "[red]stack not healthy[/red]")
    if not healthy:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(stack_app, name="stack")
