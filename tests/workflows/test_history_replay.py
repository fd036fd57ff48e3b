"""Every recorded history (tests/fixtures/histories/) replays against the current workflow code.

A change that makes a workflow issue different commands for the same history (another activity,
another order, a timer added or removed, a continue-as-new at another point) fails here, before
it reaches running workflows. No server: temporalio's Replayer runs the workflow code on the
history alone, with the same sandbox as the worker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from recordings import ALL_WORKFLOWS, HISTORIES, SCENARIOS, fixture_path, load
from temporalio.worker import Replayer
from temporalio.workflow import _Definition

from formats.contracts import ids

FILES = sorted(HISTORIES.glob("*.json"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_recorded_history_replays_on_the_current_code(path: Path) -> None:
    doc, runs = load(path)
    replayer = Replayer(workflows=ALL_WORKFLOWS)

    async def main() -> None:
        for history in runs:
            await replayer.replay_workflow(history)  # raises on nondeterminism

    asyncio.run(main())
    assert (
        runs
        and doc["workflow_type"]
        == runs[0].events[0].workflow_execution_started_event_attributes.workflow_type.name
    )


def test_every_scenario_has_its_recording_and_every_recording_a_scenario() -> None:
    assert {p.stem for p in FILES} == {s.name for s in SCENARIOS}
    assert all(fixture_path(s.name).exists() for s in SCENARIOS)


def test_every_registered_workflow_has_a_recorded_history() -> None:
    names = {_Definition.must_from_class(wf).name for wf in ALL_WORKFLOWS}
    recorded = {load(p)[0]["workflow_type"] for p in FILES}
    assert recorded == names


def test_the_long_running_workflows_have_recorded_continue_as_new_chains() -> None:
    chains: dict[str, int] = {}
    for p in FILES:
        doc, runs = load(p)
        for history in runs[:-1]:
            assert history.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
        chains[doc["workflow_type"]] = max(chains.get(doc["workflow_type"], 0), len(runs))
    assert chains[ids.PROJECT_META] >= 3 and chains[ids.REPLAY] >= 2 and chains[ids.REBUILD] >= 2
