"""Real parts for the projection I/O tests, one of each per session.

* moto (S3 + SQS) as a ThreadedMotoServer on a free port, with a fresh bucket per test;
* Boundary as a subprocess (``python -m api.boundary``: its own chdb path, real mTLS), with the
  development tenant, project, environment and deployment bootstrapped in SQLite;
* the Temporal dev server is the suite's ``temporal`` fixture (tests/conftest.py); tests connect
  with asyncio.run.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

sys.path.insert(0, str(Path(__file__).parent))
logging.getLogger("werkzeug").setLevel(logging.WARNING)

from activities.fact_sink import fact_sink  # noqa: E402
from activities.maintenance_activities import MaintenanceActivities  # noqa: E402
from activities.projection_activities import ProjectionActivities  # noqa: E402
from activities.settings import ProjectionSettings  # noqa: E402
from api.dataplane.boundary_client import BoundaryClient  # noqa: E402
from api.dataplane.lance_store import LanceStore  # noqa: E402
from api.dataplane.workload_tls import ClientTls  # noqa: E402
from formats.object_keys import Scope  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(probe: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up within {timeout} s")


@dataclass
class Moto:
    endpoint: str

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield Moto(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@dataclass
class BoundaryProc:
    control_url: str
    workload_url: str
    tls: ClientTls
    deployment_id: str
    cell: str
    scope: Scope
    operator_token: str

    def client(self) -> BoundaryClient:
        return BoundaryClient(self.workload_url, self.tls, self.deployment_id, self.cell)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# Tests flush each batch set at once: a test sends its sets one after another, and Boundary's
# production cadence (BoundarySettings.fact_flush_interval_s) would hold each for up to a second.
# The cadence has its own tests (tests/api/boundary/test_fact_store_replicas.py); the benches set
# this to None, which keeps Boundary's own default.
FACT_FLUSH_INTERVAL_S: float | None = 0.0


@pytest.fixture(scope="session")
def boundary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoundaryProc]:
    from api.boundary.bootstrap import bootstrap_development
    from api.common.workload_identity import ensure_dev_pki

    run = tmp_path_factory.mktemp("boundary")
    metastore = f"sqlite:///{run / 'metastore.sqlite3'}"
    boot = bootstrap_development(metastore)
    tls_dir = run / "tls"
    ensure_dev_pki(tls_dir, boot.deployment_id, boot.cell)
    control, workload = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAML_STUDIO_")}
    env |= {
        "BAML_STUDIO_BOUNDARY_METASTORE_URL": metastore,
        "BAML_STUDIO_BOUNDARY_CONTROL_HOST": "127.0.0.1",
        "BAML_STUDIO_BOUNDARY_CONTROL_PORT": str(control),
        "BAML_STUDIO_BOUNDARY_WORKLOAD_HOST": "127.0.0.1",
        "BAML_STUDIO_BOUNDARY_WORKLOAD_PORT": str(workload),
        "BAML_STUDIO_BOUNDARY_RUN_DIR": str(run),
        "BAML_STUDIO_BOUNDARY_TLS_DIR": str(tls_dir),
        "BAML_STUDIO_BOUNDARY_CLICKHOUSE_PATH": str(run / "chdb"),
        "BAML_STUDIO_BOUNDARY_DEVELOPMENT": "true",
        "BAML_STUDIO_BOUNDARY_DEV_DEPLOYMENT_ID": boot.deployment_id,
        "BAML_STUDIO_BOUNDARY_DEV_CELL": boot.cell,
    }
    if FACT_FLUSH_INTERVAL_S is not None:
        env["BAML_STUDIO_BOUNDARY_FACT_FLUSH_INTERVAL_S"] = str(FACT_FLUSH_INTERVAL_S)
    log = open(run / "boundary.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([PYTHON, "-m", "api.boundary"], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        wait_for(
            lambda: httpx.get(f"http://127.0.0.1:{control}/healthz", timeout=1).status_code == 200,
            60,
            "boundary",
        )
        yield BoundaryProc(
            f"http://127.0.0.1:{control}",
            f"https://127.0.0.1:{workload}",
            ClientTls.in_dir(tls_dir, boot.deployment_id),
            boot.deployment_id,
            boot.cell,
            Scope(boot.tenant_id, boot.project_id, boot.environment_id),
            boot.operator_token,
        )
    finally:
        _terminate(proc)
        log.close()


@dataclass
class World:
    moto: Moto
    boundary: BoundaryProc
    bucket: str
    s3: Any
    lance: LanceStore
    client: BoundaryClient
    acts: ProjectionActivities

    @property
    def scope(self) -> Scope:
        return self.boundary.scope

    @property
    def maintenance(self) -> MaintenanceActivities:
        return MaintenanceActivities(self.acts)


def make_lance(moto: Moto, bucket: str, **tuning: Any) -> LanceStore:
    return LanceStore.for_s3(
        bucket,
        endpoint_url=moto.endpoint,
        region="us-east-1",
        access_key_id="test",
        secret_access_key="test",
        **tuning,
    )


def make_activities(
    s3: Any,
    bucket: str,
    lance: LanceStore,
    client: BoundaryClient,
    tenant_id: str,
    settings: ProjectionSettings | None = None,
) -> ProjectionActivities:
    """The projection activities as the worker builds them, over these clients (tests, benchmarks).

    Tests call the activities one at a time, so by default the committer does not wait for its
    one-second cadence (``commit_interval_s=0``: each merge commits at once, as before); the
    cadence itself is tested in test_lance_group_commit.py and measured by bench/projection.py."""
    settings = settings or ProjectionSettings(commit_interval_s=0.0)
    return ProjectionActivities(
        s3=s3,
        bucket=bucket,
        lance=lance,
        sink=fact_sink(client),
        settings=settings,
        tenant_id=tenant_id,
    )


def start_moto_process(port: int) -> subprocess.Popen[bytes]:
    """The embedded stack's moto (worker/stack/moto_store.py) in a process of its own, as S3 is in
    production: its request handling does not share the caller's GIL (the benchmarks measure the
    caller's CPU). The stack's, not the released ``moto_server``: the benchmarks measure the
    stack, and the released server spends most of its CPU dispatching each request
    (worker/stack/moto_dispatch_speedup.py: 63% of it under ``bench/projection.py --shape small``)."""
    journal_dir = tempfile.mkdtemp(prefix="bench-moto-")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.stack.moto_store",
            "--port",
            str(port),
            "--journal",
            f"{journal_dir}/s3.journal",
        ],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The journal holds every object the bench wrote (51 MB for 10,000 small meta objects): it
    # goes with the process handle, or at the latest when the bench exits.
    weakref.finalize(proc, shutil.rmtree, journal_dir, ignore_errors=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.terminate()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)


@pytest.fixture
def world(moto: Moto, boundary: BoundaryProc) -> Iterator[World]:
    bucket = f"ev-{uuid.uuid4().hex[:12]}"
    s3 = moto.client("s3")
    s3.create_bucket(Bucket=bucket)
    lance = make_lance(moto, bucket)
    client = boundary.client()
    acts = make_activities(s3, bucket, lance, client, boundary.scope.tenant_id)
    try:
        yield World(moto, boundary, bucket, s3, lance, client, acts)
    finally:
        acts.close()
        client.close()
