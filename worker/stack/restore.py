"""What a restarted stack checks and does so that no store gets ahead of the bucket.

Every store of the embedded stack lives in the run directory: Temporal (``temporal.db``), the
metastore (``metastore.db``), the facts (``chdb/``), and S3 through moto's journal
(``s3/journal``, worker/stack/moto_store.py) with the Lance datasets inside the bucket. SQS is
the one store that is not kept: after moto starts on a journal that restored anything, the
launcher starts a ``Replay`` workflow per environment, which enqueues every meta object and pack
whose executions or values the derived stores do not hold yet.

:func:`check_evidence_kept` refuses to start a run directory whose derived stores (facts,
Temporal state) outlived its bucket, e.g. one from before the journal existed, or whose journal
was removed: Boundary would serve facts whose evidence is gone, and re-shipped evidence would
never be projected (its deterministic workflow ids are taken by the finished runs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("baml_studio.stack")

JOURNAL = Path("s3") / "journal"
TEMPORAL_DB = "temporal.db"


class EvidenceLost(RuntimeError):
    """The bucket is gone while stores derived from it remain."""


def journal_path(run_dir: Path) -> Path:
    return run_dir / JOURNAL


def derived_stores(run_dir: Path) -> list[str]:
    """The stores derived from the bucket that hold something in this run directory."""
    found = []
    chdb = run_dir / "chdb"
    if chdb.is_dir() and any(chdb.iterdir()):
        found.append(str(chdb))
    # The database and, after a server was killed, its write-ahead log: a log left beside a
    # removed database would be replayed into the next one.
    found += [str(path) for path in temporal_store_files(run_dir) if path.exists()]
    return found


def temporal_store_files(run_dir: Path) -> list[Path]:
    """Temporal's SQLite database in the run directory and the files beside it in WAL mode."""
    db = run_dir / TEMPORAL_DB
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def check_evidence_kept(run_dir: Path) -> None:
    journal = journal_path(run_dir)
    if journal.exists() and journal.stat().st_size > 0:
        return
    derived = derived_stores(run_dir)
    if derived:
        raise EvidenceLost(
            f"the evidence bucket of {run_dir} is gone ({journal} is missing or empty) but "
            f"{' and '.join(derived)} still hold facts and workflow state derived from it: they "
            "would answer for evidence that no longer exists. Remove them, then start again: "
            f"`rm -rf {' '.join(derived)}` and `baml-studio stack up` (the metastore, tenants and "
            "tokens are kept; re-ship the evidence with `baml-studio publish`), or choose another --run-dir"
        )


def last_restore(run_dir: Path) -> dict[str, Any] | None:
    """What moto's last start restored from the journal (moto_store writes it), or None."""
    try:
        doc = json.loads(Path(f"{journal_path(run_dir)}.restore.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


async def _start_replays(
    address: str, namespace: str, task_queue: str, scopes: list[tuple[str, str, str]], name: str
) -> list[str]:
    from temporalio.client import Client
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

    from formats.contracts import Workload, ids
    from formats.contracts import projection as c
    from formats.contracts import task_queue as queue_of

    client = await Client.connect(address, namespace=namespace)
    started = []
    for tenant, project, environment in scopes:
        wid = ids.replay_id(f"{name}/{environment}")
        await client.start_workflow(
            ids.REPLAY,
            c.ReplayInput(c.ScopeRef(tenant, project, environment)),
            id=wid,
            task_queue=queue_of(task_queue, Workload.MAINTENANCE),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        started.append(wid)
    return started


def replay_after_restore(
    run_dir: Path,
    address: str,
    namespace: str,
    task_queue: str,
    scopes: list[tuple[str, str, str]],
) -> list[str]:
    """Start the replay scans that refill the queue after a restore; [] when nothing was restored.

    One workflow id per restore (its time) and environment: a second call for the same restore
    attaches instead of scanning twice.
    """
    restored = last_restore(run_dir)
    if not restored or not restored.get("entries"):
        return []
    name = f"stack-restore-{int(float(restored.get('at', time.time())))}"
    started = asyncio.run(_start_replays(address, namespace, task_queue, scopes, name))
    log.info("replay scans started after the S3 restore: %s", ", ".join(started))
    return started
