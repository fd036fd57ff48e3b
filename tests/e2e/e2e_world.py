"""The embedded stack as the e2e tests see it: clients, corpora uploaded as the publisher lays them
out, and waits on what the stores hold.

The stack is started with its run directory at ``<cwd>/run/stack`` and ``<cwd>`` as the working
directory. The launcher passes the caller's ``BAML_STUDIO_*`` environment through to its children
(and sets ``BAML_STUDIO_STACK_RUN_DIR``), so ``start_stack_here(base, env=...)`` configures the
parts, e.g. Boundary's test-only request recording.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "stack"))
sys.path.insert(0, str(ROOT / "projection_io"))

from bucket_corpus import Uploaded, build_objects, upload  # noqa: E402
from stack_fixtures import free_base_port  # noqa: E402

from api.dataplane.boundary_client import BoundaryClient  # noqa: E402
from api.dataplane.workload_tls import ClientTls  # noqa: E402
from formats.object_keys import Scope  # noqa: E402
from formats.synth.config import SynthConfig  # noqa: E402
from formats.synth.generator import synthesize  # noqa: E402
from formats.synth.truth import GroundTruth  # noqa: E402
from worker.cli_ops import Deployment, environment_status, load_deployment  # noqa: E402
from worker.stack.state import StackState, load_stack_state, pid_alive  # noqa: E402

CLI = [sys.executable, "-m", "worker.cli"]
_seeds = itertools.count(5000)


def start_stack_here(base: Path, env: dict[str, str] | None = None) -> StackState:
    run_dir = base / "run" / "stack"
    port = free_base_port()
    result = subprocess.run(
        [*CLI, "stack", "up", "--detach", "--run-dir", str(run_dir), "--base-port", str(port)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=base,
        env={**os.environ, **(env or {})},
    )
    state = load_stack_state(run_dir)
    if result.returncode != 0 or state is None:
        logs = "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(run_dir.glob("**/*.log")))
        raise AssertionError(f"stack up failed: {result.stdout}\n{result.stderr}\n{logs}")
    return state


@contextmanager
def stack_world(base: Path, env: dict[str, str] | None = None) -> Iterator[World]:
    """A running stack for one test module; stopped at the end, with no process left behind."""
    state = start_stack_here(base, env)
    w = World(state)
    try:
        yield w
    finally:
        w.boundary.close()
        final = load_stack_state(state.run_dir) or state
        subprocess.run([*CLI, "stack", "down", "--run-dir", state.run_dir], capture_output=True, timeout=60)
        pids = [final.launcher_pid, *(p.pid for p in final.parts.values() if p.pid)]
        left = [pid for pid in pids if pid_alive(pid)]
        assert not left, f"processes left running after stack down: {left}"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
    end = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < end:
        last = cond()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@dataclass
class Corpus:
    truth: GroundTruth
    up: Uploaded
    root: Path

    def ended(self) -> set[str]:
        return {e.execution_id for e in self.truth.executions if e.status != "abandoned"}

    def open(self) -> set[str]:
        return {e.execution_id for e in self.truth.executions if e.status == "abandoned"}

    def all(self) -> set[str]:
        return {e.execution_id for e in self.truth.executions}


class World:
    def __init__(self, state: StackState) -> None:
        self.state = state
        assert state.tenant_id and state.project_id and state.environment_id and state.tls
        self.scope = Scope(state.tenant_id, state.project_id, state.environment_id)
        self.s3 = self.aws("s3")
        self.sqs = self.aws("sqs")
        self.deployment: Deployment = load_deployment(Path(state.run_dir))
        tls = ClientTls(Path(state.tls.ca_cert), Path(state.tls.client_cert), Path(state.tls.client_key))
        assert state.deployment_id and state.cell
        self.boundary = BoundaryClient(state.boundary_workload_url, tls, state.deployment_id, state.cell)

    def aws(self, service: str) -> Any:
        s = self.state
        return boto3.client(
            service,
            endpoint_url=s.s3_endpoint_url,
            region_name=s.aws_region,
            aws_access_key_id=s.aws_access_key_id,
            aws_secret_access_key=s.aws_secret_access_key,
        )

    def corpus(self, tmp: Path, **config: Any) -> Corpus:
        cfg = SynthConfig(seed=next(_seeds), **config)
        root = tmp / f"profile-{cfg.seed}"
        truth = synthesize(root, cfg)
        return Corpus(truth, build_objects(root, self.scope), root)

    def upload(self, corpus: Corpus, *, skip: set[str] | None = None) -> None:
        upload(self.s3, self.state.bucket, corpus.up, skip=skip)

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.state.bucket, Key=key, Body=body)

    def status(self) -> dict[str, Any]:
        return environment_status(self.deployment, self.scope.environment_id)

    def sweep(self, silence_limit_s: float = 1.0) -> None:
        """Run the SweepWorkflow once on the stack's worker and wait for it."""
        import asyncio

        from temporalio.client import Client

        from formats.contracts import Workload
        from formats.contracts import projection as c
        from formats.contracts import task_queue as queue_of
        from workflows.maintenance import SweepWorkflow

        async def run() -> None:
            client = await Client.connect(self.state.temporal_address)
            scope = c.ScopeRef(self.scope.tenant_id, self.scope.project_id, self.scope.environment_id)
            await client.execute_workflow(
                SweepWorkflow.run,
                c.SweepInput(scope, silence_limit_s=silence_limit_s),
                id=f"sweep-test-{time.time_ns()}",
                task_queue=queue_of(self.state.task_queue, Workload.MAINTENANCE),
            )

        asyncio.run(run())

    def ledger(self, generation: int = 1) -> dict[str, Any]:
        from worker.cli_ops import ledger_rows

        return ledger_rows(self.deployment, self.deployment.scope(self.scope.environment_id), generation)

    def root_rows(self, ids: set[str], generation: int = 1) -> dict[str, int]:
        """execution_id -> root thread rows ClickHouse holds (resident query)."""
        quoted = ", ".join(f"'{i}'" for i in sorted(ids))
        table = self.boundary.resident_query(
            f"SELECT execution_id, count() AS n FROM threads_v1 WHERE is_root AND execution_id IN ({quoted}) "
            "GROUP BY execution_id",
            self.scope.environment_id,
            generation=generation,
            catalog_version=1,
        )
        return dict(zip(table["execution_id"].to_pylist(), table["n"].to_pylist(), strict=True))

    def wait_in_ledger(self, ids: set[str], timeout: float = 60) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            rows = self.ledger()
            return rows if ids <= set(rows) else None

        return dict(wait_for(ready, timeout, f"{len(ids)} executions in the ledger"))

    def queue_drained(self) -> bool:
        a = self.sqs.get_queue_attributes(
            QueueUrl=self.state.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return a["ApproximateNumberOfMessages"] == "0" and a["ApproximateNumberOfMessagesNotVisible"] == "0"

    def marker_exists(self, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.state.bucket, Key=f"quarantine/{key}.quarantine")
        except Exception:
            return False
        return True

    def dead_letters(self) -> list[dict[str, Any]]:
        got = self.sqs.receive_message(
            QueueUrl=self.state.dead_letter_queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            VisibilityTimeout=1,
        )
        return list(got.get("Messages", []))
