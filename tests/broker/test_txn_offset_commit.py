"""TxnOffsetCommit's member checks (v3+), as Kafka's group coordinator makes them:
the generation, member id and group instance id of the consumer whose offsets a
transaction commits, skipped for generation -1 with no member named."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from seglog.protocol import ApiKey, decode_response, encode_request, error_codes
from tests.broker.conftest import BrokerProcess
from tests.broker.test_bad_input import recv_frame, send_frame
from tests.broker.test_transactions import _create, _producer


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose groups form without the initial rebalance delay."""
    process = BrokerProcess(
        tmp_path_factory.mktemp("txn-offsets") / "data",
        {"group.initial.rebalance.delay.ms": "0"},
    )
    process.start()
    yield process
    assert process.stop() == 0


def _call(sock: socket.socket, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
    send_frame(sock, encode_request(api, version, 3, "txn-offsets-test", body))
    _, response = decode_response(api, version, memoryview(recv_frame(sock)))
    return response


def _join_static(sock: socket.socket, group: str, instance: str) -> tuple[str, int]:
    """A static member joins ``group`` alone and syncs: (member id, generation)."""
    joined = _call(
        sock,
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert joined["error_code"] == 0
    member, generation = joined["member_id"], joined["generation_id"]
    synced = _call(
        sock,
        ApiKey.SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": instance,
            "assignments": [{"member_id": member, "assignment": b""}],
        },
    )
    assert synced["error_code"] == 0
    return member, generation


def test_txn_offset_commit_checks_the_member_as_kafka_does(
    broker: BrokerProcess,
) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic)
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    try:
        member, generation = _join_static(sock, group, "static-1")
        txn_id = f"txn-{topic}"
        init = _call(
            sock,
            ApiKey.INIT_PRODUCER_ID,
            4,
            {"transactional_id": txn_id, "transaction_timeout_ms": 60_000},
        )
        pid, epoch = init["producer_id"], init["producer_epoch"]
        stranger = f"{group}-unknown"
        for joined in (group, stranger):
            added = _call(
                sock,
                ApiKey.ADD_OFFSETS_TO_TXN,
                3,
                {
                    "transactional_id": txn_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "group_id": joined,
                },
            )
            assert added["error_code"] == 0

        def commit(
            generation_id: int,
            member_id: str,
            instance: str | None,
            *,
            version: int = 3,
            group_id: str = group,
        ) -> str:
            body: dict[str, Any] = {
                "transactional_id": txn_id,
                "group_id": group_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                        ],
                    }
                ],
            }
            if version >= 3:
                body |= {
                    "generation_id": generation_id,
                    "member_id": member_id,
                    "group_instance_id": instance,
                }
            response = _call(sock, ApiKey.TXN_OFFSET_COMMIT, version, body)
            code = response["topics"][0]["partitions"][0]["error_code"]
            return error_codes.name_for(code)

        assert commit(generation, member, "static-1") == "NONE"
        assert commit(generation, member, None) == "NONE"
        assert commit(generation + 1, member, "static-1") == "ILLEGAL_GENERATION"
        assert commit(generation, "someone-else", "static-1") == "FENCED_INSTANCE_ID"
        assert commit(generation, member, "static-2") == "UNKNOWN_MEMBER_ID"
        assert commit(generation, "someone-else", None) == "UNKNOWN_MEMBER_ID"
        # A member named with generation -1 is still checked: -1 is not its generation.
        assert commit(-1, member, None) == "ILLEGAL_GENERATION"
        # No member named: no checks, whatever the group (clients below v3 send none).
        assert commit(-1, "", None) == "NONE"
        assert commit(-1, "", None, version=2) == "NONE"
        # A group this broker does not know takes only such commits.
        assert commit(1, "m", None, group_id=stranger) == "ILLEGAL_GENERATION"
        assert commit(-1, "", None, group_id=stranger) == "NONE"
        ended = _call(
            sock,
            ApiKey.END_TXN,
            3,
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": True,
            },
        )
        assert ended["error_code"] == 0
    finally:
        sock.close()


def _consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert consumer.assignment(), "the consumer was never assigned its partition"
    return consumer


def test_send_offsets_with_the_group_metadata_of_a_current_and_of_a_departed_member(
    broker: BrokerProcess,
) -> None:
    """confluent-kafka's consume-transform-produce sends the consumer's generation and
    member id: accepted while it is the group's member, refused once it has left."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        plain.produce(topic, f"m{i}".encode(), partition=0)
    plain.flush(10)
    consumer = _consumer(broker.bootstrap, group, topic)
    producer = _producer(broker.bootstrap, f"txn-{topic}")
    producer.init_transactions(10)
    producer.begin_transaction()
    offsets = [TopicPartition(topic, 0, 2)]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 10)
    producer.commit_transaction(10)
    stale = consumer.consumer_group_metadata()
    consumer.close()  # leaves the group: its member id is no longer known
    producer.begin_transaction()
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 3)], stale, 10)
    assert refused.value.args[0].name() == "UNKNOWN_MEMBER_ID"
    producer.abort_transaction(10)
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    (committed,) = check.committed([TopicPartition(topic, 0)], timeout=10)
    check.close()
    assert committed.offset == 2
