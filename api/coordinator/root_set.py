"""Exact membership in a large, fixed set of ids, probed many times (pure).

The ledger's roots of one generation (3.76 M at 15 M calls) are read once per ledger fragment
(api/coordinator/private_reader.py) and then asked about each query's candidates. ``pc.is_in``
hashes its whole value set, or every root when the candidates are the value set: 240 ms per
query at 100 k candidates. :class:`RootSet` sorts 64-bit digests of the roots once, so a probe
is a binary search per candidate and an exact string comparison of the candidates whose digest
matches (digests may collide; the comparison decides). Ids of another length than the roots',
or roots of mixed lengths, fall back to ``pc.is_in``: the same answer, at its usual cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Up to this many 8-byte chunks an id is digested (64-byte ids: the ledger's roots).
_MAX_CHUNKS = 8


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves about half the output bits, so ids that
    differ in a few characters (copies of one id with another prefix) get unrelated digests."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _digests(ids: pa.Array, width: int) -> np.ndarray | None:
    """One uint64 per id when every id is ``width`` bytes long (``width`` a multiple of 8, at
    most 64) and none is null; else None."""
    if ids.null_count or len(ids) == 0 or width % 8 or not 0 < width <= 8 * _MAX_CHUNKS:
        return None
    if pc.min_max(pc.binary_length(ids)).as_py() != {"min": width, "max": width}:
        return None
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    chunks = data.view("<u8").reshape(len(ids), width // 8)
    with np.errstate(over="ignore"):
        digest = np.zeros(len(ids), dtype=np.uint64)
        for k in range(width // 8):
            digest = _mix(digest ^ chunks[:, k])
        return digest


class RootSet:
    """A fixed set of string ids (``roots``), indexed once for many :meth:`contains` probes."""

    def __init__(self, roots: pa.Array) -> None:
        self.roots = roots.cast(pa.string())
        roots = self.roots
        self.width = len(roots[0].as_py().encode()) if len(roots) and roots[0].is_valid else 0
        digests = _digests(roots, self.width)
        self._order: np.ndarray | None = None
        if digests is not None:
            self._order = np.argsort(digests, kind="stable")
            self._sorted = digests[self._order]

    def contains(self, ids: pa.Array) -> pa.Array:
        """Per id: whether it is one of the roots (a null id is not)."""
        return contains_any([self], ids)

    def _found(self, ids: pa.Array, probe: _Probe | None, found: np.ndarray) -> None:
        """Set ``found`` where an id is one of these roots (``probe``: the ids' digests, sorted)."""
        if probe is None or self._order is None:
            present = self.roots.filter(pc.is_in(self.roots, value_set=pc.unique(ids)))
            hits = pc.fill_null(pc.is_in(ids, value_set=present, skip_nulls=True), False)
            found |= np.asarray(hits.to_numpy(zero_copy_only=False), dtype=bool)
            return
        digests, by_probe = probe
        # Probes in sorted order walk the sorted digests forwards (cache-friendly), then unsort.
        left = np.empty(len(digests), dtype=np.int64)
        right = np.empty(len(digests), dtype=np.int64)
        left[by_probe] = np.searchsorted(self._sorted, digests[by_probe], side="left")
        right[by_probe] = np.searchsorted(self._sorted, digests[by_probe], side="right")
        # One root of that digest (the usual case): compare the strings, vectorised.
        single = np.flatnonzero((right - left == 1) & ~found)
        if len(single):
            at = pa.array(self._order[left[single]])
            same = pc.equal(ids.take(pa.array(single)), self.roots.take(at))
            found[single] = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
        # Several roots share the digest (a collision, or a repeated root): compare each.
        for i in np.flatnonzero((right - left > 1) & ~found):
            wanted = ids[int(i)].as_py()
            found[i] = any(self.roots[int(j)].as_py() == wanted for j in self._order[left[i] : right[i]])


_Probe = tuple[np.ndarray, np.ndarray]  # the ids' digests, and the order that sorts them


def contains_any(sets: Sequence[RootSet], ids: pa.Array) -> pa.Array:
    """Per id: whether it is one of the roots of any of ``sets`` (a null id is not).

    The ids are digested and sorted once per root width, whatever the number of sets: the
    ledger's roots are cached per fragment (private_reader.py), a handful of sets per query."""
    ids = ids.cast(pa.string())
    found = np.zeros(len(ids), dtype=bool)
    probes: dict[int, _Probe | None] = {}
    for roots in sets:
        if len(roots.roots) == 0:
            continue
        probe = None
        if roots._order is not None:
            if roots.width not in probes:
                digests = _digests(ids, roots.width)
                probes[roots.width] = (
                    None if digests is None else (digests, np.argsort(digests, kind="stable"))
                )
            probe = probes[roots.width]
        roots._found(ids, probe, found)
    return pa.array(found, pa.bool_())
