"""Operator tools: ``baml-studio replay``, ``rebuild``, ``quarantine list|replay`` and ``status``.

Each finds the deployment through :class:`worker.settings.OpsCliSettings`: its ``BAML_STUDIO_OPS_*``
variable, else the running stack's ``stack.json`` (``--run-dir`` or ``BAML_STUDIO_STACK_RUN_DIR``);
a value neither gives exits 2, naming its variable. ``replay`` and ``rebuild`` start the operator-
named Temporal workflows (workflows/maintenance.py) and follow them through their ``progress``
query, so the same run can be watched in the Temporal UI. Output carries identifiers and counts
only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, overload

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from api.dataplane.aws import Service, object_store_client
from formats.contracts import Workload, ids, task_queue
from formats.contracts import projection as c
from formats.deployment_settings import reveal
from worker.bridge.accounting import Accounting, LedgerRow, MetaSummary, account
from worker.bridge.messages import parse_message
from worker.bridge.routing import kind_of
from worker.cli_control import EXIT_CONFIGURATION
from worker.settings import OpsCliSettings
from worker.stack.state import resolve_run_dir

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectTypeDef
    from mypy_boto3_sqs import SQSClient

RunDir = Annotated[
    Path | None,
    typer.Option(
        "--run-dir", help="Stack run directory (env BAML_STUDIO_STACK_RUN_DIR; default ./run/stack)."
    ),
]
err_console = Console(stderr=True)
Environment = Annotated[
    list[str] | None,
    typer.Option("--environment", "-e", help="Environment id (repeatable); default: the stack's."),
]


@dataclass
class Deployment:
    """Where one deployment's parts are: from stack.json, overridden by flags/env."""

    s3_endpoint_url: str | None
    aws_region: str
    aws_access_key_id: str
    aws_secret_access_key: SecretStr
    bucket: str
    queue_url: str | None
    dead_letter_queue_url: str | None
    temporal_address: str
    temporal_namespace: str
    task_queue: str
    control_url: str
    operator_token: SecretStr
    tenant_id: str
    project_id: str
    environments: list[str]

    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    def client(self, service: Service) -> S3Client | SQSClient:
        return object_store_client(self, service)

    def scope(self, environment_id: str) -> c.ScopeRef:
        return c.ScopeRef(self.tenant_id, self.project_id, environment_id)

    def active_generation(self, environment_id: str) -> int:
        from api.boundary.control_client import ControlClient

        with ControlClient(self.control_url, self.operator_token.get_secret_value()) as control:
            return int(control.active_generation(environment_id).generation)


def load_deployment(run_dir: Path | None, environments: list[str] | None = None) -> Deployment:
    """The deployment ``BAML_STUDIO_OPS_*`` (else the running stack's stack.json) names; exits 2 on a gap."""
    given: dict[str, Any] = {"stack_run_dir": run_dir} if run_dir is not None else {}
    settings = OpsCliSettings(**given)

    def pick(name: str) -> Any:
        value = getattr(settings, name)
        if value is None or (isinstance(value, str | SecretStr) and not reveal(value).strip()):
            env = f"BAML_STUDIO_OPS_{name.upper()}"
            err_console.print(
                f"[red]configuration error:[/red] no {name}: set {env}, or start the embedded stack "
                f"(`baml-studio stack up`) so that it is read from {resolve_run_dir(run_dir)}/stack.json",
                highlight=False,
            )
            raise typer.Exit(EXIT_CONFIGURATION)
        return value

    return Deployment(
        s3_endpoint_url=settings.s3_endpoint_url,
        aws_region=pick("aws_region"),
        aws_access_key_id=pick("aws_access_key_id"),
        aws_secret_access_key=pick("aws_secret_access_key"),
        bucket=pick("bucket"),
        queue_url=settings.queue_url,
        dead_letter_queue_url=settings.dead_letter_queue_url,
        temporal_address=pick("temporal_address"),
        temporal_namespace=pick("temporal_namespace"),
        task_queue=pick("task_queue"),
        control_url=pick("boundary_control_url"),
        operator_token=pick("operator_token"),
        tenant_id=pick("tenant_id"),
        project_id=pick("project_id"),
        environments=environments or [pick("environment_id")],
    )


# --- status --------------------------------------------------------------------------------


def _list(s3: S3Client, bucket: str, prefix: str) -> Iterator[ObjectTypeDef]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from page.get("Contents", [])


