"""Writers that merge the same rows at the same moment, as worker processes racing on one dataset."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from api.dataplane.lance_store import LanceStore
from formats.object_keys import Scope


def merge_in_racing_rounds(
    root: Path,
    scope: Scope,
    dataset: str,
    rows: Callable[[int], pa.Table],
    rounds: Sequence[int],
    writers: int = 2,
) -> None:
    """Each writer, with a store of its own (as another process has), merges ``rows(r)`` for every
    round ``r``; a barrier releases the writers together at each round. A writer's error is
    raised here."""
    together = threading.Barrier(writers)
    errors: list[BaseException] = []

    def writer() -> None:
        store = LanceStore(root=root)
        try:
            for r in rounds:
                together.wait(30)
                store.merge(scope, dataset, rows(r))
        except BaseException as exc:  # surfaced below, with the thread's own error
            errors.append(exc)
            together.abort()

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
