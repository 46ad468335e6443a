"""``__share_group_state`` records: Kafka's bytes, round trips, and malformed records refused."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.share.state import RecordState, SharePartitionKey, StateBatch
from seglog.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareSnapshot,
    ShareUpdate,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

TOPIC_ID = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
KEY = SharePartitionKey("g", TOPIC_ID, 3)


def _key_bytes(record_type: int, group: str, topic_id: uuid.UUID, partition: int) -> bytes:
    """A key built field by field with struct, independently of the codec."""
    name = group.encode()
    return (
        struct.pack(">hh", record_type, len(name))
        + name
        + topic_id.bytes
        + struct.pack(">i", partition)
    )


def test_snapshot_key_golden_bytes() -> None:
    # type 0, group "g" (length 1), the topic id's 16 bytes, partition 3
    expected = bytes.fromhex("0000 0001 67 000102030405060708090a0b0c0d0e0f 00000003")
    assert encode_key(SNAPSHOT, KEY) == expected
    assert expected == _key_bytes(0, "g", TOPIC_ID, 3)
    assert decode_key(expected) == (SNAPSHOT, KEY)


def test_update_key_golden_bytes() -> None:
    expected = _key_bytes(1, "group-1", TOPIC_ID, 0)
    assert expected[:2] == b"\x00\x01"
    key = SharePartitionKey("group-1", TOPIC_ID, 0)
    assert encode_key(UPDATE, key) == expected
    assert decode_key(expected) == (UPDATE, key)


def test_snapshot_value_golden_bytes() -> None:
    value = ShareSnapshot(
        snapshot_epoch=1,
        state_epoch=2,
        leader_epoch=5,
        start_offset=10,
        create_timestamp=1000,
        write_timestamp=2000,
        batches=(StateBatch(10, 12, RecordState.ACKNOWLEDGED, 1),),
    )
    expected = (
        struct.pack(">h", 0)  # value version
        + struct.pack(">iiiqqq", 1, 2, 5, 10, 1000, 2000)
        + bytes([2])  # compact array: one batch
        + struct.pack(">qqbh", 10, 12, 2, 1)
        + bytes([0])  # the batch's tagged fields
        + bytes([0])  # the value's tagged fields
    )
    assert encode_value(value) == expected
    assert decode_value(SNAPSHOT, expected) == value


def test_update_value_golden_bytes() -> None:
    value = ShareUpdate(
        snapshot_epoch=3,
        leader_epoch=-1,
        start_offset=-1,
        batches=(
            StateBatch(20, 29, RecordState.AVAILABLE, 2),
            StateBatch(30, 30, RecordState.ARCHIVED, 5),
        ),
    )
    expected = (
        struct.pack(">h", 0)
        + struct.pack(">iiq", 3, -1, -1)
        + bytes([3])  # compact array: two batches
        + struct.pack(">qqbh", 20, 29, 0, 2)
        + bytes([0])
        + struct.pack(">qqbh", 30, 30, 4, 5)
        + bytes([0])
        + bytes([0])
    )
    assert encode_value(value) == expected
    assert decode_value(UPDATE, expected) == value


def test_unknown_tagged_fields_are_skipped() -> None:
    value = ShareUpdate(snapshot_epoch=0, leader_epoch=0, start_offset=7)
    plain = encode_value(value)
    # One tag Kafka may define later (tag 9, two bytes), in the value's tagged section.
    tagged = plain[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
    assert decode_value(UPDATE, tagged) == value


_batches = st.lists(
    st.builds(
        lambda first, length, state, count: StateBatch(first, first + length, state, count),
        st.integers(0, 2**62),
        st.integers(0, 2**20),
        st.sampled_from(list(RecordState)),
        st.integers(-(2**15), 2**15 - 1),
    ),
    max_size=20,
).map(tuple)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_keys = st.builds(
    SharePartitionKey,
    st.text(max_size=40),
    st.uuids(),
    st.integers(0, 2**31 - 1),
)


@given(record_type=st.sampled_from([SNAPSHOT, UPDATE]), key=_keys)
def test_keys_round_trip(record_type: int, key: SharePartitionKey) -> None:
    data = encode_key(record_type, key)
    assert decode_key(data) == (record_type, key)
    assert data == _key_bytes(record_type, key.group_id, key.topic_id, key.partition)


@given(value=st.builds(ShareSnapshot, _int32, _int32, _int32, _int64, _int64, _int64, _batches))
def test_snapshots_round_trip(value: ShareSnapshot) -> None:
    assert decode_value(SNAPSHOT, encode_value(value)) == value


@given(value=st.builds(ShareUpdate, _int32, _int32, _int64, _batches))
def test_updates_round_trip(value: ShareUpdate) -> None:
    assert decode_value(UPDATE, encode_value(value)) == value


@given(value=st.builds(ShareUpdate, _int32, _int32, _int64, _batches), cut=st.integers(0, 200))
def test_a_value_cut_short_is_corrupt(value: ShareUpdate, cut: int) -> None:
    data = encode_value(value)
    with pytest.raises(CorruptRecordError):
        decode_value(UPDATE, data[: min(cut, len(data) - 1)])


_MALFORMED_KEYS = {
    "empty": b"",
    "one byte": b"\x00",
    "unknown record type": _key_bytes(2, "g", TOPIC_ID, 0),
    "negative type": _key_bytes(-1, "g", TOPIC_ID, 0),
    "cut short": _key_bytes(0, "g", TOPIC_ID, 0)[:-1],
    "trailing bytes": _key_bytes(0, "g", TOPIC_ID, 0) + b"\x00",
    "not UTF-8": b"\x00\x00\x00\x02\xff\xfe" + TOPIC_ID.bytes + b"\x00\x00\x00\x00",
    "null group": b"\x00\x00\xff\xff" + TOPIC_ID.bytes + b"\x00\x00\x00\x00",
}


@pytest.mark.parametrize("data", _MALFORMED_KEYS.values(), ids=list(_MALFORMED_KEYS))
def test_a_malformed_key_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="__share_group_state"):
        decode_key(data)


_GOOD_UPDATE = encode_value(ShareUpdate(0, 0, 5, (StateBatch(5, 6, RecordState.AVAILABLE, 1),)))


def _with_batch(first: int, last: int, state: int, count: int) -> bytes:
    """The good update with its one batch replaced, field for field."""
    old = struct.pack(">qqbh", 5, 6, 0, 1)
    assert _GOOD_UPDATE.count(old) == 1
    return _GOOD_UPDATE.replace(old, struct.pack(">qqbh", first, last, state, count))


_MALFORMED_VALUES = {
    "empty": (UPDATE, b""),
    "unknown version": (UPDATE, b"\x00\x01" + _GOOD_UPDATE[2:]),
    "unknown record type": (7, _GOOD_UPDATE),
    "update read as a snapshot": (SNAPSHOT, _GOOD_UPDATE),
    "unknown delivery state": (UPDATE, _with_batch(5, 6, 3, 1)),
    "batch backwards": (UPDATE, _with_batch(6, 5, 0, 1)),
    "array longer than the value": (UPDATE, _GOOD_UPDATE[:18] + b"\x7f" + _GOOD_UPDATE[19:]),
}


@pytest.mark.parametrize(
    ("record_type", "data"), _MALFORMED_VALUES.values(), ids=list(_MALFORMED_VALUES)
)
def test_a_malformed_value_is_corrupt(record_type: int, data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_value(record_type, data)
