"""A workflow that reports whether it runs in Temporal's sandbox (its own module: the sandbox
re-imports a workflow's module, and this one imports nothing but temporalio)."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="SandboxProbe")
class SandboxProbe:
    @workflow.run
    async def run(self) -> bool:
        return workflow.unsafe.in_sandbox()
