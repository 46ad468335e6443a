"""``__transaction_state`` values in both of Kafka's versions: version 0 and the
flexible version 1 (tagged fields) Kafka 4 writes from ``transaction.version`` 1 on."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import OffsetStore
from seglog.coordinator.transaction_coordinator import TransactionCoordinator
from seglog.coordinator.txn_log import TxnLogValue, TxnState
from seglog.errors import CorruptRecordError
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir

ONGOING = TxnLogValue(5, 1, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), 7, 6)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tagged(*fields: tuple[int, bytes]) -> bytes:
    return _uvarint(len(fields)) + b"".join(
        _uvarint(tag) + _uvarint(len(data)) + data for tag, data in fields
    )


def _kafka_v1(
    pid: int,
    epoch: int,
    status: int,
    partitions: dict[str, list[int]] | None,
    *,
    tagged: bytes = b"\x00",
    partition_tagged: bytes = b"\x00",
    times: tuple[int, int] = (7, 6),
) -> bytes:
    """A version 1 value laid out field by field from Kafka's TransactionLogValue.json."""
    out = bytearray(b"\x00\x01")
    out += pid.to_bytes(8, "big", signed=True) + epoch.to_bytes(2, "big", signed=True)
    out += (60_000).to_bytes(4, "big") + bytes([status])
    if partitions is None:
        out += b"\x00"  # a null compact array
    else:
        out += _uvarint(len(partitions) + 1)
        for topic, ids in partitions.items():
            out += _uvarint(len(topic) + 1) + topic.encode() + _uvarint(len(ids) + 1)
            out += b"".join(i.to_bytes(4, "big") for i in ids) + partition_tagged
    out += times[0].to_bytes(8, "big", signed=True) + times[1].to_bytes(8, "big", signed=True)
    return bytes(out + tagged)


def test_version_1_matches_the_worked_example() -> None:
    value = TxnLogValue(
        5, 1, 60_000, TxnState.ONGOING, frozenset({("a", 0)}), 7, 6, client_transaction_version=2
    )
    data = txn_log.encode_value(value, 1)
    assert data.hex() == (
        "0001"
        "0000000000000005"
        "0001"
        "0000ea60"
        "01"
        "02"  # one topic
        "0261"  # "a"
        "0200000000"  # partition 0
        "00"  # the partition's tagged fields
        "0000000000000007"
        "0000000000000006"
        "01"  # one tagged field:
        "020200 02"  # tag 2 (client transaction version), 2 bytes, 2
    ).replace(" ", "")
    assert data == _kafka_v1(5, 1, 1, {"a": [0]}, tagged=_tagged((2, b"\x00\x02")))
    assert txn_log.decode_value(data) == value


def test_version_1_skips_tags_it_does_not_know_and_reads_those_it_does() -> None:
    data = _kafka_v1(
        5,
        1,
        1,
        {"a": [0, 1], "b": [2]},
        partition_tagged=_tagged((100, b"\x00\x03foo"), (101, b"\x00\x00\x0f\xa0")),
        tagged=_tagged(
            (0, (41).to_bytes(8, "big")),
            (1, (42).to_bytes(8, "big")),
            (2, b"\x00\x02"),
            (100, b"\x00\x03foo"),
        ),
    )
    assert txn_log.decode_value(data) == TxnLogValue(
        5,
        1,
        60_000,
        TxnState.ONGOING,
        frozenset({("a", 0), ("a", 1), ("b", 2)}),
        7,
        6,
        previous_producer_id=41,
        next_producer_id=42,
        client_transaction_version=2,
    )


def test_an_empty_state_stores_null_partitions_in_both_versions() -> None:
    empty = TxnLogValue(5, 1, 60_000, TxnState.EMPTY, frozenset(), 7, -1)
    assert txn_log.encode_value(empty, 0)[17:21] == b"\xff\xff\xff\xff"
    assert txn_log.encode_value(empty, 1) == _kafka_v1(5, 1, 0, None, times=(7, -1))
    for version in (0, 1):
        assert txn_log.decode_value(txn_log.encode_value(empty, version)) == empty


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x02" + txn_log.encode_value(ONGOING, 1)[2:],  # a version Kafka 4 does not have
        txn_log.encode_value(ONGOING, 1)[:-1],  # cut short
        txn_log.encode_value(ONGOING, 1) + b"\x00",  # bytes left over
        _kafka_v1(5, 1, 1, {"a": [0]}, tagged=_tagged((100, b"\x00"))[:-1]),  # a tag cut short
    ],
)
def test_a_value_that_does_not_parse_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        txn_log.decode_value(data)


