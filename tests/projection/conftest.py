from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from projection_corpus import Stream, streams

from formats.synth import GroundTruth, SynthConfig, synthesize

# Outcomes, long executions (several data segments), lost and large values, two engines per
# process and unfinished executions, all in one small corpus.
CORPUS_CONFIG = SynthConfig(
    seed=7,
    processes=2,
    engines_per_process=2,
    executions=120,
    p_failed=0.15,
    p_cancelled=0.05,
    p_panicked=0.05,
    p_long=0.25,
    p_large_value=0.02,
    p_too_large_value=0.03,
    unfinished_per_process=2,
)


@dataclass
class Corpus:
    root: Path
    truth: GroundTruth
    streams: list[Stream]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("profiles")
    truth = synthesize(root, CORPUS_CONFIG)
    return Corpus(root, truth, streams(root))
