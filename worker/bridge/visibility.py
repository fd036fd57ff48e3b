"""When each message the bridge holds last had its visibility set, and which are due again.

A message in hand stays invisible only while the bridge keeps extending its visibility timeout.
The bridge used to extend every held message at fixed ticks, in one sequential pass, and let a
failed call wait for the next tick. Under a backlog the embedded stack's moto stalled calls for
tens of seconds: one pass over 1,300 held messages outlasted the 60 s timeout, the messages at
its tail became visible again, were received again, and one finished message reached
``maxReceiveCount`` and the dead-letter queue (docs/projection-runtime.md, "2026-12-06
(evening)"). So each message is due on its own clock, the longest-waiting first, and a message
whose extension failed is due again at once instead of a whole interval later.

Pure: clocks (monotonic seconds) come in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class HeldVisibility:
    """Receipt handle -> when its visibility was last set (received or extended)."""

    every_s: float  # extend a message this long after its visibility was last set
    timeout_s: float  # the visibility timeout each receive and extension sets
    _set_at: dict[str, float] = field(default_factory=dict)
    _lapsed: set[str] = field(default_factory=set)
    lapsed: int = 0  # messages whose visibility ran out while held (SQS may have redelivered them)

    def __len__(self) -> int:
        return len(self._set_at)

    def hold(self, receipt: str, now: float) -> None:
        """A message received now, with ``timeout_s`` of visibility."""
        self._set_at[receipt] = now

    def release(self, receipt: str) -> None:
        """The message is disposed of (or no longer ours): nothing more to extend."""
        self._set_at.pop(receipt, None)
        self._lapsed.discard(receipt)

    def due(self, now: float) -> list[str]:
        """The receipts to extend now, the longest since their last setting first; counts a
        message whose timeout has already run out once, in ``lapsed``."""
        due = sorted((at, r) for r, at in self._set_at.items() if now - at >= self.every_s)
        for at, receipt in due:
            if now - at >= self.timeout_s and receipt not in self._lapsed:
                self._lapsed.add(receipt)
                self.lapsed += 1
        return [r for _, r in due]

    def extended(self, receipt: str, sent_at: float) -> None:
        """An extension sent at ``sent_at`` succeeded (its timeout counts from the sending, the
        earliest SQS can have applied it)."""
        if receipt in self._set_at:
            self._set_at[receipt] = sent_at
            self._lapsed.discard(receipt)
