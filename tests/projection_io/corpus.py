"""A synthetic corpus in a fresh bucket, and how to count what the stores hold for it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bucket_corpus import Uploaded, build_objects, upload

from formats.object_keys import Scope
from formats.synth.config import SynthConfig
from formats.synth.generator import synthesize
from formats.synth.truth import GroundTruth

_seeds = itertools.count(1000)


@dataclass
class Corpus:
    truth: GroundTruth
    up: Uploaded
    euids: list[str]

    @property
    def ended_ids(self) -> set[str]:
        return {e.execution_id for e in self.truth.executions if e.status != "abandoned"}

    @property
    def open_ids(self) -> set[str]:
        return {e.execution_id for e in self.truth.executions if e.status == "abandoned"}


def make_corpus(tmp: Path, scope: Scope, **config: Any) -> Corpus:
    """A synthetic profile with a fresh seed (so ids never collide across tests sharing Boundary)."""
    cfg = SynthConfig(seed=next(_seeds), **config)
    truth = synthesize(tmp / f"profile-{cfg.seed}", cfg)
    up = build_objects(tmp / f"profile-{cfg.seed}", scope)
    return Corpus(truth, up, list(truth.streams))


def put_all(world: Any, corpus: Corpus, *, skip: set[str] | None = None) -> None:
    upload(world.s3, world.bucket, corpus.up, skip=skip)


def root_rows_in_clickhouse(world: Any, euid: str, generation: int = 1) -> dict[str, int]:
    """execution_id -> number of root thread rows Boundary's ClickHouse holds (via a resident query)."""
    table = world.client.resident_query(
        f"SELECT execution_id, count() AS n FROM threads_v1 WHERE is_root AND process_euid = '{euid}' "
        "GROUP BY execution_id",
        world.scope.environment_id,
        generation=generation,
        catalog_version=1,
    )
    return dict(zip(table["execution_id"].to_pylist(), table["n"].to_pylist(), strict=True))
