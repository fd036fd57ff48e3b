"""Stand-in projection workflows for the bridge's own test: the real names and contracts, outcomes
chosen by the key, so the bridge's handling is tested without the projection code."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from formats.contracts import ids
    from formats.contracts import projection as c


@workflow.defn(name=ids.PROJECT_META)
class FakeProjectMeta:
    def __init__(self) -> None:
        self._landed = False

    @workflow.signal(name="values_landed")
    def values_landed(self, cids: list[str] | None = None) -> None:
        self._landed = True

    @workflow.run
    async def run(self, inp: c.ProjectMetaWorkflowInput) -> c.WorkflowOutcomes:
        if "quarantine" in inp.key:
            return c.WorkflowOutcomes(inp.key, True, (), "checksum_mismatch")
        if "pending" in inp.key:
            await workflow.wait_condition(lambda: self._landed)
        if "slow" in inp.key:
            await workflow.sleep(3)
        return c.WorkflowOutcomes(inp.key, True, (c.ExecutionOutcome("ab" * 16, c.PROJECTED),))


@workflow.defn(name=ids.INGEST_PACK)
class FakeIngestPack:
    @workflow.run
    async def run(self, inp: c.PackWorkflowInput) -> c.WorkflowOutcomes:
        return c.WorkflowOutcomes(inp.key, True)
