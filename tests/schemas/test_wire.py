"""The registry's wire format: header, split, Protobuf message indexes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.schemas.wire import (
    HEADER_SIZE,
    WireFormatError,
    encode_message_indexes,
    header,
    read_message_indexes,
    split,
)


@given(st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_header_and_split_round_trip(schema_id: int, payload: bytes) -> None:
    value = header(schema_id) + payload
    found, rest = split(value)
    assert found == schema_id
    assert bytes(rest) == payload
    assert len(header(schema_id)) == HEADER_SIZE


def test_the_serializers_header_is_read() -> None:
    # What every Confluent serializer writes: magic byte 0, then the id big-endian.
    assert split(b"\x00\x00\x00\x01\x02payload")[0] == 258


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (b"", "too short"),
        (b"\x00\x00\x01", "too short"),
        (b"\x01\x00\x00\x00\x01x", "magic byte 1"),
    ],
)
def test_what_is_not_in_the_wire_format_is_named(value: bytes, says: str) -> None:
    with pytest.raises(WireFormatError, match=says):
        split(value)


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=8), st.binary(max_size=8))
def test_message_indexes_round_trip(indexes: list[int], tail: bytes) -> None:
    data = encode_message_indexes(indexes) + tail
    found, pos = read_message_indexes(data)
    assert found == indexes
    assert data[pos:] == tail


def test_the_first_message_is_one_zero_byte() -> None:
    assert encode_message_indexes([0]) == b"\x00"
    # Confluent's long form of [0] (count 1, index 0) reads the same.
    assert read_message_indexes(b"\x02\x00") == ([0], 2)


def test_message_indexes_match_confluents_serializer() -> None:
    # The zigzag varints confluent-kafka's ProtobufSerializer writes for the path [1, 2].
    assert encode_message_indexes([1, 2]) == b"\x04\x02\x04"


@pytest.mark.parametrize("data", [b"", b"\x80", b"\x04\x02", b"\x7e"])
def test_truncated_or_lying_message_indexes_are_refused(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        read_message_indexes(data)
