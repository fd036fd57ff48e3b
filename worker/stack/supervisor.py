"""Child processes of the stack: start each in its own process group with its log file, watch
them, restart a part that dies (up to a limit), and stop every group (SIGTERM, then SIGKILL).

Each child gets a new session, so a signal to its process group reaches everything it forked
(the Temporal dev server, uvicorn workers) and a Ctrl-C in the launcher's terminal reaches only
the launcher, which then stops the children in order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("baml_studio.stack")

Probe = Callable[[], str | None]


@dataclass
class PartSpec:
    """How to run one part: its command, extra environment, health probe and what to redo after a restart."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    probe: Probe = lambda: None
    after_start: Callable[[], None] | None = None


@dataclass
class RunningPart:
    spec: PartSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    restarts: int = 0


class PartFailed(RuntimeError):
    """A part did not become healthy, or died more often than the restart limit allows."""


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop_groups(pids: list[int], timeout_s: float, reap: Callable[[int], bool] | None = None) -> list[int]:
    """SIGTERM every process group, wait, SIGKILL what is left. Returns the groups that needed SIGKILL.

    ``reap(pid)`` tells whether the leader has exited (and reaps it when it is our child); by
    default a group counts as gone once no process is left in it.
    """

    def gone(pid: int) -> bool:
        if reap is not None and not reap(pid):
            return False
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    for pid in pids:
        signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [pid for pid in remaining if not gone(pid)]
        if remaining:
            time.sleep(0.05)
    for pid in remaining:
        signal_group(pid, signal.SIGKILL)
    end = time.monotonic() + 5
    while remaining and time.monotonic() < end:
        if all(gone(pid) for pid in remaining):
            break
        time.sleep(0.05)
    return remaining


class Supervisor:
    def __init__(self, run_dir: Path, base_env: dict[str, str], *, max_restarts: int, stop_timeout_s: float):
        self.log_dir = run_dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.base_env = base_env
        self.max_restarts = max_restarts
        self.stop_timeout_s = stop_timeout_s
        self.parts: dict[str, RunningPart] = {}

    def start(self, spec: PartSpec) -> RunningPart:
        log_path = self.log_dir / f"{spec.name}.log"
        with open(log_path, "ab") as log_file:
            log_file.write(f"--- start {time.strftime('%Y-%m-%dT%H:%M:%S')} ---\n".encode())
            log_file.flush()
            process = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env={**self.base_env, **spec.env},
                start_new_session=True,
            )
        previous = self.parts.get(spec.name)
        part = RunningPart(spec, process, log_path, restarts=previous.restarts if previous else 0)
        self.parts[spec.name] = part
        log.info("started %s (pid %d)", spec.name, process.pid)
        return part

    def wait_healthy(
        self,
        names: list[str],
        deadline: float,
        on_progress: Callable[[str], None],
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        pending = list(names)
        while pending and not cancelled():
            for name in list(pending):
                part = self.parts[name]
                code = part.process.poll()
                if code is not None:
                    raise PartFailed(f"{name} exited with code {code} while starting; see {part.log_path}")
                if part.spec.probe() is None:
                    pending.remove(name)
                    if part.spec.after_start:
                        part.spec.after_start()
                    on_progress(name)
            if pending and time.monotonic() > deadline:
                reasons = "; ".join(f"{n}: {self.parts[n].spec.probe()}" for n in pending)
                raise PartFailed(f"not healthy in time: {reasons}")
            if pending:
                time.sleep(0.1)

    def dead_parts(self) -> list[RunningPart]:
        return [part for part in self.parts.values() if part.process.poll() is not None]

    def restart(self, part: RunningPart, health_timeout_s: float, on_progress: Callable[[str], None]) -> None:
        name = part.spec.name
        if part.restarts >= self.max_restarts:
            raise PartFailed(
                f"{name} exited with code {part.process.returncode} after {part.restarts} restarts; "
                f"see {part.log_path}"
            )
        log.warning("%s exited with code %s; restarting", name, part.process.returncode)
        signal_group(part.process.pid, signal.SIGKILL)  # leftovers of the dead part's group
        self.parts[name].restarts += 1
        self.start(part.spec)
        self.wait_healthy([name], time.monotonic() + health_timeout_s, on_progress)

    def stop_all(self) -> None:
        """Stop every part: newest first (clients before servers), all groups within one timeout."""
        running = [p for p in reversed(self.parts.values())]

        def reap(pid: int) -> bool:
            for part in running:
                if part.process.pid == pid:
                    return part.process.poll() is not None
            return True

        killed = stop_groups([p.process.pid for p in running], self.stop_timeout_s, reap)
        for part in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                part.process.wait(timeout=1)
        if killed:
            log.warning(
                "killed after timeout: %s", ", ".join(p.spec.name for p in running if p.process.pid in killed)
            )
