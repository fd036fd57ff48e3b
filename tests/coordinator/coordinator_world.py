"""Types the coordinator tests share, under a unique module name (every test directory has a
``conftest``, so ``from conftest import`` would be ambiguous across the suite)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coordinator_corpus import Projected

from api.boundary.bootstrap import DevBootstrap
from api.common.workload_identity import DevPki
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.lance_store import LanceStore
from formats.object_keys import Scope
from formats.synth import GroundTruth

STUDIO_ORIGIN = "https://studio.example.com"


@dataclass
class BoundaryServer:
    workload_url: str
    boot: DevBootstrap
    pki: DevPki
    client: BoundaryClient
    metastore_url: str = ""  # the metastore Boundary serves, for tests that add an environment

    @property
    def scope(self) -> Scope:
        return Scope(self.boot.tenant_id, self.boot.project_id, self.boot.environment_id)


@dataclass
class Corpus:
    root: Path
    truth: GroundTruth
    lance: LanceStore
    projected: Projected
