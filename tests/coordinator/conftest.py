"""A real Boundary (uvicorn, mTLS, chdb on the session's path), a projected synthetic corpus in
Lance on local disk, and the coordinator app over both."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from coordinator_corpus import Projected, commit_private, project_profile, publish_public
from coordinator_world import STUDIO_ORIGIN, BoundaryServer, Corpus
from fastapi.testclient import TestClient

from api.boundary.__main__ import server_configs
from api.boundary.bootstrap import bootstrap_development
from api.boundary.settings import BoundarySettings
from api.common.workload_identity import ensure_dev_pki
from api.coordinator.app import create_app
from api.coordinator.runtime import CoordinatorRuntime
from api.coordinator.settings import CoordinatorSettings
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.lance_store import LanceStore
from formats.synth import SynthConfig, synthesize

CORPUS_CONFIG = SynthConfig(
    seed=23, processes=2, executions=100, p_large_value=0.01, p_failed=0.1, p_too_large_value=0.03
)
PENDING_EVERY = 10  # every 10th execution: public facts only, its private rows not yet in Lance


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def boundary(tmp_path_factory: pytest.TempPathFactory, chdb_path: Path) -> Iterator[BoundaryServer]:
    run_dir = tmp_path_factory.mktemp("coord-boundary")
    url = f"sqlite:///{run_dir / 'metastore.sqlite3'}"
    boot = bootstrap_development(url)
    settings = BoundarySettings(
        run_dir=run_dir,
        metastore_url=url,
        control_port=_free_port(),
        workload_port=_free_port(),
        clickhouse_path=chdb_path,
        clickhouse_database="t_coordinator",
        dev_deployment_id=boot.deployment_id,
        dev_cell=boot.cell,
    )
    control_cfg, workload_cfg = server_configs(settings)
    servers = [uvicorn_server(control_cfg), uvicorn_server(workload_cfg)]

    def run() -> None:
        async def both() -> None:
            await asyncio.gather(*(s.serve() for s in servers))

        asyncio.run(both())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not all(s.started for s in servers):
        assert time.monotonic() < deadline, "boundary did not start"
        time.sleep(0.05)
    pki = ensure_dev_pki(settings.resolved_tls_dir(), boot.deployment_id, boot.cell)
    workload_url = f"https://localhost:{settings.workload_port}"
    client = BoundaryClient(workload_url, pki, boot.deployment_id, boot.cell)
    try:
        yield BoundaryServer(workload_url, boot, pki, client, url)
    finally:
        client.close()
        for s in servers:
            s.should_exit = True
        thread.join(timeout=10)


def uvicorn_server(cfg):  # type: ignore[no-untyped-def]
    import uvicorn

    return uvicorn.Server(cfg)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory, boundary: BoundaryServer) -> Corpus:
    root = tmp_path_factory.mktemp("coord-profiles")
    truth = synthesize(root, CORPUS_CONFIG)
    projections = project_profile(root)
    lance = LanceStore(root=tmp_path_factory.mktemp("coord-lance"))
    scope = boundary.scope
    publish_public(boundary.client, scope, 1, projections)
    indexed = [p for i, p in enumerate(projections) if i % PENDING_EVERY != PENDING_EVERY - 1]
    pending = {p.execution_id for i, p in enumerate(projections) if i % PENDING_EVERY == PENDING_EVERY - 1}
    commit_private(lance, scope, 1, indexed)
    return Corpus(root, truth, lance, Projected(projections, pending))


@pytest.fixture(scope="session")
def coordinator_settings(
    boundary: BoundaryServer, corpus: Corpus, tmp_path_factory: pytest.TempPathFactory
) -> CoordinatorSettings:
    assert corpus.lance.root is not None
    return CoordinatorSettings(
        value_cache_dir=tmp_path_factory.mktemp("coord-value-cache"),
        boundary_workload_url=boundary.workload_url,
        tls_dir=boundary.pki.ca_cert.parent,
        deployment_id=boundary.boot.deployment_id,
        lance_root=corpus.lance.root,
        cors_origins=[STUDIO_ORIGIN],
    )


@pytest.fixture(scope="session")
def runtime(
    coordinator_settings: CoordinatorSettings, boundary: BoundaryServer, corpus: Corpus
) -> CoordinatorRuntime:
    return CoordinatorRuntime(coordinator_settings, boundary=boundary.client, lance=corpus.lance)


@pytest.fixture(scope="session")
def api(runtime: CoordinatorRuntime) -> Iterator[TestClient]:
    app = create_app(runtime.settings, runtime)
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="session")
def user_headers(boundary: BoundaryServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {boundary.boot.user_token}"}