def quarantined_keys(s3: S3Client, bucket: str, scope: c.ScopeRef) -> dict[str, dict[str, Any]]:
    """original key -> marker document, for every marker of this scope."""
    from formats import object_keys

    prefix = f"{object_keys.QUARANTINE_ROOT}/{object_keys.evidence_prefix(_scope(scope))}"
    out: dict[str, dict[str, Any]] = {}
    for obj in _list(s3, bucket, prefix):
        key = obj["Key"]
        original = key.removeprefix(f"{object_keys.QUARANTINE_ROOT}/").removesuffix(".quarantine")
        try:
            doc = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except ValueError:
            doc = {}
        out[original] = {"marker": key, "reason": doc.get("reason"), "at": doc.get("quarantined_at")}
    return out


def _scope(ref: c.ScopeRef) -> Any:
    from formats.object_keys import Scope

    return Scope(ref.tenant_id, ref.project_id, ref.environment_id)


def meta_summaries(s3: S3Client, bucket: str, scope: c.ScopeRef, quarantined: set[str]) -> list[MetaSummary]:
    from activities.evidence_reader import EvidenceReader
    from formats import meta_segment as ms
    from formats import object_keys
    from formats.errors import FormatError

    reader = EvidenceReader(s3, bucket)
    out: list[MetaSummary] = []
    for obj in _list(s3, bucket, object_keys.evidence_prefix(_scope(scope)) + "streams/"):
        key = obj["Key"]
        if kind_of(key) != "meta":
            continue
        summary = MetaSummary(key, obj["LastModified"].timestamp(), quarantined=key in quarantined)
        try:
            parsed = object_keys.parse_evidence_key(key)
            summary.stream, summary.sequence = parsed.euid, parsed.sequence
        except object_keys.InvalidKeyError:
            pass  # counted, never placed in a stream's sequence
        try:
            segment = reader.meta_strict(key)
        except LookupError:
            continue  # erased meanwhile
        except FormatError:
            summary.readable = False
            out.append(summary)
            continue
        for record in segment.records:
            if isinstance(record, ms.RootStarted):
                summary.started.add(record.root.execution_id)
            elif isinstance(record, ms.RootEnded):
                summary.ended.add(record.root.execution_id)
                if record.root_started_lost:
                    summary.started_lost.add(record.root.execution_id)
        out.append(summary)
    return out


def ledger_rows(dep: Deployment, scope: c.ScopeRef, generation: int) -> dict[str, LedgerRow]:
    from api.dataplane.lance_store import LEDGER, LanceStore

    lance = LanceStore.in_bucket(dep.bucket, dep)
    table = lance.read(
        _scope(scope),
        LEDGER,
        columns=["root_id", "status", "index_state"],
        filter=f"generation = {int(generation)}",
    )
    return {
        r: LedgerRow(s, i)
        for r, s, i in zip(
            table["root_id"].to_pylist(),
            table["status"].to_pylist(),
            table["index_state"].to_pylist(),
            strict=True,
        )
    }


def _queue(sqs: SQSClient, url: str | None) -> dict[str, int] | None:
    if not url:
        return None
    from worker.sqs_bridge import queue_counts

    return queue_counts(sqs, url)


def bridge_status(heartbeat: Path | None, *, now: float | None = None) -> dict[str, Any] | None:
    """The bridge's delivery figures and verdict (``None`` where no heartbeat is reachable)."""
    from worker.bridge.delivery import figures, verdict
    from worker.stack.health import read_heartbeat
    from worker.stack.launcher import BRIDGE_HEARTBEAT_MAX_AGE_S, BRIDGE_STALL_AFTER_S

    if heartbeat is None:
        return None
    beat = read_heartbeat(heartbeat)
    if beat is None:
        return {"healthy": False, "reason": f"no readable heartbeat at {heartbeat}"}
    at = time.time() if now is None else now
    reason = verdict(
        beat, at, max_heartbeat_age_s=BRIDGE_HEARTBEAT_MAX_AGE_S, stall_after_s=BRIDGE_STALL_AFTER_S
    )
    return {"healthy": reason is None, "reason": reason, **figures(beat, at).as_dict()}


def stack_bridge_heartbeat(run_dir: Path | None) -> Path | None:
    """The embedded stack's bridge heartbeat, when a stack was started in that run directory."""
    from worker.stack.state import STATE_FILE
    from worker.stack.state import resolve_run_dir as run_directory

    directory = run_directory(run_dir)
    return directory / "bridge.heartbeat" if (directory / STATE_FILE).exists() else None


