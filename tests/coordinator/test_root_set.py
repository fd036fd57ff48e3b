"""RootSet: exact membership by sorted digests, whatever the digests collide on (pure)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from api.coordinator import root_set
from api.coordinator.root_set import RootSet, contains_any


def _hex(rng: random.Random, n: int, width: int = 64) -> list[str]:
    return [f"{rng.getrandbits(4 * width):0{width}x}" for _ in range(n)]


@pytest.mark.parametrize("width", [16, 32, 64])
def test_membership_equals_python_sets(width: int) -> None:
    rng = random.Random(width)
    roots = _hex(rng, 5000, width)
    others = _hex(rng, 2000, width)
    ids = roots[::3] + others + roots[:5] * 2 + [roots[0][:-1] + "g"]  # repeats, a near miss
    rng.shuffle(ids)
    got = RootSet(pa.array(roots)).contains(pa.array(ids)).to_pylist()
    assert got == [i in set(roots) for i in ids]


def test_digest_collisions_are_decided_by_the_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id the same digest: the answer must come from comparing the ids themselves."""
    monkeypatch.setattr(root_set, "_mix", lambda x: np.zeros_like(x))
    rng = random.Random(1)
    roots, others = _hex(rng, 50), _hex(rng, 50)
    ids = others + roots
    got = RootSet(pa.array(roots)).contains(pa.array(ids)).to_pylist()
    assert got == [False] * 50 + [True] * 50


def test_ids_the_digests_cannot_take_fall_back_to_the_same_answer() -> None:
    roots = ["a" * 64, "b" * 64, "short", "c" * 64]  # mixed lengths: no digests
    ids = pa.array(["short", "a" * 64, None, "zz", "c" * 64])
    assert RootSet(pa.array(roots)).contains(ids).to_pylist() == [True, True, False, False, True]
    same_width = RootSet(pa.array(["a" * 64, "b" * 64]))
    # A null, another width, a sliced array: each still answered exactly.
    assert same_width.contains(pa.array(["a" * 64, None])).to_pylist() == [True, False]
    assert same_width.contains(pa.array(["a" * 32])).to_pylist() == [False]
    sliced = pa.array(["x" * 64, "b" * 64, "a" * 64]).slice(1)
    assert same_width.contains(sliced).to_pylist() == [True, True]
    assert RootSet(pa.array([], pa.string())).contains(pa.array(["a" * 64])).to_pylist() == [False]


def test_large_strings_on_either_side_are_the_same_ids() -> None:
    roots = RootSet(pa.array(["a" * 64, "b" * 64], pa.large_string()))
    assert roots.contains(pa.array(["b" * 64, "c" * 64])).to_pylist() == [True, False]
    assert roots.contains(pa.array(["a" * 64], pa.large_string())).to_pylist() == [True]


def test_membership_in_any_of_several_sets_equals_their_union() -> None:
    rng = random.Random(7)
    pool = [f"{rng.getrandbits(128):032x}" for _ in range(3000)] + [f"{i:064x}" for i in range(500)]
    parts = [pool[:1000], pool[1000:2000], pool[2000:2600], [], [*pool[3000:], "short", None]]
    sets = [RootSet(pa.array(part, pa.string())) for part in parts]
    probes = [*pool[::3], "short", "absent", None, pool[2999]]
    expected = [p is not None and any(p in part for part in parts) for p in probes]
    assert contains_any(sets, pa.array(probes, pa.string())).to_pylist() == expected
