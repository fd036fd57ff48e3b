"""The layering contracts in pyproject.toml ([tool.importlinter]) hold, and the checker can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_every_layering_contract_is_kept() -> None:
    done = _lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "6 kept" in done.stdout


def test_a_broken_contract_fails_the_check(tmp_path: Path) -> None:
    # formats.catalog imports pyarrow: a contract forbidding it must be reported broken.
    config = tmp_path / "layers.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    formats\ninclude_external_packages = True\n\n"
        "[importlinter:contract:probe]\nname = probe\ntype = forbidden\n"
        "source_modules =\n    formats\nforbidden_modules =\n    pyarrow\n"
    )
    done = _lint(str(config))
    assert done.returncode != 0
    assert "probe BROKEN" in done.stdout and "formats.catalog -> pyarrow" in done.stdout
