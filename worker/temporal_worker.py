"""``python -m worker.temporal_worker``: the Temporal worker process.

It connects to Temporal and polls the task queue. Today it registers only the ``HealthCheck``
workflow and activity (used by ``baml-studio stack status`` to prove the worker answers);
projection, ingestion, erasure and query-job workflows register here as later issues add them.
While polling it rewrites the heartbeat file (if configured) every few seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from worker.settings import TemporalWorkerSettings, get_worker_settings
from worker.stack.health_workflow import HealthCheckWorkflow, health_check_activity

log = logging.getLogger("baml_studio.temporal_worker")


def write_heartbeat(path: Path, payload: dict[str, object]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "at": time.time(), **payload}))
    os.replace(tmp, path)


async def _heartbeat(path: Path, interval_s: float, task_queue: str) -> None:
    while True:
        write_heartbeat(path, {"task_queue": task_queue})
        await asyncio.sleep(interval_s)


async def run_worker(settings: TemporalWorkerSettings) -> None:
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[HealthCheckWorkflow],
        activities=[health_check_activity],
    )
    log.info("polling task queue %s on %s", settings.task_queue, settings.temporal_address)
    async with worker:
        beat = (
            asyncio.create_task(
                _heartbeat(settings.heartbeat_file, settings.heartbeat_interval_s, settings.task_queue)
            )
            if settings.heartbeat_file
            else None
        )
        await stop.wait()
        if beat:
            beat.cancel()
    log.info("stopped")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(run_worker(get_worker_settings()))


if __name__ == "__main__":
    main()
