"""``baml-studio inspect PATH``: decode a profile directory, one stream, or one file.

The decoding lives in :mod:`formats.inspect`; this module only prints. With ``--json``
every line is one JSON object: a bad file
(``{"bad_file": path, "reason": ..., "offset": ..., "message": ...}``), a stream
(``{"stream", "alive", "index_gaps", "orphan_roots", ...}``) or an execution (with its
``data_issues``). Bad files are also reported on stderr; the exit code is 0 even then,
because reporting them is the tool's job (``--strict`` makes it 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from formats.errors import FormatError
from formats.inspect import InspectReport, decode_file, inspect_path


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _summary(report: InspectReport, console: Console) -> None:
    table = Table(title=f"{len(report.executions)} executions")
    columns = (
        "stream",
        "execution_id",
        "status",
        "index_state",
        "spans",
        "issues",
        "data seqs",
        "duration ms",
    )
    for column in columns:
        table.add_column(column)
    for execution in report.executions:
        started, ended = execution["started_unix_ns"], execution["ended_unix_ns"]
        duration = f"{(ended - started) / 1e6:.1f}" if started is not None and ended is not None else "-"
        first, last = execution["data_first_seq"], execution["data_last_seq"]
        seqs = f"{first}..{last}" if first is not None else "-"
        table.add_row(
            execution["stream"][:8],
            execution["execution_id"][-16:],
            execution["status"],
            execution["index_state"],
            str(len(execution["spans"])),
            str(len(execution.get("data_issues", []))),
            seqs,
            duration,
        )
    console.print(table)
    counts: dict[str, int] = {}
    for execution in report.executions:
        counts[execution["status"]] = counts.get(execution["status"], 0) + 1
    console.print("status counts: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    for stream in report.streams:
        if stream["index_gaps"] or stream["orphan_roots"]:
            console.print(
                f"stream {stream['stream'][:8]}: index gaps {stream['index_gaps'] or '-'}, "
                f"{len(stream['orphan_roots'])} orphan roots"
            )


def inspect_command(
    path: Annotated[Path, typer.Argument(help="A profile directory, a stream directory, or one file.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    values: Annotated[bool, typer.Option("--values", help="Add each value's JSON rendering.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any file fails to decode.")] = False,
) -> None:
    """Decode profiler files into executions (or one file into its records)."""
    err = Console(stderr=True)
    if not path.exists():
        err.print(f"[red]no such path: {path}[/red]")
        raise typer.Exit(2)
    if path.is_file():
        try:
            decoded = decode_file(path)
        except FormatError as exc:
            print(_dump({"bad_file": str(path), **_bad(exc)}))
            err.print(f"[red]bad file[/red] {path}: {exc.reason} at offset {exc.offset}")
            raise typer.Exit(1) from None
        print(json.dumps(decoded, ensure_ascii=False, sort_keys=True, indent=None if as_json else 2))
        return
    report = inspect_path(path, values=values, issues=True)
    for bad in report.bad_files:
        err.print(f"[red]bad file[/red] {bad['bad_file']}: {bad['reason']} at offset {bad['offset']}")
    if as_json:
        out = sys.stdout
        for bad in report.bad_files:
            out.write(_dump(bad) + "\n")
        for stream in report.streams:
            out.write(_dump(stream) + "\n")
        for execution in report.executions:
            out.write(_dump(execution) + "\n")
    else:
        _summary(report, Console())
    if strict and report.bad_files:
        raise typer.Exit(1)


def _bad(exc: FormatError) -> dict[str, Any]:
    return {"reason": exc.reason, "offset": exc.offset, "message": exc.message}


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect_command)
