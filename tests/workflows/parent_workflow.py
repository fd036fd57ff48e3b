"""A parent of a ProjectMetaObject chain, for test_continue_as_new.py (its own module: the sandbox
re-imports a workflow's module, and this one imports nothing but the workflow's own modules)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from formats.contracts import ids
    from formats.contracts import projection as c
    from workflows.projection import ProjectMetaObjectWorkflow


@workflow.defn(name="ParentOfAChain")
class ParentOfAChain:
    """Stands for Rebuild (which awaits ProjectMetaObject children) with a child chain of 4 runs."""

    @workflow.run
    async def run(self, inp: c.ProjectMetaWorkflowInput, child_queue: str) -> c.WorkflowOutcomes:
        return await workflow.execute_child_workflow(
            ProjectMetaObjectWorkflow.run,
            inp,
            id=ids.project_meta_id(inp.generation, inp.key),
            task_queue=child_queue,
        )
