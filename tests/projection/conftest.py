from __future__ import annotations

import pytest
from projection_corpus import CORPUS_CONFIG, Corpus, streams

from formats.synth import synthesize


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("profiles")
    truth = synthesize(root, CORPUS_CONFIG)
    return Corpus(root, truth, streams(root))