def environment_status(
    dep: Deployment,
    environment_id: str,
    generation: int | None = None,
    *,
    silence_limit_s: float | None = None,
    bridge_heartbeat: Path | None = None,
) -> dict[str, Any]:
    """The status document of one environment (what ``status --json`` prints).

    ``silence_limit_s`` (default: the sweep's, ``ProjectionSettings.silence_limit_s``) decides
    whether a stream is still alive, so its open executions count as running, not abandoned.
    """
    from activities.settings import get_projection_settings

    s3 = dep.client("s3")
    scope = dep.scope(environment_id)
    gen = generation if generation is not None else dep.active_generation(environment_id)
    marked = quarantined_keys(s3, dep.bucket, scope)
    limit = silence_limit_s if silence_limit_s is not None else get_projection_settings().silence_limit_s
    acc: Accounting = account(
        meta_summaries(s3, dep.bucket, scope, set(marked)),
        ledger_rows(dep, scope, gen),
        now=time.time(),
        silence_limit_s=limit,
    )
    sqs = dep.client("sqs")
    oldest = acc.oldest_waiting
    return {
        "environment_id": environment_id,
        "generation": gen,
        "executions": acc.executions,
        "index_states": acc.index_states,
        "objects": {
            "waiting": acc.waiting_objects,
            "quarantined": len(marked),
            "unreadable": acc.unreadable_objects,
            "index_gaps": sum(len(g) for g in acc.index_gaps.values()),
        },
        "index_gaps": acc.index_gaps,
        "streams": {"alive": acc.alive_streams, "silent": acc.silent_streams},
        "queue": _queue(sqs, dep.queue_url),
        "dead_letter_queue": _queue(sqs, dep.dead_letter_queue_url),
        "oldest_unprojected": (
            None if oldest is None else dt.datetime.fromtimestamp(oldest, dt.UTC).isoformat()
        ),
        "oldest_unprojected_age_s": None if oldest is None else round(time.time() - oldest, 1),
        "bridge": bridge_status(bridge_heartbeat),
    }


def status_command(
    run_dir: RunDir = None,
    environment: Environment = None,
    generation: Annotated[int | None, typer.Option(help="Generation; default: the active one.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per environment.")] = False,
    silence_limit_s: Annotated[
        float | None,
        typer.Option(help="A stream silent this long is no longer alive; default: the sweep's."),
    ] = None,
) -> None:
    """Per environment: executions by state, objects waiting, queue depth, oldest unprojected object."""
    dep = load_deployment(run_dir, environment)
    console = Console()
    for env_id in dep.environments:
        doc = environment_status(
            dep,
            env_id,
            generation,
            silence_limit_s=silence_limit_s,
            bridge_heartbeat=stack_bridge_heartbeat(run_dir),
        )
        if as_json:
            typer.echo(json.dumps(doc, sort_keys=True))
            continue
        table = Table(title=f"environment {env_id} (generation {doc['generation']})")
        table.add_column("what")
        table.add_column("count", justify="right")
        for state, n in doc["executions"].items():
            table.add_row(f"executions {state}", str(n))
        for state, n in doc["index_states"].items():
            table.add_row(f"index_state {state}", str(n))
        table.add_row("streams", f"{doc['streams']['alive']} alive, {doc['streams']['silent']} silent")
        for what, n in doc["objects"].items():
            table.add_row(f"objects {what}", str(n))
        for name in ("queue", "dead_letter_queue"):
            q = doc[name]
            table.add_row(name, "-" if q is None else f"{q['visible']} visible, {q['in_flight']} in flight")
        table.add_row("oldest unprojected", doc["oldest_unprojected"] or "-")
        table.add_row("bridge", _bridge_line(doc["bridge"]))
        console.print(table)


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f}s ago"


def _bridge_line(bridge: dict[str, Any] | None) -> str:
    if bridge is None:
        return "-"
    if bridge.get("visible") is None:
        return f"unhealthy: {bridge['reason']}"
    verdict = "delivering" if bridge["healthy"] else f"unhealthy: {bridge['reason']}"
    return (
        f"{verdict}; oldest visible waits {bridge['oldest_visible_wait_s']:.0f}s, "
        f"last received {_seconds(bridge['last_received_age_s'])}, "
        f"last handled {_seconds(bridge['last_handled_age_s'])}"
    )


