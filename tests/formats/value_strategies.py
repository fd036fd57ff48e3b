"""Hypothesis strategies for codec-1 value trees (shared by the value codec and JSON tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from formats import value_codec as vc

keys = st.text(max_size=8)
names = st.text(min_size=1, max_size=12)

scalars = st.one_of(
    st.just(vc.Null()),
    st.builds(vc.String, st.text(max_size=20)),
    st.builds(vc.Int, st.integers(-(2**63), 2**63 - 1)),
    st.builds(vc.Float, st.integers(0, 2**64 - 1)),  # every bit pattern, NaN payloads included
    st.builds(vc.Bool, st.booleans()),
    st.builds(vc.Bytes, st.binary(max_size=16)),
    st.builds(vc.BigInt.from_int, st.integers(-(2**200), 2**200)),
    st.builds(vc.Enum, names, names, st.booleans()),
    st.builds(
        vc.Media,
        st.integers(0, 7),
        st.none() | st.text(max_size=10),
        st.sampled_from(["url", "base64", "file"]) | st.none(),
        st.text(max_size=10),
    ).map(lambda m: m if m.source is not None else vc.Media(m.kind, m.mime_type, None, "")),
    st.builds(vc.Omitted, st.sampled_from(["hostOwnedValue", "unsupportedValue"]), st.text(max_size=10)),
    st.just(vc.Unknown()),
)


def _containers(children: st.SearchStrategy[vc.Value]) -> st.SearchStrategy[vc.Value]:
    entries = st.lists(st.tuples(keys, children), max_size=4).map(tuple)
    return st.one_of(
        st.builds(vc.List, st.lists(children, max_size=4).map(tuple)),
        st.builds(vc.Map, entries),
        st.builds(vc.Class, names, entries, st.lists(st.binary(max_size=6), max_size=2).map(tuple)),
    )


values: st.SearchStrategy[vc.Value] = st.recursive(scalars, _containers, max_leaves=25)
