"""The packages type-check and lint clean: CI runs what `./dev lint` runs, so a regression fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PACKAGES = ["formats", "publisher", "api", "activities", "workflows", "worker"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_is_clean_on_every_package() -> None:
    done = _run(str(BIN / "mypy"), *PACKAGES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")


def test_ruff_check_and_format_are_clean() -> None:
    checked = _run(str(BIN / "ruff"), "check", ".")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    formatted = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
