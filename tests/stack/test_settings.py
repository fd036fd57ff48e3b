"""Settings: one prefix family, defaults pointing at the embedded stack, generated docs table."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.coordinator.settings import CoordinatorSettings
from api.gateway.settings import GatewaySettings
from formats.deployment_settings import EMBEDDED_STACK_ENV
from worker.settings import SqsBridgeSettings, StackSettings, TemporalWorkerSettings
from worker.settings_doc import DOC_PATH, PROCESSES, render
from worker.stack.ports import StackPorts


def test_committed_configuration_table_equals_generated_one() -> None:
    assert DOC_PATH.read_text() == render(), "run `python -m worker.settings_doc --write`"


def test_every_process_uses_one_prefix_family() -> None:
    prefixes = [str(cls.model_config.get("env_prefix")) for _, _, cls in PROCESSES]
    assert all(p.startswith("BAML_STUDIO_") and p.endswith("_") for p in prefixes)
    assert len(set(prefixes)) == len(prefixes)


def test_defaults_point_at_the_default_embedded_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No running stack lends its values (the worker's and bridge's settings would take them).
    monkeypatch.setenv("BAML_STUDIO_STACK_RUN_DIR", str(tmp_path / "no-stack"))
    ports = StackPorts.layout(None)
    moto = f"http://127.0.0.1:{ports.moto}"
    workload = f"https://127.0.0.1:{ports.boundary_workload}"
    temporal = f"127.0.0.1:{ports.temporal}"
    gateway, coordinator = GatewaySettings(), CoordinatorSettings()
    worker, bridge = TemporalWorkerSettings(), SqsBridgeSettings()
    assert (gateway.port, coordinator.port) == (ports.gateway, ports.coordinator)
    assert {gateway.s3_endpoint_url, coordinator.s3_endpoint_url, worker.s3_endpoint_url} == {moto}
    assert bridge.sqs_endpoint_url == moto
    assert {gateway.temporal_address, coordinator.temporal_address, worker.temporal_address} == {temporal}
    assert {gateway.boundary_workload_url, coordinator.boundary_workload_url} == {workload}
    assert worker.boundary_workload_url == workload
    stack = StackSettings()
    assert {gateway.bucket, coordinator.bucket, worker.bucket} == {stack.bucket}
    assert bridge.queue_name == stack.queue_name
    assert worker.task_queue == stack.task_queue == bridge.task_queue


def test_environment_overrides_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAML_STUDIO_GATEWAY_PORT", "9999")
    monkeypatch.setenv("BAML_STUDIO_STACK_RUN_DIR", "/tmp/somewhere")
    monkeypatch.setenv("BAML_STUDIO_COORDINATOR_CORS_ORIGINS", '["https://studio.example"]')
    assert GatewaySettings().port == 9999
    assert StackSettings().run_dir == Path("/tmp/somewhere")
    assert CoordinatorSettings().cors_origins == ["https://studio.example"]


def test_bad_setting_value_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAML_STUDIO_STACK_BASE_PORT", "80")
    with pytest.raises(ValueError, match="base_port"):
        StackSettings()


def test_cached_getters_can_be_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    from api.gateway.settings import get_settings

    monkeypatch.setenv(EMBEDDED_STACK_ENV, "1")  # the default keys are the embedded stack's placeholders
    get_settings.cache_clear()
    monkeypatch.setenv("BAML_STUDIO_GATEWAY_BUCKET", "other-bucket")
    try:
        assert get_settings().bucket == "other-bucket"
    finally:
        get_settings.cache_clear()
