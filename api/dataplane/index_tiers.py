"""How an index fold treats the entries (the first index and its deltas) a column already has.

Lance folds new rows into an index either as a new delta entry (``num_indices_to_merge=0``: costs
the new rows) or merged with the newest N entries (costs those entries' rows too). Merging every
fold into one entry rewrites all of it each time: at 188 M value leaves a BTREE fold rewrites
about 1 GB for a few thousand new rows. Deltas alone cannot pile up either, since every query
probes every entry. The policy is the logarithmic method of log-structured merges: a fold takes
in the newest entry while it holds at most ``GROWTH`` times the rows being folded so far, then
the next one, and so on. Entry sizes then grow geometrically from the newest to the oldest, a
column keeps about log_GROWTH(rows / rows per fold) entries, and a row is rewritten about that
many times in its life (simulated in tests/projection_io/test_index_tiers.py: 100 000 folds of
100 rows onto 10 M, at most 8 entries and each row rewritten about 9 times).
"""

from __future__ import annotations

GROWTH = 4  # an entry is merged once the rows folded with it reach a quarter of its own


def entries_to_merge(rows: list[int], new_rows: int, growth: int = GROWTH) -> int:
    """How many of the newest entries a fold of ``new_rows`` merges (0: the fold adds a delta).

    ``rows`` holds the rows each existing entry indexes, oldest first.
    """
    merge, carried = 0, new_rows
    while merge < len(rows) and rows[-merge - 1] <= growth * carried:
        carried += rows[-merge - 1]
        merge += 1
    return merge
