"""Stand-in activities under the real activity names, scripted per key, for the workflow tests.

The workflows call activities by name, so these replace the real ones exactly at that boundary:
what is tested is the workflow code (its commands, its continue-as-new hand-overs), not the
activities. Every stub records its calls so tests can assert what the workflow asked for.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from formats.contracts import erasure as e
from formats.contracts import projection as c
from formats.contracts.query_job import (
    DELETE_QUERY_JOB_RESULT,
    RUN_QUERY_JOB,
    DeleteResultInput,
    QueryJobInput,
    QueryJobResult,
)

ACTIVE_GENERATION = 3


@dataclass(frozen=True)
class RootScript:
    """One execution of a scripted meta object: ``pending_calls`` projections report it pending
    (each one a call that includes it), then it ends as ``final``."""

    pending_calls: int = 0
    final: str = c.PROJECTED


@dataclass
class MetaScript:
    roots: dict[str, RootScript] = field(default_factory=lambda: {"ab" * 16: RootScript()})
    quarantine: str | None = None  # reason: the object fails verification
    delay_s: float = 0.0  # each projection takes this long (deadline tests)
    quarantine_from_call: int = 1  # the first projection (1-based) that fails verification


@dataclass(frozen=True)
class Page:
    meta_keys: tuple[str, ...] = ()
    pack_keys: tuple[str, ...] = ()
    scanned: int = 0


class Stubs:
    """Scripts (set by the test before it starts a workflow) and the calls received."""

    def __init__(self) -> None:
        self.metas: dict[str, MetaScript] = {}
        self.meta_calls: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        self.root_calls: dict[tuple[str, str], int] = defaultdict(int)
        self.pages: dict[str, list[Page]] = {}  # per environment id
        self.scans: list[tuple[str, int, str]] = []  # (environment, generation, cursor)
        self.gates: dict[tuple[str, int], asyncio.Event] = {}  # (environment, page): wait first
        self.reached: dict[tuple[str, int], asyncio.Event] = defaultdict(asyncio.Event)
        self.enqueued: list[tuple[str, ...]] = []
        self.packs: list[str] = []
        self.switched: list[tuple[str, int]] = []
        self.active_generation_calls = 0
        self.clean_round: dict[str, int] = {}  # erasure id -> first round whose verify is clean
        self.deleted_results: list[str] = []
        self.quarantined: list[tuple[str, str]] = []  # (key, reason) per quarantine_object call
        self.discarded: list[str] = []  # erasure ids whose plan was discarded

    # --- projection ---------------------------------------------------------------------------

    @activity.defn(name="project_meta_object")
    async def project_meta_object(self, inp: c.ProjectMetaInput) -> c.ProjectMetaResult:
        script = self.metas.get(inp.key, MetaScript())
        self.meta_calls[inp.key].append(inp.only_roots)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        if script.quarantine is not None and len(self.meta_calls[inp.key]) >= script.quarantine_from_call:
            raise ApplicationError(
                "meta object failed verification",
                script.quarantine,
                type=c.ERR_QUARANTINED,
                non_retryable=True,
            )
        outcomes = []
        for root in inp.only_roots or tuple(script.roots):
            rs = script.roots[root]
            self.root_calls[inp.key, root] += 1
            if self.root_calls[inp.key, root] <= rs.pending_calls:
                outcomes.append(c.ExecutionOutcome(root, c.PENDING, ("cd" * 32,)))
            else:
                outcomes.append(c.ExecutionOutcome(root, rs.final))
        return c.ProjectMetaResult(inp.key, inp.generation, tuple(outcomes))

    @activity.defn(name="ingest_pack")
    async def ingest_pack(self, inp: c.IngestPackInput) -> c.IngestPackResult:
        self.packs.append(inp.key)
        if inp.key.startswith("corrupt/"):
            raise ApplicationError(
                "pack failed verification", "checksum_mismatch", type=c.ERR_QUARANTINED, non_retryable=True
            )
        return c.IngestPackResult(inp.key, 2, 2, ("cd" * 32, "ef" * 32))

    @activity.defn(name="quarantine_object")
    async def quarantine_object(self, inp: c.QuarantineInput) -> c.QuarantineResult:
        self.quarantined.append((inp.key, inp.reason))
        return c.QuarantineResult(f"quarantine/{inp.key}.quarantine", True)

    # --- maintenance --------------------------------------------------------------------------

    @activity.defn(name="sweep")
    async def sweep(self, inp: c.SweepInput) -> c.SweepResult:
        return c.SweepResult(4, 1, ACTIVE_GENERATION, (c.ExecutionOutcome("ab" * 16, c.ABANDONED),))

    @activity.defn(name="index_and_compact")
    async def index_and_compact(self, inp: c.IndexInput) -> c.IndexResult:
        return c.IndexResult(("values_v1", "calls_v1"), 3, 5, 2)

    @activity.defn(name="active_generation")
    async def active_generation(self, inp: c.ActiveGenerationInput) -> int:
        self.active_generation_calls += 1
        return ACTIVE_GENERATION

    @activity.defn(name="replay_scan")
    async def replay_scan(self, inp: c.ReplayScanInput) -> c.ReplayScanResult:
        env = inp.scope.environment_id
        pages = self.pages.get(env, [Page()])
        index = int(inp.start_after.removeprefix("page-")) if inp.start_after else 0
        self.scans.append((env, inp.generation, inp.start_after))
        self.reached[env, index].set()
        gate = self.gates.get((env, index))
        if gate is not None:
            await gate.wait()
        page = pages[index]
        last = index + 1 == len(pages)
        return c.ReplayScanResult(
            page.meta_keys, page.pack_keys, page.scanned, None if last else f"page-{index + 1}"
        )

    @activity.defn(name="enqueue_replay")
    async def enqueue_replay(self, inp: c.EnqueueInput) -> c.EnqueueResult:
        self.enqueued.append(inp.keys)
        return c.EnqueueResult(len(inp.keys))

    @activity.defn(name="switch_generation")
    async def switch_generation(self, inp: c.SwitchGenerationInput) -> c.SwitchGenerationResult:
        self.switched.append((inp.environment_id, inp.generation))
        return c.SwitchGenerationResult(inp.environment_id, inp.generation, True)

    # --- erasure ------------------------------------------------------------------------------

    @activity.defn(name=e.RESOLVE)
    async def erasure_resolve(self, inp: e.ResolveInput) -> e.PlanRef:
        if inp.erasure_id.startswith("bad"):
            raise ApplicationError("selector matches nothing", type="BadSelector", non_retryable=True)
        return e.PlanRef(f"temporary/erasures/{inp.erasure_id}.json", "00" * 32, inp.scope, ("e1", "e2"), 5)

    @activity.defn(name=e.DELETE_STREAM_OBJECTS)
    async def erasure_delete_stream_objects(self, inp: e.PlanInput) -> e.DeleteObjectsResult:
        return e.DeleteObjectsResult(12, 1, 2)

    @activity.defn(name=e.ERASE_FACTS)
    async def erasure_erase_facts(self, inp: e.PlanInput) -> e.EraseFactsResult:
        if inp.erasure_id.startswith("fail"):
            raise ApplicationError("Boundary refused the erasure", type="FactsRefused", non_retryable=True)
        return e.EraseFactsResult(1, {"calls_v1": 10}, 0)

    @activity.defn(name=e.ERASE_LANCE_ROWS)
    async def erasure_erase_lance_rows(self, inp: e.PlanInput) -> e.EraseLanceResult:
        return e.EraseLanceResult({"calls_v1": 10}, ("calls_v1",))

    @activity.defn(name=e.DELETE_UNREFERENCED)
    async def erasure_delete_unreferenced(self, inp: e.PlanInput) -> e.DeleteUnreferencedResult:
        return e.DeleteUnreferencedResult(3, 1, 3, 1)

    @activity.defn(name=e.CLEANUP_LANCE_VERSIONS)
    async def erasure_cleanup_lance_versions(self, inp: e.CleanupInput) -> e.CleanupResult:
        return e.CleanupResult({"calls_v1": 2}, {}, 1_700_000_000_000_000_000)

    @activity.defn(name=e.VERIFY)
    async def erasure_verify(self, inp: e.PlanInput) -> e.VerifyResult:
        left = 0 if inp.round >= self.clean_round.get(inp.erasure_id, 1) else 1
        return e.VerifyResult(left, {"e1": left}, {}, 0, {}, {}, {}, {}, 1_700_000_000_000_000_000)

    @activity.defn(name=e.DISCARD_PLAN)
    async def erasure_discard_plan(self, inp: e.PlanInput) -> int:
        self.discarded.append(inp.erasure_id)
        return 1

    # --- query jobs ---------------------------------------------------------------------------

    @activity.defn(name=RUN_QUERY_JOB)
    async def run_query_job(self, inp: QueryJobInput) -> QueryJobResult:
        if inp.sql == "invalid":
            raise ApplicationError("unknown column", type="QueryInvalid", non_retryable=True)
        return QueryJobResult(f"results/{inp.job_id}.arrow", 3, {"status": "succeeded"})

    @activity.defn(name=DELETE_QUERY_JOB_RESULT)
    async def delete_query_job_result(self, inp: DeleteResultInput) -> None:
        self.deleted_results.append(inp.job_id)

    def activities(self) -> list[Any]:
        """Every stub (bound to this instance), registered under the name the workflows call."""
        return [
            getattr(self, n) for n in dir(self) if hasattr(getattr(self, n), "__temporal_activity_definition")
        ]
