"""The fold policy of index_tiers (pure): when a fold adds a delta and how many entries it merges,
and that over many folds the entries stay few while each row is rewritten a few times only."""

from __future__ import annotations

from api.dataplane.index_tiers import entries_to_merge


def test_a_small_fold_onto_big_entries_adds_a_delta() -> None:
    assert entries_to_merge([10_000_000], 100) == 0
    assert entries_to_merge([10_000_000, 50_000, 2_000], 100) == 0


def test_a_fold_takes_in_the_newest_entries_while_they_are_small_beside_what_it_carries() -> None:
    assert entries_to_merge([10_000_000, 50_000, 400], 100) == 1  # 400 <= 4 x 100
    assert entries_to_merge([10_000_000, 2_000, 400], 100) == 2  # then 2 000 <= 4 x 500
    assert entries_to_merge([1_000, 400], 100) == 2  # the first entry too, once it is small enough
    assert entries_to_merge([], 100) == 0


def _simulate(first: int, folds: int, per_fold: int) -> tuple[int, float]:
    entries = [first]
    rewritten = most = 0
    for _ in range(folds):
        merge = entries_to_merge(entries, per_fold)
        folded = per_fold + sum(entries[len(entries) - merge :])
        rewritten += folded - per_fold
        del entries[len(entries) - merge :]
        entries.append(folded)
        most = max(most, len(entries))
    assert sum(entries) == first + folds * per_fold  # nothing lost or counted twice
    return most, rewritten / (first + folds * per_fold)


def test_many_folds_keep_few_entries_and_rewrite_each_row_a_few_times() -> None:
    most, amplification = _simulate(10_000_000, 100_000, 100)
    assert most <= 8
    assert amplification < 12  # merging every fold into the first entry: ~50 000
    most, amplification = _simulate(100, 100_000, 100)  # a dataset indexed from its first rows
    assert most <= 9
    assert amplification < 20
