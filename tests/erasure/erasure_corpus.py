"""Projects a synthetic corpus with the real activities (imported by the erasure tests by this
unique module name: every test directory has a ``conftest``, so ``from conftest import`` is ambiguous)."""

from __future__ import annotations

from typing import Any

from formats.contracts import projection as c


def project_corpus(world: Any, corpus: Any) -> None:
    for key in corpus.up.pack_keys:
        world.acts.ingest_pack(c.IngestPackInput(key))
    for key in corpus.up.meta_keys:
        world.acts.project_meta_object(c.ProjectMetaInput(key, 1))
