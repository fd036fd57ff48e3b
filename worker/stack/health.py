"""Health probes of the stack's parts. Each returns None when healthy, else a short reason."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
from botocore.exceptions import BotoCoreError, ClientError
from temporalio.client import Client

from api.dataplane.aws import aws_client
from worker.bridge import delivery
from worker.stack.health_workflow import HealthCheckInput, HealthCheckResult, HealthCheckWorkflow

Reason = str | None


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def tcp_open(host: str, port: int, timeout: float = 1.0) -> Reason:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"port {port} not accepting connections ({exc.strerror or exc})"


def http_ok(url: str, timeout: float = 2.0) -> Reason:
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"GET {url}: {type(exc).__name__}"
    return None if response.status_code == 200 else f"GET {url}: HTTP {response.status_code}"


def moto_ok(endpoint_url: str, region: str, key_id: str, secret: str) -> Reason:
    try:
        aws_client("s3", endpoint_url, region, key_id, secret).list_buckets()
    except (BotoCoreError, ClientError) as exc:
        return f"S3 list_buckets at {endpoint_url}: {type(exc).__name__}"
    return None


async def _temporal_ok(address: str, namespace: str) -> Reason:
    try:
        await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout=3)
    except Exception as exc:  # connection errors come as several types (RuntimeError, TimeoutError)
        return f"Temporal gRPC at {address}: {type(exc).__name__}"
    return None


def temporal_ok(address: str, namespace: str, ui_url: str) -> Reason:
    """gRPC answers and the Web UI's own API answers (it gives 503 for about a second after start)."""
    reason = asyncio.run(_temporal_ok(address, namespace))
    if reason:
        return reason
    return http_ok(f"{ui_url.rstrip('/')}/api/v1/namespaces")


async def run_health_workflow(
    address: str, namespace: str, task_queue: str, timeout_s: float = 5.0
) -> HealthCheckResult:
    client = await Client.connect(address, namespace=namespace)
    probe = HealthCheckInput(probe_id=uuid.uuid4().hex)
    result = await asyncio.wait_for(
        client.execute_workflow(
            HealthCheckWorkflow.run,
            probe,
            id=f"healthcheck-{probe.probe_id}",
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=max(timeout_s, 1.0)),
        ),
        timeout=timeout_s,
    )
    if result.probe_id != probe.probe_id:
        raise RuntimeError("health check answered for another probe")
    return result


def worker_ok(address: str, namespace: str, task_queue: str, timeout_s: float = 5.0) -> Reason:
    try:
        asyncio.run(run_health_workflow(address, namespace, task_queue, timeout_s))
    except Exception as exc:  # any failure means the worker did not answer in time
        return f"HealthCheck workflow on task queue {task_queue}: {type(exc).__name__}"
    return None


def heartbeat_ok(path: Path, max_age_s: float) -> Reason:
    try:
        beat = json.loads(path.read_text())
    except FileNotFoundError:
        return f"no heartbeat file {path.name} yet"
    except (OSError, ValueError):
        return f"unreadable heartbeat file {path.name}"
    age = time.time() - float(beat.get("at", 0))
    return None if age <= max_age_s else f"heartbeat {age:.0f}s old"


def read_heartbeat(path: Path) -> dict[str, object] | None:
    """The heartbeat document, or None when the file is missing or unreadable."""
    try:
        beat = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return beat if isinstance(beat, dict) else None


def bridge_ok(path: Path, max_age_s: float, stall_after_s: float = delivery.DEFAULT_STALL_AFTER_S) -> Reason:
    """Healthy only while messages flow: a fresh heartbeat and no visible message left waiting
    longer than ``stall_after_s`` (worker/bridge/delivery.py)."""
    beat = read_heartbeat(path)
    if beat is None:
        return heartbeat_ok(path, max_age_s)  # its reason names a missing or unreadable file
    return delivery.verdict(beat, time.time(), max_heartbeat_age_s=max_age_s, stall_after_s=stall_after_s)