@given(
    pid=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32_767),
    state=st.sampled_from(list(TxnState)),
    partitions=st.frozensets(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 2**31 - 1))),
    times=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
    tagged=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62), st.sampled_from([0, 1, 2])),
    version=st.sampled_from([0, 1]),
)
def test_values_round_trip(
    pid: int,
    epoch: int,
    state: TxnState,
    partitions: frozenset[tuple[str, int]],
    times: tuple[int, int],
    tagged: tuple[int, int, int],
    version: int,
) -> None:
    if state == TxnState.EMPTY:
        partitions = frozenset()
    if version == 0:
        tagged = (-1, -1, 0)  # version 0 has no room for them
    value = TxnLogValue(pid, epoch, 1000, state, partitions, *times, *tagged)
    assert txn_log.decode_value(txn_log.encode_value(value, version)) == value


def test_value_version_follows_the_transaction_version() -> None:
    assert [txn_log.value_version(level) for level in (0, 1, 2)] == [0, 1, 1]


def _coordinator(log_dir: LogDir, transaction_version: int = 0) -> TransactionCoordinator:
    ids = itertools.count(9000)
    offsets = OffsetStore(log_dir, partitions=1)
    offsets.load()
    return TransactionCoordinator(
        log_dir,
        offsets,
        new_producer_id=lambda: next(ids),
        clock=time.time,
        partitions=1,
        transaction_version=transaction_version,
    )


def test_a_transaction_log_written_by_kafka_loads(tmp_path: Path) -> None:
    """Version 1 records as a Kafka 4 coordinator writes them (a tombstone, an Empty id,
    a finished and a prepared commit) load; the prepared commit is completed."""
    log_dir = LogDir.open(tmp_path / "data")
    try:
        log_dir.create_topic("t", 1)
        log_dir.create_topic(txn_log.TOPIC, 1, {"cleanup.policy": "compact"})
        # The data of the prepared transaction, its marker not written yet.
        log_dir.log("t", 0).append(
            build_batch(
                [SimpleRecord(b"in flight", timestamp=1_700_000_000_000)],
                producer_id=31,
                producer_epoch=4,
                base_sequence=0,
                is_transactional=True,
            )
        )
        client_v2 = _tagged((2, b"\x00\x02"))
        records = [
            (b"gone", _kafka_v1(11, 0, 0, None)),
            (b"gone", None),
            (b"idle", _kafka_v1(21, 3, 0, None, tagged=client_v2)),
            (b"done", _kafka_v1(22, 1, 4, {"t": [0]}, tagged=client_v2)),
            (b"busy", _kafka_v1(31, 4, 2, {"t": [0]}, tagged=client_v2)),
        ]
        log_dir.log(txn_log.TOPIC, 0).append(
            build_batch(
                [
                    SimpleRecord(value, txn_log.encode_key(tid.decode()), 1_700_000_000_000)
                    for tid, value in records
                ]
            )
        )
        coordinator = _coordinator(log_dir)
        coordinator.load()
        txns = coordinator.txns
        assert sorted(txns) == ["busy", "done", "idle"]
        assert (txns["idle"].producer_id, txns["idle"].producer_epoch) == (21, 3)
        assert txns["idle"].state == TxnState.EMPTY
        assert txns["done"].state == TxnState.COMPLETE_COMMIT
        assert txns["busy"].state == TxnState.COMPLETE_COMMIT
        assert txns["busy"].client_transaction_version == 2
        log = log_dir.log("t", 0)
        assert log.last_stable_offset == log.log_end_offset == 2
    finally:
        log_dir.close()


@pytest.mark.parametrize(("level", "version"), [(0, 0), (2, 1)])
def test_records_are_written_in_the_version_of_the_transaction_version(
    tmp_path: Path, level: int, version: int
) -> None:
    log_dir = LogDir.open(tmp_path / "data")
    try:
        log_dir.create_topic("t", 1)
        coordinator = _coordinator(log_dir, level)
        coordinator.load()
        init = coordinator.init_producer_id("x", 10_000)
        coordinator.add_partitions("x", init.producer_id, init.producer_epoch, [("t", 0)])
        values = [
            record.value
            for record in log_dir.read_records(txn_log.TOPIC, 0, 0, max_bytes=1 << 20)
            if record.value is not None
        ]
        assert [int.from_bytes(v[:2], "big") for v in values] == [version, version]
        reloaded = _coordinator(log_dir, level)
        reloaded.load()
        assert reloaded.txns["x"].partitions == {("t", 0)}
    finally:
        log_dir.close()
