"""The upstream reader's index rules (``reader.rs``: ``StreamReader::open`` and ``summarize``).

One home for the rules that ``inspect``, projection and ``status`` all apply, so the three agree
on every execution's ``index_state``:

* an **index gap** is a missing or undecodable interior meta sequence (:func:`index_gaps`); a
  torn (undecodable) newest segment of a live stream is not a gap, nor is anything above the
  newest decodable sequence of a live stream;
* an execution is ``index_corrupt`` when a gap lies strictly between its RootStarted and
  RootEnded meta sequences, or after its RootStarted when it has no RootEnded, or when it has a
  RootEnded but no RootStarted and RootEnded's flag bit 0 (RootStarted lost) is clear;
* a RootEnded with flag bit 0 set is ``root_started_lost`` (the RootStarted is not needed);
* without a RootEnded the execution is ``no_root_ended`` (status ``running`` while the stream is
  alive, else ``abandoned``);
* the contract adds the data plane: a RootEnded whose data range holds a missing or unverifiable
  data segment is ``index_corrupt`` (:func:`index_state` with ``data_intact=False``).

Pure: callers pass sequence numbers, never files.
"""

from __future__ import annotations

from collections.abc import Iterable

COMPLETE = "complete"
INDEX_CORRUPT = "index_corrupt"
ROOT_STARTED_LOST = "root_started_lost"
NO_ROOT_ENDED = "no_root_ended"
INDEX_STATES = (COMPLETE, INDEX_CORRUPT, ROOT_STARTED_LOST, NO_ROOT_ENDED)


def index_gaps(meta_max: int, decoded: Iterable[int], present: Iterable[int], *, alive: bool) -> list[int]:
    """The index gaps of a stream whose meta plane goes up to ``meta_max``.

    ``present`` are the sequences whose file exists, ``decoded`` those that also decoded and
    verified. Mirrors ``StreamReader::open``: every sequence in ``1..=meta_max`` that is missing
    or undecodable is a gap, except, while the stream is alive, an undecodable ``meta_max`` (a
    torn tail) and anything above the newest decoded sequence.
    """
    ok = set(decoded)
    exists = set(present)
    gaps: list[int] = []
    for seq in range(1, meta_max + 1):
        if seq in ok:
            continue
        if seq in exists and seq == meta_max and alive:
            continue  # torn tail of a live stream
        gaps.append(seq)
    if alive:
        high = max(ok, default=0)
        gaps = [g for g in gaps if g < high]
    return gaps


def gap_shadows(started_seq: int | None, ended_seq: int | None, gaps: Iterable[int]) -> bool:
    """A gap strictly after the execution's first meta record and strictly before its RootEnded.

    The first record is the RootStarted's sequence, or the RootEnded's when RootStarted is absent
    (then no gap can lie strictly between). Without a RootEnded, any gap after RootStarted counts.
    """
    first = started_seq if started_seq is not None else (ended_seq if ended_seq is not None else 0)
    return any(g > first and (ended_seq is None or g < ended_seq) for g in gaps)


def index_state(
    *,
    started_seq: int | None,
    ended_seq: int | None,
    root_started_lost: bool,
    gaps: Iterable[int] = (),
    data_intact: bool = True,
) -> str:
    """One execution's meta-plane integrity state, by the reader's rules plus the contract's data rule.

    ``started_seq``/``ended_seq`` are the meta sequences holding its RootStarted/RootEnded (None
    when not found); ``root_started_lost`` is RootEnded's flag bit 0; ``data_intact`` is False when
    a data segment of the RootEnded range is missing or failed verification.
    """
    has_end = ended_seq is not None
    if gap_shadows(started_seq, ended_seq, gaps):
        return INDEX_CORRUPT
    if has_end and started_seq is None and not root_started_lost:
        return INDEX_CORRUPT
    if has_end and not data_intact:
        return INDEX_CORRUPT
    if has_end and root_started_lost:
        return ROOT_STARTED_LOST
    if not has_end:
        return NO_ROOT_ENDED
    return COMPLETE


def open_status(alive: bool) -> str:
    """Status of an execution without a RootEnded: ``running`` while its stream is alive."""
    return "running" if alive else "abandoned"
