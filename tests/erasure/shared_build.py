"""Streams of one build: every engine of every stream in a synthetic corpus gets the same program id,
as upstream's content-hashed program id gives identical builds in different processes.

The synthetic profiler draws a random program id per engine. Until it has a content-hashed mode
of its own, :func:`one_build` swaps its ``Program`` for one whose id is fixed for the corpus
(first 16 bytes of SHA-256 over the upstream domain string, a BAML version and the sorted project
files, as upstream derives it). A per-test nonce stands in for the BAML version, so tests sharing
one Boundary never share a program. Everything else (function table, CCT keys derived from the
program id, the streams' meta records) is written by the profiler itself, so the corpus stays
internally consistent.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from formats.synth import generator
from formats.synth.facts import SOURCE_FILE


def build_program_id(baml_version: str) -> bytes:
    digest = hashlib.sha256(b"baml-program-v1")
    digest.update(baml_version.encode())
    for name in sorted(SOURCE_FILE.values()):
        digest.update(f"baml_src/{name}".encode())
    return digest.digest()[:16]


def one_build(monkeypatch: pytest.MonkeyPatch, program_id: bytes) -> None:
    """Corpora synthesized while the patch holds run one build: ``program_id`` for every engine."""
    base: Any = generator.Program

    class OneBuild(base):  # type: ignore[misc, valid-type]
        def program_id(self, engine_id: int) -> bytes:
            return program_id

    monkeypatch.setattr(generator, "Program", OneBuild)
