"""``python -m worker.sqs_bridge``: the SQS bridge between the projection queue and Temporal.

It long-polls the projection queue and handles several messages at once (asyncio; boto3 calls
run on threads). For each object a message names (worker/bridge/messages.py) it starts the
workflow with the deterministic ID from formats/contracts/ids.py (worker/bridge/routing.py): a running
run is attached (``USE_EXISTING``); a run that completed is never repeated
(``ALLOW_DUPLICATE_FAILED_ONLY`` raises WorkflowAlreadyStartedError, and the bridge then waits
on the existing run's result by ID); only a failed, timed-out or terminated run may be started
again. While the workflow runs the message's visibility is extended every
``visibility_extension_s``, ten messages per call (a failed extension is tried again within a
quarter of that: worker/bridge/visibility.py); once the run has started, to
``started_visibility_timeout_s`` and a third as often. The result is long-polled for up to
``result_long_polls`` messages at once, and found by a visibility query for the others
(worker/bridge/completions.py). The result decides
(worker/bridge/disposition.py): delete, send to the dead-letter queue with the quarantine
marker's key (the workflow wrote the marker), or leave for redelivery after ``retry_delay_s``.

Meta objects are projected into the environment's active generation, read from Boundary
(``BoundaryClient.active_generation``, cached for ``generation_cache_s``).

Logs carry workflow ids (object keys: identifiers only), counts and reason codes; never message
bodies, URLs or values. The heartbeat file (read by ``baml-studio stack status``) is rewritten
every ``poll_interval_s`` with the queue counts, the bridge's tallies and its delivery record
(worker/bridge/delivery.py: last message received and handled, since when messages wait), from
which ``stack status`` tells a bridge that heartbeats but no longer consumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import math
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from activities.settings import ProjectionSettings, get_projection_settings
from api.dataplane.aws import aws_client
from api.dataplane.boundary_client import BoundaryError
from formats.contracts import projection as c
from formats.deployment_settings import ConfigurationError, stack_run_dir
from worker.bridge.completions import ClosedWatch, closed_query
from worker.bridge.delivery import DeliveryClock
from worker.bridge.disposition import Disposition, ObjectResult, decide
from worker.bridge.messages import MessageFormatError, ObjectEvent, parse_message
from worker.bridge.routing import Route, environment_of, kind_of, route
from worker.bridge.visibility import HeldVisibility
from worker.settings import SqsBridgeSettings, get_bridge_settings

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import ChangeMessageVisibilityBatchRequestEntryTypeDef, MessageTypeDef

log = logging.getLogger("baml_studio.sqs_bridge")
_T = TypeVar("_T")

# ChangeMessageVisibilityBatch calls in flight at once.
_EXTENSION_CALLS = 4


def sqs_call_threads(settings: SqsBridgeSettings) -> int:
    """Threads (and pooled connections) for the bridge's blocking SQS calls: as many disposals at
    once as messages are routed at once (``max_in_flight``; more wait their turn), the extension
    calls, the receive's long poll and the heartbeat's counts.

    asyncio's default executor has ``min(32, cores + 4)`` threads, six on two cores: in a soak at
    100 executions/s the long poll, up to 32 deletes and every extension call queued for those
    six, behind one another whenever moto was slow."""
    return settings.max_in_flight + _EXTENSION_CALLS + 3


QUARANTINE_ATTRIBUTE = "baml-quarantine-markers"  # DLQ message attribute: JSON [[marker, reason]]
UNKNOWN_GENERATION = 0  # a key outside every environment: the workflow quarantines it first
# What a generation lookup raises when Boundary is down, refuses or answers garbage: the message is
# retried. Anything else is a bug, left to surface (logged with its traceback, tally internal_error).
BOUNDARY_FAILURES = (BoundaryError, httpx.HTTPError, ValidationError)


class _Slot:
    """One message's share of ``max_in_flight``, released once: when its workflows have started
    (``started`` is then called: the message's visibility may be lengthened), or when its handling
    ends without a start."""

    def __init__(self, semaphore: asyncio.Semaphore, started: Callable[[], None]) -> None:
        self._semaphore: asyncio.Semaphore | None = semaphore
        self._started = started

    def release(self) -> None:
        if self._semaphore is not None:
            self._semaphore.release()
            self._semaphore = None
            self._started()


# The slot of the message being handled (contextvars follow it into the tasks it spawns).
_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("bridge_slot", default=None)

MAX_SIGNAL_CIDS = 4096  # about 270 kB of signal payload; Temporal's limit is 2 MB
PACK_WAIT_S = 10.0  # longest a meta object waits for its stream's packs in flight before starting


def stream_of(key: str) -> str:
    """The stream prefix of an object key (``.../streams/<euid>``): what a meta and its packs share."""
    return key.rsplit("/", 2)[0]


def _discard(index: dict[str, set[Any]], stream: str, item: object) -> None:
    members = index.get(stream)
    if members is not None:
        members.discard(item)
        if not members:
            del index[stream]


def receives_to_outwait(hold_max_s: float, pending_deadline_s: float) -> int:
    """Receives a meta object's message needs while its run waits up to ``pending_deadline_s`` for
    values: each receive holds the message at most ``hold_max_s``, and one more finds the run closed
    and deletes the message."""
    return math.ceil(pending_deadline_s / hold_max_s) + 1


def redrive_shortfall(redrive_policy: str | None, hold_max_s: float, pending_deadline_s: float) -> str | None:
    """Why the queue's dead-letter policy would move a waiting meta object's message to the DLQ
    before its run gives up on the values, or None when it does not (or the queue has no policy).

    The run goes on either way and nothing is lost, but the dead letter carries no quarantine
    marker and looks like a failure to whoever watches the DLQ (docs/operations.md, step 5)."""
    if not redrive_policy:
        return None
    try:
        count = int(json.loads(redrive_policy)["maxReceiveCount"])
    except (ValueError, KeyError, TypeError):
        return f"the queue's RedrivePolicy has no readable maxReceiveCount: {redrive_policy[:200]!r}"
    needed = receives_to_outwait(hold_max_s, pending_deadline_s)
    if count >= needed:
        return None
    return (
        f"the queue's RedrivePolicy maxReceiveCount is {count}: a meta object whose values have not"
        f" landed is dead-lettered after about {count * hold_max_s / 3600:.0f} h, while its run waits"
        f" {pending_deadline_s / 3600:.0f} h for them (BAML_STUDIO_PROJECTION_PENDING_DEADLINE_S;"
        f" each receive holds it {hold_max_s / 3600:.0f} h, BAML_STUDIO_BRIDGE_HOLD_MAX_S). Set"
        f" maxReceiveCount to at least {needed}, or shorten the deadline"
    )


def queue_redrive_shortfall(
    sqs: SQSClient, queue_url: str, hold_max_s: float, pending_deadline_s: float
) -> str | None:
    """:func:`redrive_shortfall` of the queue's own RedrivePolicy (checked once, at start)."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])
    return redrive_shortfall(
        attributes.get("Attributes", {}).get("RedrivePolicy"), hold_max_s, pending_deadline_s
    )


def queue_counts(sqs: SQSClient, queue_url: str) -> dict[str, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return {
        "visible": int(attributes["ApproximateNumberOfMessages"]),
        "in_flight": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    }


def write_heartbeat(path: Path, payload: dict[str, object]) -> None:
    # Same file format as the worker's heartbeat (worker.stack.health.heartbeat_ok reads "at").
    from worker.temporal_worker import write_heartbeat as write

    write(path, payload)


class GenerationCache:
    """Active generation per environment, from a (blocking) lookup, cached for a few seconds."""

    def __init__(self, lookup: Callable[[str], int], ttl_s: float) -> None:
        self._lookup = lookup
        self._ttl = ttl_s
        self._cache: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def get(self, environment_id: str) -> int:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(environment_id)
            if hit is not None and hit[0] > now:
                return hit[1]
        generation = self._lookup(environment_id)
        with self._lock:
            self._cache[environment_id] = (now + self._ttl, generation)
        return generation


def boundary_generation_lookup(identity: BridgeIdentity) -> Callable[[str], int]:
    """``environment_id -> active generation`` through the Boundary workload API (mTLS)."""
    from api.dataplane.boundary_client import BoundaryClient, BoundaryError
    from api.dataplane.workload_tls import ClientTls

    tls = ClientTls.in_dir(identity.tls_dir, identity.deployment_id)
    client = BoundaryClient(identity.workload_url, tls, identity.deployment_id, identity.cell)

    def lookup(environment_id: str) -> int:
        try:
            return int(client.active_generation(environment_id).generation)
        except BoundaryError as exc:
            if 400 <= exc.status < 500:
                # Not this deployment's environment: the workflow quarantines the key (out_of_scope).
                return UNKNOWN_GENERATION
            raise

    return lookup


@dataclass(frozen=True)
class BridgeIdentity:
    workload_url: str
    tls_dir: Path
    deployment_id: str
    cell: str


_IDENTITY_SETTINGS = ("boundary_workload_url", "tls_dir", "deployment_id", "cell")


def resolve_identity(settings: SqsBridgeSettings) -> BridgeIdentity:
    """Boundary's workload URL, the TLS directory and the deployment identity the settings resolved
    (variables, else the running stack's stack.json); a gap is a :class:`ConfigurationError` naming
    every missing variable, raised before the bridge makes any request."""
    missing = [name for name in _IDENTITY_SETTINGS if not str(getattr(settings, name) or "").strip()]
    if missing:
        names = ", ".join(f"BAML_STUDIO_BRIDGE_{name.upper()}" for name in missing)
        raise ConfigurationError(
            f"the SQS bridge needs Boundary's workload URL, a TLS directory, a deployment id and a "
            f"cell: {names} unset, and no running embedded stack in "
            f"{stack_run_dir(settings.stack_run_dir)} lends them (`baml-studio stack up` starts one)"
        )
    assert settings.boundary_workload_url and settings.tls_dir and settings.deployment_id and settings.cell
    return BridgeIdentity(
        settings.boundary_workload_url, Path(settings.tls_dir), settings.deployment_id, settings.cell
    )


class Bridge:
    """One bridge: receives, starts workflows, extends visibility, disposes of messages."""

    def __init__(
        self,
        settings: SqsBridgeSettings,
        *,
        sqs: SQSClient,
        client: Client,
        generations: GenerationCache,
        queue_url: str,
        dlq_url: str,
        projection: ProjectionSettings | None = None,
    ) -> None:
        self.settings = settings
        self.sqs = sqs
        self.client = client
        self.generations = generations
        self.queue_url = queue_url
        self.dlq_url = dlq_url
        self.projection = projection or get_projection_settings()
        self.tally: Counter[str] = Counter()
        self.delivery = DeliveryClock()
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()
        # Per stream (key prefix before /meta/ or /values/): meta workflows this bridge waits on, and
        # packs being ingested. A pack that lands wakes the stream's metas (values_landed) instead of
        # leaving them on their back-off timer; a meta waits briefly for the stream's packs in flight.
        self._metas: dict[str, set[str]] = {}
        self._packs: dict[str, set[asyncio.Event]] = {}
        # The messages being handled: when each one's visibility was last set (_extend_held).
        self._held = HeldVisibility(
            settings.visibility_extension_s,
            settings.visibility_timeout_s,
            settings.started_visibility_timeout_s,
        )
        # Results awaited by long poll at once; the others are found by _find_closed.
        self._long_polls = asyncio.Semaphore(settings.result_long_polls)
        self._closed = ClosedWatch()
        self._sqs_threads = ThreadPoolExecutor(sqs_call_threads(settings), thread_name_prefix="bridge-sqs")
        self._extensions_failing = False  # the last extension call failed (warned once per outage)

    # --- workflows ---------------------------------------------------------------------------

    def _workflow_input(self, r: Route) -> Any:
        p = self.projection
        if r.kind == "meta":
            assert r.generation is not None
            pending = c.PendingPolicy(p.pending_initial_s, p.pending_max_s, p.pending_deadline_s)
            return c.ProjectMetaWorkflowInput(
                r.key, r.generation, pending, p.activity_timeout_s, p.heartbeat_timeout_s
            )
        return c.PackWorkflowInput(r.key, p.activity_timeout_s, p.heartbeat_timeout_s)

    async def _route(self, event: ObjectEvent) -> Route | None:
        if kind_of(event.key) != "meta":
            return route(event.key)
        env = environment_of(event.key)
        generation = UNKNOWN_GENERATION if env is None else await asyncio.to_thread(self.generations.get, env)
        return route(event.key, generation)

    async def start(self, r: Route) -> WorkflowHandle[Any, c.WorkflowOutcomes]:
        """Start, or attach to, the one run of this ID (never a second run after a completed one)."""
        try:
            return await self.client.start_workflow(
                r.workflow_type,
                self._workflow_input(r),
                id=r.workflow_id,
                task_queue=self.settings.task_queue,
                result_type=c.WorkflowOutcomes,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            )
        except WorkflowAlreadyStartedError:
            self.tally["reused_completed"] += 1
            return self.client.get_workflow_handle(r.workflow_id, result_type=c.WorkflowOutcomes)

    async def _packs_first(self, stream: str) -> None:
        """Let the stream's packs in flight finish first (bounded): the publisher PUTs a flush's packs
        before its meta objects, so projecting now would mostly find the values not yet ingested."""
        landing = [e.wait() for e in self._packs.get(stream, ())]
        if landing:
            await asyncio.wait([asyncio.ensure_future(w) for w in landing], timeout=PACK_WAIT_S)

    async def _wake_metas(self, stream: str, cids: tuple[str, ...]) -> None:
        # The pack's CIDs go with the signal: a meta object wakes only when it waits for one of
        # them. A pack too big for a signal's payload wakes every one (no CIDs: always).
        landed = list(cids) if len(cids) <= MAX_SIGNAL_CIDS else None
        for workflow_id in list(self._metas.get(stream, ())):
            # A meta that completed meanwhile rejects the signal: nothing to wake.
            with contextlib.suppress(RPCError):
                await self.client.get_workflow_handle(workflow_id).signal("values_landed", landed)
                self.tally["values_landed"] += 1

    async def run_object(self, event: ObjectEvent) -> ObjectResult:
        try:
            r = await self._route(event)
        except BOUNDARY_FAILURES as exc:  # Boundary unreachable: retry the message later
            log.warning("generation lookup failed for %s: %s", event.key, type(exc).__name__)
            return ObjectResult(event.key, False, error=type(exc).__name__)
        if r is None:
            return ObjectResult(event.key, True)
        stream = stream_of(r.key)
        landed = asyncio.Event()
        if r.kind == "pack":
            self._packs.setdefault(stream, set()).add(landed)
        else:
            await self._packs_first(stream)
            self._metas.setdefault(stream, set()).add(r.workflow_id)
        try:
            handle = await self.start(r)
            # Waiting for the result costs nothing but a coroutine; holding the receive slot while a
            # meta object waits for its values would starve the queue of the very packs it waits for.
            slot = _SLOT.get()
            if slot is not None:
                slot.release()
            outcome = await self._result(handle, pack=r.kind == "pack")
        except WorkflowFailureError as exc:
            cause = exc.cause
            log.warning("workflow %s failed: %s", r.workflow_id, type(cause).__name__)
            return ObjectResult(event.key, False, error=type(cause).__name__)
        finally:
            if r.kind == "pack":
                landed.set()
                _discard(self._packs, stream, landed)
            else:
                _discard(self._metas, stream, r.workflow_id)
        if r.kind == "pack" and outcome.done and outcome.quarantined is None:
            await self._wake_metas(stream, outcome.landed_cids)
        return ObjectResult(event.key, outcome.done, outcome.quarantined)

    async def _result(
        self, handle: WorkflowHandle[Any, c.WorkflowOutcomes], *, pack: bool
    ) -> c.WorkflowOutcomes:
        """The started workflow's outcome: by a long poll while fewer than ``result_long_polls`` are
        under way, else once the visibility query of :meth:`_find_closed` has found the run closed
        (worker/bridge/completions.py: a long poll per message in hand cost the server and the
        bridge in proportion to the backlog)."""
        if not self._long_polls.locked():
            async with self._long_polls:
                return await self._long_poll(handle)
        closed = self._closed.watch(handle.id, pack=pack)
        try:
            await closed.wait()
        finally:
            self._closed.release(handle.id)
        self.tally["results_by_query"] += 1
        return await self._long_poll(handle)  # closed: the history's last event answers at once

    async def _long_poll(self, handle: WorkflowHandle[Any, c.WorkflowOutcomes]) -> c.WorkflowOutcomes:
        """Each wait is a long poll of the run's history, and a server refuses long polls past its
        limit per namespace (RESOURCE_EXHAUSTED, "namespace concurrent poller limit exceeded": seen
        with 1,300 messages in hand in a 10-minute soak at 100 executions/s, 826 times). The
        workflow runs on meanwhile, so the wait is asked again after a pause, with the message still
        in hand: giving it back costs a receive, and the fifth receive dead-letters a message whose
        workflow succeeds."""

        def throttled(exc: BaseException) -> bool:
            return isinstance(exc, RPCError) and exc.status == RPCStatusCode.RESOURCE_EXHAUSTED

        def count(_: RetryCallState) -> None:
            self.tally["result_throttled"] += 1

        async for attempt in AsyncRetrying(
            retry=retry_if_exception(throttled),
            wait=wait_random_exponential(multiplier=0.5, max=30),
            before_sleep=count,
            reraise=True,
        ):
            with attempt:
                return await handle.result()
        raise AssertionError("unreachable: AsyncRetrying returns or raises")

    async def _find_closed(self) -> None:
        """Every ``completion_poll_s``, one visibility query for the runs of up to
        ``completion_batch`` of the workflows waited on without a long poll; those found closed are
        woken. A failed query is asked again at the next look (the runs go on meanwhile)."""
        while True:
            await asyncio.sleep(self.settings.completion_poll_s)
            batch = self._closed.next_batch(self.settings.completion_batch)
            if not batch:
                continue
            try:
                query = closed_query(batch)
                found = [w.id async for w in self.client.list_workflows(query, page_size=len(batch))]
            except RPCError as exc:
                log.warning("closed-run query failed: %s", exc.status.name)
                self.tally["closed_query_failed"] += 1
                continue
            except Exception:
                # A bug: this loop must outlive it, or every message waiting on it stays in hand
                # until hold_max_s. Logged with its traceback (ids only, no bodies), counted.
                log.exception("closed-run query ended by an internal error")
                self.tally["closed_query_failed"] += 1
                continue
            self._closed.found_closed(found)

    # --- messages ----------------------------------------------------------------------------

    async def _sqs_call(self, call: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """A blocking SQS call on the bridge's own threads (:func:`sqs_call_threads`)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._sqs_threads, partial(call, *args, **kwargs)
        )

    async def _extend_held(self) -> None:
        """Keep every message in hand invisible while its workflows run: each is extended
        ``visibility_extension_s`` after its visibility was last set, ten per
        ``ChangeMessageVisibilityBatch``, up to ``_EXTENSION_CALLS`` calls at once.

        A message whose workflow waits for its values is held for minutes; 1,300 were held at
        once in a soak. One call per message every 20 s would be 65 calls a second; batched, 6.5.
        The loop looks every quarter interval, so a message whose extension call failed (stalled,
        or refused as a whole) is tried again within seconds, not a whole interval later; and the
        calls run side by side, so one stalled call does not hold back every other message's
        (worker/bridge/visibility.py)."""
        calls = asyncio.Semaphore(_EXTENSION_CALLS)
        extending: set[str] = set()  # receipts whose extension is queued or under way
        tasks: set[asyncio.Task[None]] = set()

        async def extend(receipts: list[str]) -> None:
            try:
                async with calls:
                    await self._extend(receipts)
            finally:
                extending.difference_update(receipts)

        try:
            while True:
                # Looks do not wait for the calls of the last one: slow calls delay only their own
                # messages, and those are not queued twice.
                await asyncio.sleep(self.settings.visibility_extension_s / 4)
                due = [r for r in self._held.due(time.monotonic()) if r not in extending]
                self.tally["visibility_lapsed"] = self._held.lapsed
                extending.update(due)
                for start in range(0, len(due), 10):
                    task = asyncio.create_task(extend(due[start : start + 10]))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            for task in list(tasks):
                task.cancel()

    async def _extend(self, receipts: list[str]) -> None:
        timeouts = [self._held.timeout_for(r) for r in receipts]
        entries: list[ChangeMessageVisibilityBatchRequestEntryTypeDef] = [
            {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": int(t)}
            for i, (r, t) in enumerate(zip(receipts, timeouts, strict=True))
        ]
        sent_at = time.monotonic()
        try:
            resp = await self._sqs_call(
                self.sqs.change_message_visibility_batch, QueueUrl=self.queue_url, Entries=entries
            )
        except (BotoCoreError, ClientError) as exc:
            # Still due: the next look, a quarter interval on, tries them again. Warned once per
            # outage, not per call (a stalled SQS fails every call of 1,300 held messages); the
            # tally keeps the count.
            if not self._extensions_failing:
                log.warning("visibility extensions failing: %s; retried every look", type(exc).__name__)
            self._extensions_failing = True
            self.tally["visibility_extension_failed"] += len(receipts)
            return
        self._extensions_failing = False
        for ok in resp.get("Successful", []):
            i = int(ok["Id"])
            self._held.extended(receipts[i], sent_at, timeouts[i])
        self.tally["visibility_extensions"] += len(resp.get("Successful", []))
        for refused in resp.get("Failed", []):
            # Disposed of meanwhile, or received again after its visibility ran out (its receipt
            # is then stale): either way there is nothing left to extend for this receipt.
            self._held.release(receipts[int(refused["Id"])])
            self.tally["visibility_extension_refused"] += 1

    async def _dispose(self, message: MessageTypeDef, disposition: Disposition) -> None:
        receipt = message["ReceiptHandle"]
        if disposition.action == "retry":
            await self._sqs_call(
                self.sqs.change_message_visibility,
                QueueUrl=self.queue_url,
                ReceiptHandle=receipt,
                VisibilityTimeout=self.settings.retry_delay_s,
            )
            return
        if disposition.action == "dead_letter":
            await self._sqs_call(
                self.sqs.send_message,
                QueueUrl=self.dlq_url,
                MessageBody=message["Body"],
                MessageAttributes={
                    QUARANTINE_ATTRIBUTE: {
                        "DataType": "String",
                        "StringValue": json.dumps([list(q) for q in disposition.quarantined]),
                    }
                },
            )
        await self._delete(receipt)

    async def _delete(self, receipt: str) -> None:
        """Delete a disposed-of message, a call that did not reach SQS tried again in place (a
        stalled endpoint's timeout): left to SQS instead, a message whose run has started comes back
        only when its ``started_visibility_timeout_s`` runs out (docs/projection-runtime.md,
        "2026-12-07"). An error SQS answered (a stale receipt) is not retried.

        On top of the client's own retry (``aws_client``: one more try of a connection error), not
        instead of it: raising that for the client would retry every call the bridge makes,
        extensions (which have their own clock) and the receive's long poll included."""

        def count(_: RetryCallState) -> None:
            self.tally["delete_retried"] += 1

        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(BotoCoreError),
            stop=stop_after_attempt(4),
            wait=wait_random_exponential(multiplier=0.5, max=4),
            before_sleep=count,
            reraise=True,
        ):
            with attempt:
                await self._sqs_call(self.sqs.delete_message, QueueUrl=self.queue_url, ReceiptHandle=receipt)

    async def handle(self, message: MessageTypeDef) -> Disposition:
        """Handle one received message to its end (delete, dead-letter or leave for retry)."""
        if int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1")) > 1:
            # Received before: left for retry, or its visibility ran out (each receive counts
            # towards maxReceiveCount). SQS's own count, where visibility_lapsed is the bridge's bound.
            self.tally["redelivered"] += 1
        try:
            parsed = parse_message(message["Body"])
        except MessageFormatError as exc:
            # Not an S3 event: nothing can ever project it; park it in the dead-letter queue.
            log.warning("unparseable message: %s", exc)
            disposition = Disposition("dead_letter", (("", "unparseable_message"),))
            await self._dispose(message, disposition)
            self.tally["unparseable"] += 1
            return disposition
        if parsed.test_event or not parsed.events:
            await self._dispose(message, Disposition("delete"))
            self.tally["ignored"] += 1
            return Disposition("delete")
        self._held.hold(message["ReceiptHandle"], time.monotonic())
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(self.run_object(e) for e in parsed.events)),
                timeout=self.settings.hold_max_s,
            )
            disposition = decide(list(results))
        except TimeoutError:
            disposition = Disposition("retry")  # the workflow goes on; redelivery attaches to it
        except RPCError as exc:  # Temporal unreachable or refusing: let SQS redeliver
            log.warning("message handling failed: %s %s", type(exc).__name__, exc.status.name)
            disposition = Disposition("retry")
        finally:
            self._held.release(message["ReceiptHandle"])
        await self._dispose(message, disposition)
        self.tally[disposition.action] += 1
        for marker, reason in disposition.quarantined:
            log.warning("dead-lettered object reason=%s marker=%s", reason, marker)
        return disposition

    async def _handle_slot(self, message: MessageTypeDef) -> None:
        slot = _Slot(self._slots, partial(self._held.started, message["ReceiptHandle"]))
        _SLOT.set(slot)  # this task's own context
        try:
            await self.handle(message)
        except (BotoCoreError, ClientError) as exc:  # a failed delete/visibility call: SQS redelivers
            log.warning("message disposal failed: %s", type(exc).__name__)
            self.tally["dispose_failed"] += 1
        except Exception:
            # A bug (in the bridge or a component it calls). Caught here, at the top of the message's
            # task, so one message cannot end the task silently (asyncio would only report it when
            # the task is collected); the message is not disposed of, so SQS redelivers it after its
            # visibility timeout and dead-letters it after maxReceiveCount. The body is not logged.
            log.exception("message handling ended by an internal error")
            self.tally["internal_error"] += 1
        else:
            self.delivery.finished(time.time())
        finally:
            slot.release()

    async def _receive(self, count: int) -> list[MessageTypeDef]:
        resp = await self._sqs_call(
            self.sqs.receive_message,
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=count,
            WaitTimeSeconds=self.settings.wait_time_s,
            VisibilityTimeout=self.settings.visibility_timeout_s,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return list(resp.get("Messages", []))

    async def _heartbeat(self) -> None:
        beat = self.settings.heartbeat_file
        last: dict[str, object] | None = None
        while True:
            try:
                counts: dict[str, object] = {
                    "queue": await self._sqs_call(queue_counts, self.sqs, self.queue_url),
                    "dlq": await self._sqs_call(queue_counts, self.sqs, self.dlq_url),
                }
            except (BotoCoreError, ClientError) as exc:
                counts = {"error": type(exc).__name__}
            queue = counts.get("queue")
            if isinstance(queue, dict):
                self.delivery.saw_queue(int(queue["visible"]), time.time())
            payload = {
                **counts,
                "handling": self.settings.max_in_flight - self._slots._value,
                "delivery": self.delivery.as_dict(),
                **self.tally,
            }
            if counts != last:
                log.info("queue counts %s", counts)
                last = counts
            if beat:
                write_heartbeat(beat, payload)
            await asyncio.sleep(self.settings.poll_interval_s)

    async def run(self, stop: asyncio.Event) -> None:
        beat = asyncio.create_task(self._heartbeat())
        extender = asyncio.create_task(self._extend_held())
        finder = asyncio.create_task(self._find_closed())
        log.info("receiving from queue %s", self.settings.queue_name)
        try:
            while not stop.is_set():
                await self._slots.acquire()
                free = 1
                while free < self.settings.batch_size and not self._slots.locked():
                    await self._slots.acquire()
                    free += 1
                receiving = asyncio.ensure_future(self._receive(free))
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                messages: list[MessageTypeDef] = []
                if receiving in done:
                    try:
                        messages = receiving.result()
                    except (BotoCoreError, ClientError) as exc:
                        log.warning("receive failed: %s", type(exc).__name__)
                        await asyncio.sleep(1)
                # else: stopping; a receive still under way returns its messages to the queue
                # when their visibility timeout ends.
                self.delivery.took(len(messages), time.time())
                for _ in range(free - len(messages)):
                    self._slots.release()
                for message in messages:
                    task = asyncio.create_task(self._handle_slot(message))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        finally:
            beat.cancel()
            extender.cancel()
            finder.cancel()
            # Messages still being handled are left: they become visible again and are redelivered.
            for task in list(self._tasks):
                task.cancel()
            self._sqs_threads.shutdown(wait=False, cancel_futures=True)
            log.info("stopped")


async def run_bridge(settings: SqsBridgeSettings, stop: asyncio.Event) -> None:
    # Settings first: a missing one is named here, before any request could fail on it.
    identity = resolve_identity(settings)
    sqs = aws_client(
        "sqs",
        settings.sqs_endpoint_url,
        settings.aws_region,
        settings.aws_access_key_id,
        settings.aws_secret_access_key,
        # A read timeout shorter than the long poll abandons receives that SQS may still fulfil:
        # those messages then stay invisible for a whole visibility timeout.
        read_timeout=settings.wait_time_s + 10,
        max_pool_connections=sqs_call_threads(settings),
    )
    queue_url = settings.queue_url or sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
    dlq_url = sqs.get_queue_url(QueueName=settings.dead_letter_queue_name)["QueueUrl"]
    projection = get_projection_settings()
    shortfall = queue_redrive_shortfall(sqs, queue_url, settings.hold_max_s, projection.pending_deadline_s)
    if shortfall:
        log.warning("%s", shortfall)
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    generations = GenerationCache(boundary_generation_lookup(identity), settings.generation_cache_s)
    bridge = Bridge(
        settings,
        sqs=sqs,
        client=client,
        generations=generations,
        queue_url=queue_url,
        dlq_url=dlq_url,
        projection=projection,
    )
    await bridge.run(stop)


async def _main(settings: SqsBridgeSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run_bridge(settings, stop)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for name in ("httpx", "httpcore", "botocore", "temporalio"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        asyncio.run(_main(get_bridge_settings()))
    except ConfigurationError as exc:
        log.error("configuration error: %s", exc)
        sys.exit(2)


if __name__ == "__main__":
    main()
