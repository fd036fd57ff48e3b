"""``python -m api.gateway`` as a process, configured only by ``BAML_STUDIO_GATEWAY_*`` variables,
finding its deployment from the client certificate in its TLS directory (as in the stack)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_requests import BUCKET, auth, blob, body, free_port, segment

from formats import upload_wire as uw


@pytest.fixture
def gateway_process(tenancy: Any, s3_endpoint: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAML_STUDIO_")}
    env |= {
        "BAML_STUDIO_GATEWAY_HOST": "127.0.0.1",
        "BAML_STUDIO_GATEWAY_PORT": str(port),
        "BAML_STUDIO_GATEWAY_S3_ENDPOINT_URL": s3_endpoint,
        "BAML_STUDIO_GATEWAY_BUCKET": BUCKET,
        "BAML_STUDIO_GATEWAY_BOUNDARY_WORKLOAD_URL": tenancy.workload_url,
        "BAML_STUDIO_GATEWAY_TLS_DIR": str(tenancy.tls_dir),
        "BAML_STUDIO_EMBEDDED_STACK": "1",  # moto's placeholder keys, as in the embedded stack
    }
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "api.gateway"], env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_gateway_process_serves_both_endpoints(gateway_process: str, tenancy: Any) -> None:
    token = auth(tenancy.boot.publisher_token)
    config = httpx.get(gateway_process + uw.CONFIG_PATH, headers=token)
    assert config.status_code == 200, config.text
    data = blob(64)
    resp = httpx.post(
        gateway_process + uw.AUTHORIZE_PATH, json=body([segment("meta_segment", 1, data)]), headers=token
    )
    assert resp.status_code == 200, resp.text
    obj = resp.json()["objects"][0]
    assert httpx.put(obj["upload_url"], content=data, headers=obj["required_headers"]).status_code == 200

    spec = httpx.get(gateway_process + "/openapi.json").json()
    for path in (uw.CONFIG_PATH, uw.AUTHORIZE_PATH):
        op = next(iter(spec["paths"][path].values()))
        assert op["security"] == [{"PublisherToken": []}]
    assert {"400", "401", "403", "409", "413", "429", "503"} <= set(
        spec["paths"][uw.AUTHORIZE_PATH]["post"]["responses"]
    )
