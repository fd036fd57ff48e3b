"""The one-unpack decoders of the common SpanStart and ValueOccurrence shapes agree with the
field-by-field decoders: same facts for every valid body, same error for every corrupted one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prof_strategies import span_starts, value_occurrences

from formats import evidence as ev
from formats.errors import FormatError

_VALUE_OCCURRENCE = ev._DECODERS.index(ev._decode_value_occurrence)


def _slow_value_occurrence(r: Any) -> ev.ValueOccurrence:
    call, ctx = ev._r_call(r), ev._r_ctx(r)
    role = ev._VALUEROLE[r.tag("value role", len(ev._VALUEROLE))]
    return ev.ValueOccurrence(call, ctx, role, ev._r_state(r, "value state"))


def _slow_decoders() -> tuple[Any, ...]:
    decoders = list(ev._DECODERS)
    decoders[_VALUE_OCCURRENCE] = _slow_value_occurrence
    return tuple(decoders)


def _outcome(payload: bytes, count: int) -> tuple[str, Any]:
    try:
        return "ok", ev.decode_evidence_payload(payload, count)
    except FormatError as exc:
        return "error", (type(exc).__name__, exc.reason)


common = st.lists(span_starts | value_occurrences, min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(common, st.data())
def test_fast_and_field_by_field_decoders_agree(fact_list: list[Any], data: Any) -> None:
    payload = ev.encode_evidence_payload(fact_list)
    # Unchanged, then one byte changed (often a presence flag, a tag or a length), then cut short.
    where = data.draw(st.integers(0, len(payload) - 1))
    flipped = bytearray(payload)
    flipped[where] = data.draw(st.integers(0, 255))
    cut = payload[: data.draw(st.integers(0, len(payload) - 1))]
    for body in (payload, bytes(flipped), cut):
        fast = _outcome(body, len(fact_list))
        with pytest.MonkeyPatch.context() as m:
            m.setattr(ev, "_DECODERS", _slow_decoders())
            m.setattr(ev, "_fast_span_start", lambda r: None)
            slow = _outcome(body, len(fact_list))
        assert fast == slow
    assert _outcome(payload, len(fact_list)) == ("ok", fact_list)
