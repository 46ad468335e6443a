"""Hypothesis strategies for records."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from seglog.records.builder import HeaderInput, SimpleRecord
from seglog.records.compression import Codec
from seglog.records.record import Header

BASE_TS = 1_700_000_000_000

codecs = st.sampled_from(list(Codec))

headers = st.lists(
    st.builds(Header, st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)

# Timestamps around now: what producers send.
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

# Any timestamp whose difference from any other still fits in int64 (the delta is a
# varlong): negative ones, -1 ("none"), and values far in the future.
wide_timestamps = st.integers(-(2**62), 2**62 - 1) | st.sampled_from([-1, 0, BASE_TS])

wide_records = st.lists(
    st.builds(
        SimpleRecord,
        value=st.none() | st.binary(max_size=300),
        key=st.none() | st.binary(max_size=40),
        timestamp=wide_timestamps,
        headers=headers,
    ),
    min_size=0,
    max_size=12,
)


@st.composite
def offset_deltas(draw: st.DrawFn, count: int) -> list[int]:
    """``count`` strictly increasing offset deltas, starting anywhere, with gaps."""
    current = draw(st.integers(0, 100))
    out: list[int] = []
    for gap in draw(st.lists(st.integers(1, 1000), min_size=count, max_size=count)):
        out.append(current)
        current += gap
    return out


def header_pairs(headers: Sequence[HeaderInput]) -> list[tuple[str, bytes | None]]:
    """Headers as (key, value) pairs, the form kafka-python takes and returns."""
    return [(h.key, h.value) if isinstance(h, Header) else h for h in headers]


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@st.composite
def full_range_records(draw: st.DrawFn, max_size: int = 50) -> list[SimpleRecord]:
    """0..``max_size`` records whose timestamps lie anywhere in int64, within one window
    of width 2**63 - 1 so that every delta from the first still fits in int64."""
    low = draw(st.integers(INT64_MIN, INT64_MAX))
    high = min(INT64_MAX, low + INT64_MAX)
    stamp = st.integers(low, high) | st.sampled_from([low, high])
    return draw(
        st.lists(
            st.builds(
                SimpleRecord,
                value=st.none() | st.binary(max_size=40),
                key=st.none() | st.binary(max_size=12),
                timestamp=stamp,
                headers=headers,
            ),
            max_size=max_size,
        )
    )
