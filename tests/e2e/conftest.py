"""One embedded stack per e2e test module (``stack up --detach`` on free ports, tmp run dir)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_world import World, stack_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with stack_world(tmp_path_factory.mktemp("e2e")) as w:
        yield w
