"""The started workflows whose results the bridge finds by a visibility query, not a long poll.

The bridge disposes of a message only once its workflow is done, so it waits for each result. A
wait was a long poll of the workflow's history, re-asked every 20 s for as long as the workflow
ran: with a backlog the bridge holds thousands of messages (2,255 at once in a 10-minute soak at
the issue's rate), and 1,000 such waits cost the Temporal dev server 96 ms of CPU a second and the
bridge 41 ms (docs/projection-runtime.md, "2026-12-07"), growing with the backlog and its age;
past about 1,000 the server refuses them ("namespace concurrent poller limit exceeded"). So the
bridge long-polls up to ``result_long_polls`` results at once (all of them at light load, where a
result is wanted the moment it is there: a landed pack lets its stream's meta objects start), and
finds the others closed through one visibility query every ``completion_poll_s`` over at most
``completion_batch`` of them: packs first, then the meta objects round robin. Its cost is one
query a second, whatever the backlog.

Pure: the bookkeeping and the query's text; the bridge makes the calls.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

# A closed run: not Running, and not a run that handed over to a successor (ContinuedAsNew), whose
# chain goes on under the same workflow id.
_CLOSED = "ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew'"


def closed_query(workflow_ids: list[str]) -> str:
    """The visibility query for those of ``workflow_ids`` whose run has closed."""
    for wid in workflow_ids:
        # The bridge's ids are derived from validated object keys (formats/contracts/ids.py): a quote
        # would be a bug there, not input to escape.
        if "'" in wid or "\\" in wid:
            raise ValueError(f"a workflow id with a quote or backslash: {wid!r}")
    listed = ", ".join(f"'{wid}'" for wid in workflow_ids)
    return f"WorkflowId IN ({listed}) AND {_CLOSED}"


@dataclass
class _Waiter:
    closed: asyncio.Event
    waiting: int  # messages waiting on this workflow (a duplicate delivery waits on the same run)


@dataclass
class ClosedWatch:
    """Workflow id -> the event set once a query finds its run closed."""

    _packs: dict[str, _Waiter] = field(default_factory=dict)  # in the order they are to be asked
    _metas: dict[str, _Waiter] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._packs) + len(self._metas)

    def watch(self, workflow_id: str, *, pack: bool) -> asyncio.Event:
        """Wait for this workflow's run to be found closed (release it when done waiting)."""
        waiters = self._packs if pack else self._metas
        waiter = waiters.get(workflow_id)
        if waiter is None:
            waiter = waiters[workflow_id] = _Waiter(asyncio.Event(), 0)
        waiter.waiting += 1
        return waiter.closed

    def release(self, workflow_id: str) -> None:
        for waiters in (self._packs, self._metas):
            waiter = waiters.get(workflow_id)
            if waiter is not None:
                waiter.waiting -= 1
                if waiter.waiting <= 0:
                    del waiters[workflow_id]

    def next_batch(self, limit: int) -> list[str]:
        """The ids to ask about now: packs first (a landed pack wakes its stream's meta objects),
        then meta objects; each one asked goes to the back of its line, so every waiter is asked
        within ``len(self) / limit`` queries."""
        batch: list[str] = []
        for waiters in (self._packs, self._metas):
            # A run found closed is about to be released by its message's task: not asked again.
            asked = [wid for wid, w in waiters.items() if not w.closed.is_set()][: limit - len(batch)]
            for wid in asked:
                waiters[wid] = waiters.pop(wid)
            batch += asked
        return batch

    def found_closed(self, workflow_ids: list[str]) -> int:
        """Wake the waiters of these closed runs; how many were waited on."""
        woken = 0
        for wid in workflow_ids:
            waiter = self._packs.get(wid) or self._metas.get(wid)
            if waiter is not None and not waiter.closed.is_set():
                waiter.closed.set()
                woken += 1
        return woken
