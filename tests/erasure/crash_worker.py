"""A Temporal worker process running the erasure workflow and activities (for the crash test).

Arguments: a JSON object {temporal, task_queue, s3, bucket, workload_url, tls_dir, deployment_id,
cell}. ``BAML_STUDIO_ERASURE_TEST_CRASH_AFTER`` makes it exit right after that step's work.
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from temporalio.client import Client
from temporalio.worker import Worker

from activities.erasure import ErasureActivities
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.lance_store import LanceStore
from api.dataplane.workload_tls import ClientTls
from workflows.erasure import ErasureWorkflow


async def main(cfg: dict[str, str]) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=cfg["s3"],
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    lance = LanceStore.for_s3(
        cfg["bucket"],
        endpoint_url=cfg["s3"],
        region="us-east-1",
        access_key_id="test",
        secret_access_key="test",
    )
    tls = ClientTls.in_dir(Path(cfg["tls_dir"]), cfg["deployment_id"])
    boundary = BoundaryClient(cfg["workload_url"], tls, cfg["deployment_id"], cfg["cell"])
    acts = ErasureActivities(s3=s3, bucket=cfg["bucket"], boundary=boundary, lance=lance)
    client = await Client.connect(cfg["temporal"])
    with ThreadPoolExecutor(max_workers=4) as pool:
        async with Worker(
            client,
            task_queue=cfg["task_queue"],
            workflows=[ErasureWorkflow],
            activities=acts.activities(),
            activity_executor=pool,
        ):
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
