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
    """Receipt handle -> when its visibility was last set (received or extended), and for how long.

    A message is set ``timeout_s`` on receipt, and ``started_timeout_s`` from the extension after
    its workflow has started (:meth:`started`): the run goes on without the bridge, so a bridge that
    dies only delays the message's deletion by that much, and a held message costs an extension
    call a third as often. Each message is extended once ``every_s / timeout_s`` of the timeout it
    was last given has passed (a third, by default)."""

    every_s: float  # extend a message this long after its visibility was last set
    timeout_s: float  # the visibility timeout each receive and extension sets
    started_timeout_s: float | None = None  # the timeout once its workflow has started (None: timeout_s)
    _set_at: dict[str, float] = field(default_factory=dict)
    _given: dict[str, float] = field(default_factory=dict)  # the timeout its last setting gave
    _started: set[str] = field(default_factory=set)
    _lapsed: set[str] = field(default_factory=set)
    lapsed: int = 0  # messages whose visibility ran out while held (SQS may have redelivered them)

    def __len__(self) -> int:
        return len(self._set_at)

    def hold(self, receipt: str, now: float) -> None:
        """A message received now, with ``timeout_s`` of visibility."""
        self._set_at[receipt] = now
        self._given[receipt] = self.timeout_s

    def started(self, receipt: str) -> None:
        """The message's workflow has started: its next extension, due at once, sets the longer
        timeout."""
        if receipt in self._set_at and self.started_timeout_s is not None:
            self._started.add(receipt)

    def release(self, receipt: str) -> None:
        """The message is disposed of (or no longer ours): nothing more to extend."""
        self._set_at.pop(receipt, None)
        self._given.pop(receipt, None)
        self._started.discard(receipt)
        self._lapsed.discard(receipt)

    def timeout_for(self, receipt: str) -> float:
        """The visibility timeout the receipt's next extension sets."""
        if receipt in self._started:
            assert self.started_timeout_s is not None  # started() adds none without it
            return self.started_timeout_s
        return self.timeout_s

    def _is_due(self, receipt: str, at: float, now: float) -> bool:
        given = self._given[receipt]
        if given < self.timeout_for(receipt):
            return True  # started since its last setting: lengthen it now
        return now - at >= given * self.every_s / self.timeout_s

    def due(self, now: float) -> list[str]:
        """The receipts to extend now, the longest since their last setting first; counts a
        message whose timeout has already run out once, in ``lapsed``."""
        due = sorted((at, r) for r, at in self._set_at.items() if self._is_due(r, at, now))
        for at, receipt in due:
            if now - at >= self._given[receipt] and receipt not in self._lapsed:
                self._lapsed.add(receipt)
                self.lapsed += 1
        return [r for _, r in due]

    def extended(self, receipt: str, sent_at: float, timeout: float) -> None:
        """An extension of ``timeout`` seconds sent at ``sent_at`` succeeded (its timeout counts from
        the sending, the earliest SQS can have applied it)."""
        if receipt in self._set_at:
            self._set_at[receipt] = sent_at
            self._given[receipt] = timeout
            self._lapsed.discard(receipt)
