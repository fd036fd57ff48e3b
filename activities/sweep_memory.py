"""What the sweep remembers of each stream between its ticks, in the worker's memory (pure).

Without it every tick (``sweep_interval_s``, 5 minutes) listed every meta object of every stream
to find the newest, and read and decoded every meta segment of every silent stream again to find
its open roots, though a silent stream, once swept, stays closed until something new arrives: each
tick cost the bucket's whole history, and processes that run for days, or restart daily, leave
streams of tens of thousands of meta objects (docs/projection-runtime.md, "2026-12-06 (later)").

With it a tick lists a stream's meta objects after the last key it listed (S3's ``StartAfter``:
a meta key's sequence is zero-padded, so keys sort in sequence order, and a publisher ships a
stream's meta objects in that order), and passes over a silent stream it closed in the same
generation while nothing new arrived.

A stream whose meta sequences run from 1 to its last without a gap cannot receive an earlier key
(a publisher ships a stream in order), so StartAfter sees everything new. A stream with a gap
could have the missing segment uploaded later (a repair), which StartAfter would pass over: a
tick lists such a stream in full once its memory is ``RELIST_S`` old, and a full listing that
finds the same keys keeps the stream closed.

What a tick closes is also kept in the bucket, one small object per stream
(``derived/v1/<scope>/sweep/<euid>/state.json``: the last key, the newest LastModified, the
number of meta objects and the generation it was closed in; no value, no content of a segment).
A worker that starts reads it for each stream it does not know yet, one GET instead of listing
the stream in full and reading every meta segment of every silent stream again: a worker's
restart costs the number of streams, not the bucket's history. A worker that finds a silent
stream it has not closed reads it too before the stream's segments: another worker's tick may
have closed it. Like everything derived, it is
rebuilt by sweeping again: a missing or unreadable state object is a stream not seen yet.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from formats import object_keys

RELIST_S = 3600.0
MAX_STREAMS = 100_000  # about 200 bytes each


def _sequence(key: str) -> int | None:
    try:
        return object_keys.parse_evidence_key(key).sequence
    except object_keys.InvalidKeyError:
        return None


@dataclass
class StreamSeen:
    last_key: str  # the greatest meta key listed
    newest: dt.datetime  # the newest LastModified listed
    listed_at: float  # monotonic seconds of the last full listing
    keys: int = 0  # meta objects listed
    closed: tuple[str, int] | None = None  # (last_key, generation) of a sweep that left nothing open

    @property
    def contiguous(self) -> bool:
        """Every meta sequence from 1 to the last key's is listed: no earlier key can arrive."""
        return self.keys == _sequence(self.last_key)


def encode_state(seen: StreamSeen) -> bytes:
    """The durable state of a stream a tick closed (canonical JSON)."""
    if seen.closed is None:
        raise ValueError("only a closed stream's state is kept")
    body = {
        "last_key": seen.last_key,
        "newest": seen.newest.isoformat(),
        "keys": seen.keys,
        "closed_generation": seen.closed[1],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode_state(data: bytes, stream: str, now: float) -> StreamSeen | None:
    """A stream's durable state, as if listed in full at ``now``; None when it is not one of
    ``stream``'s (the stream is then listed in full, as if never seen)."""
    try:
        body = json.loads(data)
        last_key, keys, generation = body["last_key"], body["keys"], body["closed_generation"]
        newest = dt.datetime.fromisoformat(body["newest"])
    except (ValueError, KeyError, TypeError):
        return None
    if (
        not isinstance(last_key, str)
        or not last_key.startswith(stream + "meta/")
        or _sequence(last_key) is None
        or not isinstance(keys, int)
        or not isinstance(generation, int)
        or newest.tzinfo is None
    ):
        return None
    return StreamSeen(last_key, newest, now, keys, (last_key, generation))


class SweepMemory:
    def __init__(self, max_streams: int = MAX_STREAMS) -> None:
        self._streams: OrderedDict[str, StreamSeen] = OrderedDict()
        self._max = max_streams
        self._lock = threading.Lock()

    def knows(self, stream: str) -> bool:
        with self._lock:
            return stream in self._streams

    def recall(self, stream: str, seen: StreamSeen) -> None:
        """Take a stream's durable state (:func:`decode_state`) as this worker's memory of it: all
        of it for a stream this worker does not know, and for one it knows only the closing, when
        both saw the same meta objects (else the state is older than this worker's listing)."""
        with self._lock:
            known = self._streams.get(stream)
            if known is None:
                self._keep(stream, seen)
            elif (known.last_key, known.keys) == (seen.last_key, seen.keys):
                known.closed = seen.closed

    def start_after(self, stream: str, now: float) -> str | None:
        """The key after which to list ``stream``'s meta objects; None: list them all."""
        with self._lock:
            seen = self._streams.get(stream)
            if seen is None or (not seen.contiguous and now - seen.listed_at >= RELIST_S):
                return None
            return seen.last_key

    def listed(
        self, stream: str, keys: list[tuple[str, dt.datetime]], now: float, *, full: bool
    ) -> StreamSeen | None:
        """Record a listing of ``stream``'s meta objects, (key, LastModified) each: all of them
        (``full``) or those after :meth:`start_after`. None when the stream has none."""
        with self._lock:
            before = self._streams.pop(stream, None)
            seen = None if full else before
            for key, modified in keys:
                if seen is None:
                    seen = StreamSeen(key, modified, now)
                seen.last_key = max(seen.last_key, key)
                seen.newest = max(seen.newest, modified)
                seen.keys += 1
            if seen is None:
                return None
            if full and before is not None and (seen.last_key, seen.keys) == (before.last_key, before.keys):
                seen.closed = before.closed  # the full listing found nothing the memory had not counted
            self._keep(stream, seen)
            return seen

    def _keep(self, stream: str, seen: StreamSeen) -> None:
        self._streams[stream] = seen
        self._streams.move_to_end(stream)
        while len(self._streams) > self._max:
            self._streams.popitem(last=False)

    def close(self, stream: str, generation: int) -> StreamSeen | None:
        """The tick swept ``stream`` in ``generation`` and left nothing open: what to keep of it."""
        with self._lock:
            seen = self._streams.get(stream)
            if seen is not None:
                seen.closed = (seen.last_key, generation)
            return seen

    def closed(self, stream: str, generation: int) -> bool:
        """Whether a tick closed ``stream`` in ``generation`` and nothing arrived since."""
        with self._lock:
            seen = self._streams.get(stream)
            return seen is not None and seen.closed == (seen.last_key, generation)
