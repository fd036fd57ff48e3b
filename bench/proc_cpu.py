"""CPU seconds of another process, read from /proc (the benches' figures for moto and Boundary)."""

from __future__ import annotations

import os
from pathlib import Path


def process_cpu(pid: int) -> float:
    """User plus system CPU seconds the process ``pid`` has used so far (all its threads)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
