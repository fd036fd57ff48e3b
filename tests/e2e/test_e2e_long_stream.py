"""A long-lived process on the embedded stack: far more meta objects than the walk-back reads.

The stack's worker runs with the walk bound lowered (``BAML_STUDIO_PROJECTION_MAX_WALK=20``) so
that a stream of a few hundred meta objects crosses it, as a process running for days crosses the
real 2,000: EngineStarted is written once per engine (a second engine starts half-way), and every
execution after the first few dozen meta objects finds its engine only through the engine
registry. Shipped by the publisher; every execution must be projected ``complete`` exactly once.
(The real bound with 5,000+ meta objects: ``bench/long_stream.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_world import World, stack_world

from formats import meta_segment as ms
from formats.inspect import read_profile_file
from formats.synth.config import SynthConfig
from formats.synth.generator import synthesize
from publisher import Publisher, PublisherSettings

pytestmark = pytest.mark.stack

WALK = 20


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    env = {"BAML_STUDIO_PROJECTION_MAX_WALK": str(WALK)}
    with stack_world(tmp_path_factory.mktemp("e2e-long"), env) as w:
        yield w


def _engine_started_at(root: Path, euid: str) -> list[int]:
    seqs = []
    meta_dir = root / "streams" / euid / "meta"
    for path in sorted(meta_dir.glob("*.bamlmeta")):
        seg = ms.decode_meta_segment(read_profile_file(path))
        if any(isinstance(r, ms.EngineStarted) for r in seg.records):
            seqs.append(seg.sequence)
    return seqs


def test_long_stream_crosses_the_walk_bound_and_every_execution_is_complete_once(
    world: World, tmp_path: Path
) -> None:
    root = tmp_path / "profiles-v1"
    truth = synthesize(root, SynthConfig.long_run(200, seed=3131, rate_per_second=1.5))
    (euid,) = truth.streams
    engines_at = _engine_started_at(root, euid)
    assert len(engines_at) == 2 and engines_at[1] > 4 * WALK  # once per engine; the second late
    meta_max = max(int(p.name.split(".")[0]) for p in (root / "streams" / euid / "meta").iterdir())
    assert meta_max >= 200
    pub = Publisher(
        PublisherSettings(
            gateway_url=world.state.gateway_url, token=world.state.publisher_token, profile_dir=root
        )
    )
    report = pub.run_once(180)
    assert report is not None and report.ok, pub.stopped_reason
    ids = {e.execution_id for e in truth.executions}
    assert {e.index_state for e in truth.executions} == {"complete"}
    ledger = world.wait_in_ledger(ids, timeout=600)
    assert {(ledger[i].status, ledger[i].index_state) for i in ids} == {
        (e.status, "complete") for e in truth.executions
    }
    assert world.root_rows(ids) == dict.fromkeys(ids, 1)  # exactly once