# --- replay / rebuild ----------------------------------------------------------------------


async def _follow(
    dep: Deployment, workflow: str, workflow_id: str, arg: Any, total: int, result_type: type, label: str
) -> Any:
    client = await Client.connect(dep.temporal_address, namespace=dep.temporal_namespace)
    handle = await client.start_workflow(
        workflow,
        arg,
        id=workflow_id,
        task_queue=task_queue(dep.task_queue, Workload.MAINTENANCE),  # replays and rebuilds
        result_type=result_type,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    )
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=max(total, 1))
        result = asyncio.ensure_future(handle.result())
        while not result.done():
            try:
                progress = await handle.query("progress", result_type=result_type)
                bar.update(task, completed=min(progress.scanned, total))
            except Exception:  # the first workflow task may not have run yet
                pass
            await asyncio.wait({result}, timeout=0.5)
        final = result.result()
        bar.update(task, completed=total)
    return final


def _object_total(dep: Deployment, scope: c.ScopeRef) -> int:
    from formats import object_keys

    s3 = dep.client("s3")
    return sum(1 for _ in _list(s3, dep.bucket, object_keys.evidence_prefix(_scope(scope)) + "streams/"))


def replay_command(
    run_dir: RunDir = None,
    environment: Environment = None,
    name: Annotated[
        str | None, typer.Option(help="Replay name (its workflow ID); default: a timestamp.")
    ] = None,
    generation: Annotated[int | None, typer.Option(help="Generation; default: the active one.")] = None,
    page_size: Annotated[int, typer.Option(help="Objects listed per page.")] = 500,
) -> None:
    """Enqueue every meta object and pack whose executions or values the stores do not hold yet."""
    dep = load_deployment(run_dir, environment)
    for env_id in dep.environments:
        scope = dep.scope(env_id)
        run_name = f"{name or time.strftime('%Y%m%dT%H%M%S')}/{env_id}"
        wid = ids.replay_id(run_name)
        typer.echo(f"replay workflow {wid} (follow it in the Temporal UI)", err=True)
        done: c.ReplayProgress = asyncio.run(
            _follow(
                dep,
                ids.REPLAY,
                wid,
                c.ReplayInput(scope, generation, page_size),
                _object_total(dep, scope),
                c.ReplayProgress,
                f"replay {env_id}",
            )
        )
        typer.echo(
            json.dumps(
                {
                    "environment_id": env_id,
                    "workflow_id": wid,
                    "generation": done.generation,
                    "scanned": done.scanned,
                    "meta_enqueued": done.meta_enqueued,
                    "packs_enqueued": done.packs_enqueued,
                }
            )
        )


def rebuild_command(
    run_dir: RunDir = None,
    environment: Environment = None,
    name: Annotated[
        str | None, typer.Option(help="Rebuild name (its workflow ID); default: a timestamp.")
    ] = None,
    switch: Annotated[
        bool, typer.Option(help="Switch the active generation when every object is done.")
    ] = True,
) -> None:
    """Project everything into generation N+1, then switch the environment's active generation."""
    dep = load_deployment(run_dir, environment)
    for env_id in dep.environments:
        scope = dep.scope(env_id)
        wid = ids.rebuild_id(f"{name or time.strftime('%Y%m%dT%H%M%S')}/{env_id}")
        typer.echo(f"rebuild workflow {wid} (follow it in the Temporal UI)", err=True)
        done: c.RebuildProgress = asyncio.run(
            _follow(
                dep,
                ids.REBUILD,
                wid,
                c.RebuildInput(scope, switch=switch),
                _object_total(dep, scope),
                c.RebuildProgress,
                f"rebuild {env_id}",
            )
        )
        typer.echo(
            json.dumps(
                {
                    "environment_id": env_id,
                    "workflow_id": wid,
                    "from_generation": done.from_generation,
                    "to_generation": done.to_generation,
                    "metas_projected": done.metas_projected,
                    "packs_ingested": done.packs_ingested,
                    "not_done": done.not_done,
                    "switched": done.switched,
                }
            )
        )
        if not done.switched and switch:
            raise typer.Exit(1)


# --- quarantine ------------------------------------------------------------------------------

quarantine_app = typer.Typer(
    help="Objects that failed verification: list them, replay them.", no_args_is_help=True
)


