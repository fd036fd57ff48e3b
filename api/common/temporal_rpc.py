"""Which Temporal RPC failures are worth retrying: one list for every caller of the Temporal client."""

from __future__ import annotations

from temporalio.service import RPCError, RPCStatusCode

# An engine that is down, overloaded or slow: the same request may succeed later. A query that no
# worker answers in time (none polls the task queue) ends CANCELLED; a loaded frontend answers
# DEADLINE_EXCEEDED ("Timeout expired").
TRANSIENT_STATUSES = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.CANCELLED,
    }
)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, RPCError) and exc.status in TRANSIENT_STATUSES
