"""``python -m api.boundary``: the control API (HTTP) and the workload API (HTTPS, client certs
required) in one process, two uvicorn servers on one asyncio loop. Migrations run first."""

from __future__ import annotations

import asyncio
import logging
import sys

import uvicorn

from api.boundary.app import build_runtime, create_control_app, create_workload_app
from api.boundary.settings import BoundarySettings
from api.common.process_gc import tune_gc
from api.common.tls_asgi import ClientCertH11Protocol
from api.common.workload_identity import DevPki, ensure_dev_pki, server_ssl_kwargs

log = logging.getLogger("api.boundary")


def server_configs(settings: BoundarySettings) -> tuple[uvicorn.Config, uvicorn.Config]:
    runtime = build_runtime(settings)
    tls_dir = settings.resolved_tls_dir()
    pki: DevPki
    if settings.development:
        # The dev PKI also issues a client cert for the dev deployment when one is named.
        pki = ensure_dev_pki(tls_dir, settings.dev_deployment_id or "boundary-self-check", settings.dev_cell)
    else:
        pki = ensure_dev_pki(tls_dir, "boundary-self-check", settings.dev_cell)
    control = uvicorn.Config(
        create_control_app(runtime),
        host=settings.control_host,
        port=settings.control_port,
        log_level="info",
        access_log=False,  # paths carry ids only, but keep access logs to the proxy in production
        lifespan="off",
    )
    workload = uvicorn.Config(
        create_workload_app(runtime),
        host=settings.workload_host,
        port=settings.workload_port,
        http=ClientCertH11Protocol,
        log_level="info",
        access_log=False,
        lifespan="off",
        **server_ssl_kwargs(pki),
    )
    return control, workload


async def serve(settings: BoundarySettings) -> None:
    control_cfg, workload_cfg = server_configs(settings)
    # The process owns its chdb path: create the fact tables now (idempotent DDL). In-process
    # users of server_configs (tests) open the store lazily on their own path instead.
    workload_cfg.app.state.runtime.fact_store()  # type: ignore[union-attr]
    tune_gc()
    control, workload = uvicorn.Server(control_cfg), uvicorn.Server(workload_cfg)
    log.info(
        "boundary control on %s:%d, workload (mTLS) on %s:%d",
        settings.control_host,
        settings.control_port,
        settings.workload_host,
        settings.workload_port,
    )
    tasks = [asyncio.create_task(control.serve()), asyncio.create_task(workload.serve())]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    # One server stopping (signal or failure) stops the other.
    control.should_exit = True
    workload.should_exit = True
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(serve(BoundarySettings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
