"""Parts left running by a launcher that died without stopping them (``kill -9`` of the launcher).

Each part runs in its own session, so killing the launcher leaves the parts serving: they hold the
stack's ports, and the next ``stack up`` would be refused by its port check. ``stack up`` stops
them first (SIGTERM to each group, SIGKILL after the stop timeout), as ``stack down`` would, and
then starts a fresh stack on the same run directory, which restores everything they held
(docs/stack.md, "State across restarts").

A recorded pid is only signalled while its process still carries this run directory in its
environment (the launcher gives every part ``BAML_STUDIO_STACK_RUN_DIR``): a pid the system has
since reused for an unrelated process is left alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

from formats.deployment_settings import STACK_RUN_DIR_ENV
from worker.stack.state import load_stack_state, pid_alive
from worker.stack.supervisor import stop_groups

log = logging.getLogger("baml_studio.stack")


def names_run_dir(environ: bytes, run_dir: Path) -> bool:
    """Whether a process environment (``/proc/<pid>/environ``, NUL-separated) names ``run_dir``."""
    wanted = f"{STACK_RUN_DIR_ENV}={run_dir}".encode()
    return wanted in environ.split(b"\0")


def part_of(pid: int, run_dir: Path) -> bool:
    """A live process started for the stack in ``run_dir`` (False when gone, foreign or unreadable)."""
    if not pid_alive(pid):
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return names_run_dir(environ, run_dir)


def orphaned_parts(run_dir: Path) -> dict[str, int]:
    """part name -> pid of the parts still running from ``run_dir`` whose launcher is gone."""
    state = load_stack_state(run_dir)
    if state is None or state.launcher_alive():
        return {}
    return {
        name: part.pid
        for name, part in state.parts.items()
        if part.pid is not None and part_of(part.pid, run_dir)
    }


def stop_orphaned_parts(run_dir: Path, timeout_s: float) -> dict[str, int]:
    """Stop the orphaned parts of ``run_dir`` (see the module doc); returns what was stopped."""
    orphans = orphaned_parts(run_dir)
    if orphans:
        log.warning(
            "the previous launcher of %s is gone but its parts run on (%s): stopping them first",
            run_dir,
            ", ".join(f"{name} pid {pid}" for name, pid in sorted(orphans.items())),
        )
        stop_groups(list(orphans.values()), timeout_s)
    return orphans
