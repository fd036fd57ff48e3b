"""One worker process of test_several_workers.py: its own ProjectionActivities (its own committer)
projecting the meta objects it is given, with several threads, against the shared bucket and
Boundary.

Run as ``python several_workers_child.py <config.json>``; writes ``<config>.out`` (JSON: the
outcomes, the committer's stats, the retries logged by LanceStore and the committer, errors).
Lance's own commit events go to stderr (the parent sets ``LANCE_LOG=info``) and are counted by the
parent. No retry of a failed activity here: an error is reported, as a failure of the test.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conftest import Moto, make_activities, make_lance

from activities.settings import ProjectionSettings
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.workload_tls import ClientTls
from formats.contracts import projection as c


class _Count(logging.Handler):
    """Counts the retry lines of LanceStore.merge and the committer's skipped maintenance."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts = {"outer_conflict_retries": 0, "maintenance_skipped": 0}
        self._lock_counts = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        with self._lock_counts:
            if "commit conflict, retrying" in text:
                self.counts["outer_conflict_retries"] += 1
            elif "maintenance skipped" in text:
                self.counts["maintenance_skipped"] += 1


def main(config_path: Path) -> None:
    cfg: dict[str, Any] = json.loads(config_path.read_text())
    counter = _Count()
    for name in ("baml_studio.lance_store", "baml_studio.lance_committer"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(counter)
        logger.addHandler(logging.StreamHandler())  # the parent shows them when a child fails
    moto = Moto(cfg["endpoint"])
    s3 = moto.client("s3")
    lance = make_lance(moto, cfg["bucket"])
    tls = ClientTls(Path(cfg["ca_cert"]), Path(cfg["client_cert"]), Path(cfg["client_key"]))
    client = BoundaryClient(cfg["workload_url"], tls, cfg["deployment_id"], cfg["cell"])
    settings = ProjectionSettings(
        commit_interval_s=cfg["commit_interval_s"],
        max_fragments=cfg["max_fragments"],
        activity_threads=cfg["threads"],
    )
    acts = make_activities(s3, cfg["bucket"], lance, client, cfg["tenant_id"], settings)
    outcomes: list[dict[str, str]] = []
    errors: list[str] = []

    def project(key: str) -> None:
        try:
            result = acts.project_meta_object(c.ProjectMetaInput(key, cfg["generation"]))
        except Exception as exc:  # reported to the parent, which fails the test
            errors.append(f"{key}: {type(exc).__name__}: {exc}")
            return
        outcomes.extend({"key": key, "root_id": o.root_id, "outcome": o.outcome} for o in result.outcomes)

    began = time.monotonic()
    with ThreadPoolExecutor(cfg["threads"]) as pool:
        list(pool.map(project, cfg["keys"]))
    elapsed = time.monotonic() - began
    acts.close()
    client.close()
    stats = acts.committer.stats
    out = {
        "outcomes": outcomes,
        "errors": errors,
        "elapsed_s": elapsed,
        "commits": stats.commits,
        "callers": stats.callers,
        "compactions": stats.compactions,
        "maintenance_s": stats.maintenance_s,
        "by_dataset": stats.by_dataset,
        **counter.counts,
    }
    config_path.with_suffix(".out").write_text(json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
