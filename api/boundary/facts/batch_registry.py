"""Which digest of a projection batch wins, from the registry rows alone (pure).

Writers never lock. Each one adds a ``claim`` row for (relation, digest) and, only after that
claim is committed, reads back every row of the batch id:

- a ``visible`` mark names the winner for good: the same (relation, digest) is a replay of it,
  anything else a conflict;
- with no mark, a writer wins only when every claim it reads is its own (relation, digest).

At most one (relation, digest) can ever win. Two writers X and Y of different digests: if X's
read did not see Y's claim, Y's claim was committed after X's read, hence after X's claim, so
Y's read sees X's claim and Y loses. Both may lose (each saw the other): then no digest wins
and every later writer of that batch id sees both claims and answers conflict too. Writers of
the same digest all win and write the same rows, which collapse on ``row_id``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

CLAIM = "claim"
VISIBLE = "visible"

Ident = tuple[str, str]  # (relation, content digest)


@dataclass
class BatchMarks:
    claims: set[Ident] = field(default_factory=set)
    visible: dict[Ident, int] = field(default_factory=dict)  # ident -> rows


def decide(marks: BatchMarks, mine: Ident) -> int | None:
    """The rows of the visible batch (a replay: >= 0), -1 when ``mine`` wins and must be written,
    or None for a conflict. ``marks`` are read after ``mine`` was claimed."""
    if marks.visible:
        # One mark at most by the argument above; the lowest is a deterministic fallback.
        return marks.visible[mine] if mine == min(marks.visible) else None
    return -1 if marks.claims <= {mine} else None


def dedup_token(relation: str, keys: list[tuple[str, str, str, int, str, str]]) -> str:
    """``insert_deduplication_token`` of one fact insert: the same batches (scope, generation,
    batch id, digest) give the same token, so ClickHouse drops a repeat of the insert."""
    h = hashlib.sha256(relation.encode())
    for key in sorted(keys):
        h.update(b"\x00" + "\x1f".join(map(str, key)).encode())
    return h.hexdigest()
