"""What the bridge does with a message once its workflows answered (DESIGN.md sections 6 and 7).

* every object done (all executions projected, index_corrupt, abandoned or quarantined; packs
  ingested) and none quarantined: delete the message;
* an object failed verification (its marker written by the workflow): send the message to the
  dead-letter queue with the marker keys, then delete it;
* anything else (executions still pending, a workflow failure, a timeout): leave the message, it
  becomes visible again after the retry delay and is redelivered; the redelivery attaches to the
  same workflow ID.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from formats.object_keys import quarantine_marker_key

Action = Literal["delete", "dead_letter", "retry"]


@dataclass(frozen=True)
class ObjectResult:
    key: str
    done: bool
    quarantined: str | None = None  # reason code
    error: str | None = None  # a failure type name, never a message body


@dataclass(frozen=True)
class Disposition:
    action: Action
    quarantined: tuple[tuple[str, str], ...] = ()  # (marker key, reason)


def decide(results: list[ObjectResult]) -> Disposition:
    if any(r.error is not None or not r.done for r in results):
        return Disposition("retry")
    # The key the quarantine activity wrote: the same function computes it.
    bad = tuple((quarantine_marker_key(r.key), r.quarantined) for r in results if r.quarantined)
    if bad:
        return Disposition("dead_letter", bad)
    return Disposition("delete")
