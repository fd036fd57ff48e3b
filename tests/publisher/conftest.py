"""Fixtures: one moto server per module, a fresh bucket, gateway and proxies per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from publisher_harness import TOKEN, FaultProxy, Gateway, Moto

from publisher import Publisher, PublisherSettings

_bucket_ids = itertools.count(1)


@pytest.fixture(scope="session")
def moto() -> Iterator[Moto]:
    server = Moto()
    yield server
    server.stop()


@dataclass
class Env:
    moto: Moto
    bucket: str
    gateway: Gateway
    s3_proxy: FaultProxy
    gw_proxy: FaultProxy
    root: Path

    def settings(self, **kw: object) -> PublisherSettings:
        base: dict[str, object] = dict(
            gateway_url=self.gw_proxy.url,
            token=TOKEN,
            profile_dir=self.root,
            backoff_base_seconds=0.01,
            backoff_cap_seconds=0.05,
            stopped_poll_seconds=0.2,
            min_body_timeout_seconds=5.0,
        )
        base.update(kw)
        return PublisherSettings(**base)  # type: ignore[arg-type]

    def publisher(self, **kw: object) -> Publisher:
        return Publisher(self.settings(**kw))

    def bucket_keys(self) -> list[str]:
        return self.moto.keys(self.bucket)


@pytest.fixture
def env(moto: Moto, tmp_path: Path) -> Iterator[Env]:
    bucket = moto.fresh_bucket(f"evidence-{next(_bucket_ids)}")
    s3_proxy = FaultProxy(moto.url)
    gateway = Gateway(moto, bucket, presign_url=s3_proxy.url)
    gw_proxy = FaultProxy(gateway.url)
    yield Env(moto, bucket, gateway, s3_proxy, gw_proxy, tmp_path / "profiles-v1")
    gw_proxy.stop()
    gateway.stop()
    s3_proxy.stop()
