"""What the sweep remembers of each stream between its ticks, in the worker's memory (pure).

Without it every tick (``sweep_interval_s``, 5 minutes) listed every meta object of every stream
to find the newest, and read and decoded every meta segment of every silent stream again to find
its open roots, though a silent stream, once swept, stays closed until something new arrives: each
tick cost the bucket's whole history, and processes that run for days, or restart daily, leave
streams of tens of thousands of meta objects (docs/projection-runtime.md, "2026-12-06 (later)").

With it a tick lists a stream's meta objects after the last key it listed (S3's ``StartAfter``:
a meta key's sequence is zero-padded, so keys sort in sequence order, and a publisher ships a
stream's meta objects in that order), and passes over a silent stream it closed in the same
generation while nothing new arrived. A worker that starts (each worker remembers its own ticks)
lists each stream once in full, and so does a tick whose memory of a stream is ``RELIST_S`` old:
a segment uploaded out of order (a repair) is seen within that.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from dataclasses import dataclass

RELIST_S = 3600.0
MAX_STREAMS = 100_000  # about 200 bytes each


@dataclass
class StreamSeen:
    last_key: str  # the greatest meta key listed
    newest: dt.datetime  # the newest LastModified listed
    listed_at: float  # monotonic seconds of the last full listing
    closed: tuple[str, int] | None = None  # (last_key, generation) of a sweep that left nothing open


class SweepMemory:
    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        self._streams: OrderedDict[str, StreamSeen] = OrderedDict()
        self._max = max_streams
        self._lock = threading.Lock()

    def start_after(self, stream: str, now: float) -> str | None:
        """The key after which to list ``stream``'s meta objects; None: list them all."""
        with self._lock:
            seen = self._streams.get(stream)
            return None if seen is None or now - seen.listed_at >= RELIST_S else seen.last_key

    def listed(
        self, stream: str, keys: list[tuple[str, dt.datetime]], now: float, *, full: bool
    ) -> StreamSeen | None:
        """Record a listing of ``stream``'s meta objects, (key, LastModified) each: all of them
        (``full``) or those after :meth:`start_after`. None when the stream has none."""
        with self._lock:
            seen = self._streams.pop(stream, None)
            if full:
                seen = None
            for key, modified in keys:
                if seen is None:
                    seen = StreamSeen(key, modified, now)
                else:
                    seen.last_key = max(seen.last_key, key)
                    seen.newest = max(seen.newest, modified)
            if seen is None:
                return None
            self._streams[stream] = seen
            while len(self._streams) > self._max:
                self._streams.popitem(last=False)
            return seen

    def close(self, stream: str, generation: int) -> None:
        """The tick swept ``stream`` in ``generation`` and left nothing open."""
        with self._lock:
            seen = self._streams.get(stream)
            if seen is not None:
                seen.closed = (seen.last_key, generation)

    def closed(self, stream: str, generation: int) -> bool:
        """Whether a tick closed ``stream`` in ``generation`` and nothing arrived since."""
        with self._lock:
            seen = self._streams.get(stream)
            return seen is not None and seen.closed == (seen.last_key, generation)
