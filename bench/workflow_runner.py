"""The worker's and the Temporal server's CPU per ProjectMetaObject run: with Temporal's workflow
sandbox and without, on the dev server's SQLite as it comes and as the stack configures it.

    .venv/bin/python bench/workflow_runner.py [--workflows 300] [--rounds 2] [--concurrency 32]

A Temporal dev server (the binary the stack runs, its database on disk) and one worker in this
process, built by the deployment's own ``build_worker`` with ``ProjectMetaObjectWorkflow``; its
``project_meta_object`` is a stand-in that answers at once, so what is measured is the workflow's
own cost in the worker (its creation and its workflow tasks) and in the server, not the
projection. Two servers in turn: SQLite's defaults (a rollback journal per transaction) and the
stack's pragmas (``worker.stack.launcher.TEMPORAL_SQLITE_PRAGMAS``: a write-ahead log, synced at
checkpoints; docs/stack.md, "Temporal's store"). On each, rounds alternate the two runners: the
sandbox (``SandboxedWorkflowRunner``, Temporal's default, which imports the workflow's module
again for every run) and ``UnsandboxedWorkflowRunner`` (what the deployment's workers use,
``docs/projection-runtime.md``, "Worker"). Each round prints this process's CPU (the worker, and
the client starting the runs) and the server's, per run.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO

from temporalio import activity
from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proc_cpu import process_cpu
from formats.contracts import ids
from formats.contracts import projection as c
from worker.stack.launcher import TEMPORAL_SQLITE_PRAGMAS, temporal_binary, temporal_store_args
from worker.temporal_worker import build_worker
from workflows.projection import ProjectMetaObjectWorkflow


@activity.defn(name="project_meta_object")
def project_meta_object(inp: c.ProjectMetaInput) -> c.ProjectMetaResult:
    return c.ProjectMetaResult(inp.key, inp.generation, (c.ExecutionOutcome("ab" * 16, c.PROJECTED),))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _round(client: Client, sandboxed: bool, n: int, concurrency: int, server_pid: int) -> None:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    async with build_worker(
        client, queue, [project_meta_object], workflows=[ProjectMetaObjectWorkflow], sandboxed=sandboxed
    ):
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with gate:
                await client.execute_workflow(
                    ids.PROJECT_META,
                    c.ProjectMetaWorkflowInput(f"{queue}/meta/{i:08d}.meta", 1),
                    id=f"{queue}-{i}",
                    task_queue=queue,
                )

        await one(-1)  # the first run of a runner pays its one-time set-up: not counted
        cpu, server, wall = time.process_time(), process_cpu(server_pid), time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        cpu, server = time.process_time() - cpu, process_cpu(server_pid) - server
        wall = time.perf_counter() - wall
    runner = "sandboxed" if sandboxed else "unsandboxed"
    print(
        f"  {runner:12s} {n} runs in {wall:6.1f} s ({n / wall:5.1f}/s): this process "
        f"{cpu / n * 1000:6.2f} ms per run, Temporal server {server / n * 1000:6.2f} ms per run",
        flush=True,
    )


async def _server(tmp: Path, stack_store: bool, log: IO[bytes]) -> tuple[subprocess.Popen[bytes], Client]:
    port = _free_port()
    cmd = [str(temporal_binary()), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    db = tmp / "temporal.db"
    cmd += temporal_store_args(db) if stack_store else ["--db-filename", str(db)]
    server = subprocess.Popen([*cmd, "--port", str(port), "--log-level", "warn"], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            return server, await Client.connect(f"127.0.0.1:{port}")
        except RuntimeError:
            if time.monotonic() > deadline:
                server.terminate()
                raise
            await asyncio.sleep(0.2)


async def main(args: argparse.Namespace) -> None:
    print(f"{args.workflows} ProjectMetaObject runs per round, {args.concurrency} at once")
    for stack_store in (False, True):
        pragmas = ", ".join(TEMPORAL_SQLITE_PRAGMAS) if stack_store else "none"
        print(f"SQLite {'as the stack configures it' if stack_store else 'as it comes'} (pragmas: {pragmas})")
        with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "temporal.log", "wb") as log:
            server, client = await _server(Path(tmp), stack_store, log)
            try:
                for _ in range(args.rounds):
                    for sandboxed in (True, False):
                        await _round(client, sandboxed, args.workflows, args.concurrency, server.pid)
            finally:
                server.terminate()
                server.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    asyncio.run(main(parser.parse_args()))
