"""Why a query cannot be planned: the typed errors the coordinator's planner raises (pure).

Here, on the ground floor, because they cross a process boundary: the coordinator answers them as
problem+json or a failed ``queryOutcome``, and the background job activity (which runs the
coordinator's runtime inside the Temporal worker) turns them into a non-retryable failure without
importing the coordinator.
"""

from __future__ import annotations


class PlanError(Exception):
    """The SQL cannot be planned; ``code`` is stable, ``remedy`` tells the caller what to do."""

    code = "query_invalid"

    def __init__(self, message: str, *, remedy: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        if code is not None:
            self.code = code


class StatementNotAllowed(PlanError):
    code = "statement_not_allowed"


class UnknownRelation(PlanError):
    code = "unknown_relation"


class UnsupportedQuery(PlanError):
    code = "unsupported_query"