@quarantine_app.command("list")
def quarantine_list(
    run_dir: RunDir = None,
    environment: Environment = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
) -> None:
    """Every quarantine marker of the environment, with its reason, and the dead-letter queue depth."""
    dep = load_deployment(run_dir, environment)
    s3 = dep.client("s3")
    for env_id in dep.environments:
        marked = quarantined_keys(s3, dep.bucket, dep.scope(env_id))
        if as_json:
            for key, doc in sorted(marked.items()):
                typer.echo(json.dumps({"environment_id": env_id, "key": key, **doc}, sort_keys=True))
            continue
        table = Table(title=f"quarantined objects in {env_id}")
        for col in ("key", "reason", "quarantined at"):
            table.add_column(col)
        for key, doc in sorted(marked.items()):
            table.add_row(key, str(doc["reason"]), str(doc["at"]))
        Console().print(table)
    dlq = _queue(dep.client("sqs"), dep.dead_letter_queue_url)
    if dlq is not None and not as_json:
        typer.echo(f"dead-letter queue: {dlq['visible']} visible, {dlq['in_flight']} in flight")


async def _rerun(dep: Deployment, key: str) -> c.WorkflowOutcomes:
    """An operator's forced re-run: a new run of the object's workflow even after a completed one."""
    from formats.object_keys import InvalidKeyError, parse_evidence_key

    client = await Client.connect(dep.temporal_address, namespace=dep.temporal_namespace)
    if kind_of(key) == "meta":
        try:
            env_id = parse_evidence_key(key).scope.environment_id
        except InvalidKeyError:
            env_id = dep.environments[0]
        gen = dep.active_generation(env_id)
        wid, wf, arg = ids.project_meta_id(gen, key), ids.PROJECT_META, c.ProjectMetaWorkflowInput(key, gen)
    else:
        wid, wf, arg = ids.ingest_pack_id(key), ids.INGEST_PACK, c.PackWorkflowInput(key)  # type: ignore[assignment]
    handle = await client.start_workflow(
        wf,
        arg,
        id=wid,
        task_queue=dep.task_queue,
        result_type=c.WorkflowOutcomes,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
    return await handle.result()


def _drop_dead_letters(dep: Deployment, keys: set[str]) -> int:
    """Delete the dead-letter messages naming these keys (others are made visible again)."""
    if not dep.dead_letter_queue_url:
        return 0
    sqs = dep.client("sqs")
    dropped = 0
    for _ in range(100):
        got = sqs.receive_message(
            QueueUrl=dep.dead_letter_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=5, WaitTimeSeconds=0
        ).get("Messages", [])
        if not got:
            break
        for m in got:
            try:
                named = {e.key for e in parse_message(m["Body"]).events}
            except ValueError:
                named = set()
            if named and named <= keys:
                sqs.delete_message(QueueUrl=dep.dead_letter_queue_url, ReceiptHandle=m["ReceiptHandle"])
                dropped += 1
            else:
                sqs.change_message_visibility(
                    QueueUrl=dep.dead_letter_queue_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
    return dropped


@quarantine_app.command("replay")
def quarantine_replay(
    run_dir: RunDir = None,
    environment: Environment = None,
    key: Annotated[list[str] | None, typer.Option("--key", help="Only this object (repeatable).")] = None,
) -> None:
    """Remove the markers and run the objects' workflows again (after the cause was fixed)."""
    dep = load_deployment(run_dir, environment)
    s3 = dep.client("s3")
    marked: dict[str, dict[str, Any]] = {}
    for env_id in dep.environments:
        marked |= quarantined_keys(s3, dep.bucket, dep.scope(env_id))
    chosen = {k: v for k, v in marked.items() if not key or k in key}
    results: dict[str, str] = {}
    for original, doc in sorted(chosen.items()):
        s3.delete_object(Bucket=dep.bucket, Key=doc["marker"])
        outcome = asyncio.run(_rerun(dep, original))
        results[original] = (
            f"quarantined again ({outcome.quarantined})"
            if outcome.quarantined
            else "done"
            if outcome.done
            else "pending"
        )
    cleared = {k for k, v in results.items() if v == "done"}
    dropped = _drop_dead_letters(dep, cleared)
    for k, v in results.items():
        typer.echo(json.dumps({"key": k, "result": v}))
    typer.echo(f"{len(cleared)} of {len(results)} replayed; {dropped} dead-letter messages removed", err=True)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
    app.command("replay")(replay_command)
    app.command("rebuild")(rebuild_command)
    app.add_typer(quarantine_app, name="quarantine")
