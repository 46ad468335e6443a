"""WriteTxnMarkers against a real broker: raw requests, as a transaction coordinator
sends them to a partition's leader, checked with read_committed consumers."""

from __future__ import annotations

import time
from typing import Any

from seglog.coordinator.offset_store import partition_for
from seglog.protocol import ApiKey, error_codes
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.conftest import BrokerProcess
from tests.broker.test_transactions import (
    _committed_end,
    _create,
    _offset_fetch,
    _read,
    _request,
)

OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default


def _open_transaction(
    broker: BrokerProcess, txn_id: str, topic: str, partition: int, values: list[bytes]
) -> tuple[int, int]:
    """A transaction of ``txn_id`` holding ``values`` in the partition: (producer id, epoch)."""
    init = _request(
        broker,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": txn_id, "transaction_timeout_ms": 60_000},
    )
    assert init["error_code"] == 0
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = _request(
        broker,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
        },
    )
    (result,) = added["results_by_topic_v3_and_below"][0]["results_by_partition"]
    assert result["partition_error_code"] == 0
    now = int(time.time() * 1000)
    records = build_batch(
        [SimpleRecord(v, timestamp=now) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    answer = _request(
        broker,
        ApiKey.PRODUCE,
        9,
        {
            "transactional_id": txn_id,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    return pid, epoch


def _marker(
    pid: int,
    epoch: int,
    commit: bool,
    partitions: dict[str, list[int]],
    coordinator_epoch: int = 0,
) -> dict[str, Any]:
    return {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": commit,
        "topics": [{"name": t, "partition_indexes": p} for t, p in partitions.items()],
        "coordinator_epoch": coordinator_epoch,
    }


def _write(broker: BrokerProcess, version: int, *markers: dict[str, Any]) -> list[dict[str, Any]]:
    """The error code of each (producer id, topic, partition) the request named."""
    answer = _request(broker, ApiKey.WRITE_TXN_MARKERS, version, {"markers": list(markers)})
    return [
        {
            (topic["name"], p["partition_index"]): p["error_code"]
            for topic in marker["topics"]
            for p in topic["partitions"]
        }
        | {"producer_id": marker["producer_id"]}
        for marker in answer["markers"]
    ]


def test_api_versions_advertises_write_txn_markers(broker: BrokerProcess) -> None:
    answer = _request(broker, ApiKey.API_VERSIONS, 3, {})
    rows = {row["api_key"]: row for row in answer["api_keys"]}
    assert (rows[27]["min_version"], rows[27]["max_version"]) == (0, 1)


def test_markers_commit_and_abort_for_read_committed_readers(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker.bootstrap, topic, 2)
    committed = [f"c{i}".encode() for i in range(5)]
    aborted = [f"a{i}".encode() for i in range(4)]
    pid1, epoch1 = _open_transaction(broker, f"{topic}-1", topic, 0, committed)
    pid2, epoch2 = _open_transaction(broker, f"{topic}-2", topic, 1, aborted)
    assert _read(broker.bootstrap, topic, 2) == []
    assert _committed_end(broker.bootstrap, topic) == 0
    # v0, then v1 (flexible): a retry of the same markers is answered alike.
    for version in (0, 1):
        results = _write(
            broker,
            version,
            _marker(pid1, epoch1, True, {topic: [0]}),
            _marker(pid2, epoch2, False, {topic: [1]}),
        )
        assert results == [
            {"producer_id": pid1, (topic, 0): 0},
            {"producer_id": pid2, (topic, 1): 0},
        ]
    assert sorted(_read(broker.bootstrap, topic, 2)) == sorted(committed)
    assert sorted(_read(broker.bootstrap, topic, 2, committed=False)) == sorted(committed + aborted)
    # The LSO moved past both markers of partition 0.
    assert _committed_end(broker.bootstrap, topic) == len(committed) + 2


def test_per_partition_errors(broker: BrokerProcess, topic: str) -> None:
    _create(broker.bootstrap, topic, 1)
    pid, epoch = _open_transaction(broker, f"{topic}-txn", topic, 0, [b"x"])
    (unknown,) = _write(
        broker,
        1,
        _marker(pid, epoch, False, {topic: [0, 7], f"{topic}-missing": [0]}),
    )
    code = error_codes.code_for
    assert unknown == {
        "producer_id": pid,
        (topic, 0): 0,
        (topic, 7): code("UNKNOWN_TOPIC_OR_PARTITION"),
        (f"{topic}-missing", 0): code("UNKNOWN_TOPIC_OR_PARTITION"),
    }
    # A marker of a newer coordinator epoch, then one of an older: a stale coordinator.
    (newer,) = _write(broker, 1, _marker(pid, epoch, False, {topic: [0]}, coordinator_epoch=5))
    assert newer[(topic, 0)] == 0
    (stale,) = _write(broker, 1, _marker(pid, epoch, False, {topic: [0]}, coordinator_epoch=4))
    assert stale[(topic, 0)] == code("TRANSACTION_COORDINATOR_FENCED")
    # A marker of a newer producer epoch fences the older one.
    (bumped,) = _write(broker, 1, _marker(pid, epoch + 1, False, {topic: [0]}, 5))
    assert bumped[(topic, 0)] == 0
    (old,) = _write(broker, 1, _marker(pid, epoch, True, {topic: [0]}, 5))
    assert old[(topic, 0)] == code("INVALID_PRODUCER_EPOCH")
    assert _read(broker.bootstrap, topic) == []
    assert _read(broker.bootstrap, topic, committed=False) == [b"x"]


def _offsets_transaction(
    broker: BrokerProcess, txn_id: str, group: str, topic: str
) -> tuple[int, int]:
    """A transaction of ``txn_id`` committing offset 7 of the topic for ``group``."""
    init = _request(
        broker,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": txn_id, "transaction_timeout_ms": 60_000},
    )
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = _request(
        broker,
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        {
            "transactional_id": txn_id,
            "producer_id": pid,
            "producer_epoch": epoch,
            "group_id": group,
        },
    )
    assert added["error_code"] == 0
    stored = _request(
        broker,
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        {
            "transactional_id": txn_id,
            "group_id": group,
            "producer_id": pid,
            "producer_epoch": epoch,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    assert stored["topics"][0]["partitions"][0]["error_code"] == 0
    return pid, epoch


def test_offsets_markers_make_transactional_offsets_visible_or_drop_them(
    broker: BrokerProcess, topic: str
) -> None:
    _create(broker.bootstrap, topic, 1)
    unstable = error_codes.code_for("UNSTABLE_OFFSET_COMMIT")
    for commit, expected in ((False, -1), (True, 7)):
        group = f"{topic}-group-{commit}"
        pid, epoch = _offsets_transaction(broker, f"{topic}-txn-{commit}", group, topic)
        assert _offset_fetch(broker, group, topic, stable=True) == (unstable, -1)
        offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
        (result,) = _write(
            broker, 1, _marker(pid, epoch, commit, {"__consumer_offsets": [offsets_partition]})
        )
        assert result[("__consumer_offsets", offsets_partition)] == 0
        assert _offset_fetch(broker, group, topic, stable=True) == (0, expected)
