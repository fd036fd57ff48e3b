"""Real parts for the erasure tests: the projection I/O session fixtures (moto over HTTP, Boundary
as a subprocess with chdb and mTLS, the Temporal dev server), a **versioned** bucket per test, and
a projected synthetic corpus of several streams."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_PIO = Path(__file__).resolve().parents[1] / "projection_io"
sys.path.insert(0, str(_PIO))
_spec = importlib.util.spec_from_file_location("projection_io_fixtures", _PIO / "conftest.py")
assert _spec is not None and _spec.loader is not None
pio = importlib.util.module_from_spec(_spec)
sys.modules["projection_io_fixtures"] = pio
_spec.loader.exec_module(pio)

from activities.erasure import ErasureActivities  # noqa: E402

moto = pio.moto
boundary = pio.boundary
World = pio.World


@dataclass
class ErasureWorld:
    base: Any  # projection_io World
    erasure: ErasureActivities

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


@pytest.fixture
def eworld(moto: Any, boundary: Any) -> Iterator[ErasureWorld]:
    bucket = f"er-{uuid.uuid4().hex[:12]}"
    s3 = moto.client("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    lance = pio.make_lance(moto, bucket)
    client = boundary.client()
    acts = pio.make_activities(s3, bucket, lance, client, boundary.scope.tenant_id)
    erasure = ErasureActivities(s3=s3, bucket=bucket, boundary=client, lance=lance)
    try:
        yield ErasureWorld(pio.World(moto, boundary, bucket, s3, lance, client, acts), erasure)
    finally:
        acts.close()
        client.close()
