"""The ``baml-studio`` console script: one Typer app, one sub-app per operator area.

Each area lives in its own module (``worker/cli_<area>.py``) exposing ``app`` (a
``typer.Typer``) or ``command`` (a function); this module only wires them together.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys

try:
    import typer
except ModuleNotFoundError:  # a base install: the publisher library without the services
    sys.exit(
        "baml-studio: the operator CLI needs the server extras; install them with "
        "pip install 'baml-studio-backend[server,stack]' (the publisher library needs none)"
    )

app = typer.Typer(
    name="baml-studio",
    help="Operate the BAML Studio evidence backend.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Each module exposes ``register(app: typer.Typer) -> None``.
_AREAS = [
    "worker.cli_stack",  # stack up|down|status
    "worker.cli_control",  # tenants, tokens
    "worker.cli_synth",  # synth
    "worker.cli_inspect",  # inspect
    "worker.cli_publish",  # publish
    "worker.cli_query",  # query, jobs
    "worker.cli_erase",  # erase
    "worker.cli_ops",  # replay, rebuild, quarantine, status
    "worker.cli_demo",  # demo (the README's first command)
]


def _register() -> None:
    for module_name in _AREAS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # area not built yet
            raise
        module.register(app)


_register()


def main() -> None:
    """Run the app, then leave without the interpreter's teardown.

    The Temporal client's Rust runtime keeps threads that take the GIL from outside Python; one
    that does so while the interpreter finalizes makes CPython abort the process (SIGABRT, exit
    status -6) after the command has succeeded and printed its answer
    (temporalio/sdk-python#300; seen here once on ``stack status --json`` in the full suite). So
    once the command is done, the exit handlers run, the standard streams are flushed, and the
    process ends there.
    """
    try:
        app()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe or stream: nothing more can be written to it
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
