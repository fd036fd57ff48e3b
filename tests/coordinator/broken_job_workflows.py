"""A stand-in for a job whose worker code is broken: its ``status`` query raises, as a bug in the
real query handler (or a failed replay of a closed workflow) would. Started under its own type
name on its own task queue: the job routes only look a workflow up by its ID."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from formats.contracts import query_job as qj

BROKEN_STATUS_JOB = "BrokenStatusJob"
NOT_A_STATUS = "not a job status"


@workflow.defn(name=BROKEN_STATUS_JOB)
class BrokenStatusJob:
    def __init__(self) -> None:
        self._finish = False

    @workflow.query(name=qj.STATUS_QUERY)
    def status(self) -> qj.QueryJobStatus:
        raise RuntimeError("the status query is broken")

    @workflow.signal(name="finish")
    def finish(self) -> None:
        self._finish = True

    @workflow.run
    async def run(self, finish_at_once: bool) -> str:
        await workflow.wait_condition(lambda: finish_at_once or self._finish)
        return NOT_A_STATUS
