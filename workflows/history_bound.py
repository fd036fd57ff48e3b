"""When a long-running workflow hands over to a fresh run (continue-as-new).

Read inside workflow code only: both signals come from the workflow task being processed, so a
replay sees the same values at the same point and takes the same decision.
"""

from __future__ import annotations

from temporalio import workflow


def history_full(limit_events: int) -> bool:
    """True once the run's history holds ``limit_events`` events or Temporal suggests a new run."""
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() >= limit_events


# Runs started before bounded histories existed carry no marker for this patch: they keep the old
# rules (deadline as the sum of the delays, no continue-as-new) for their whole life, so replaying
# them on this code issues the commands they recorded. Remove (workflow.deprecate_patch, then the
# old branches) once no such run can still be open: ProjectMetaObject's deadline, 7 days by default.
BOUNDED_HISTORY_PATCH = "bounded-history-v1"


def bounded_history() -> bool:
    """Whether this run follows the bounded-history rules; call once, before the first command."""
    return workflow.patched(BOUNDED_HISTORY_PATCH)
