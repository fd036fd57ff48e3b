"""The console script ends without the interpreter's teardown (``worker.cli.main``), so it must
still give the command's own exit status, its whole output, and run the exit handlers."""

from __future__ import annotations

import subprocess
import sys

MAIN = "import sys; from worker.cli import main; sys.argv[0] = 'baml-studio'; main()"


def _run(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"{prelude}; {MAIN}" if prelude else MAIN, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_command_that_succeeds_exits_0_with_its_whole_output_and_the_exit_handlers_run() -> None:
    done = _run("--help", prelude="import atexit; atexit.register(print, 'exit handler ran')")
    assert done.returncode == 0, done.stderr
    assert "stack" in done.stdout and "query" in done.stdout
    assert done.stdout.rstrip().endswith("exit handler ran")


def test_a_usage_error_keeps_its_status_and_message() -> None:
    done = _run("no-such-command")
    assert done.returncode == 2
    assert "No such command 'no-such-command'" in done.stderr


def test_an_exit_with_a_message_prints_it_and_exits_1() -> None:
    exits = "import typer; typer.Typer.__call__ = lambda *a, **k: sys.exit('gone: why')"
    done = _run("--help", prelude=exits)
    assert done.returncode == 1
    assert done.stderr.strip() == "gone: why"
