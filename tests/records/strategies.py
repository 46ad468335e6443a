"""Hypothesis strategies for records."""

from __future__ import annotations

from hypothesis import strategies as st

from seglog.records.builder import SimpleRecord
from seglog.records.record import Header

BASE_TS = 1_700_000_000_000

headers = st.lists(
    st.builds(Header, st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)

records = st.lists(
    st.builds(
        SimpleRecord,
        value=st.none() | st.binary(max_size=64),
        key=st.none() | st.binary(max_size=16),
        timestamp=st.integers(BASE_TS - 10**9, BASE_TS + 10**9),
        headers=headers,
    ),
    min_size=1,
    max_size=20,
)
