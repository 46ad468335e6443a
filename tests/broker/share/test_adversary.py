"""Share groups against what a hostile or unlucky client does, and what the log does under them."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol import error_codes
from seglog.share.state import SharePartitionKey
from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import (
    WAIT,
    create_topic,
    produce_numbered,
    set_group_configs,
    state_records,
)
from tests.broker.share.raw import (
    RawClient,
    ack,
    acquired,
    only_partition,
    setup_group,
    share_fetch,
    topic_id,
)

ACCEPT, RELEASE = 1, 2


def test_records_deleted_under_the_group_are_archived(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    for start in (0, 10):
        produce_numbered(broker, topic, 10, start=start)  # two batches: 0-9, 10-19
    tid = topic_id(broker, topic)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        assert acquired(share_fetch(client, group, member, 0, [(tid, 0, [])], max_records=1)) == [
            (0, 9, 1)
        ]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deleted = admin.delete_records([TopicPartition(topic, 0, 15)])
        for future in deleted.values():
            future.result(timeout=WAIT)
        # Acknowledging records deleted meanwhile is no error; the next records start at 15.
        answer = share_fetch(client, group, member, 1, [(tid, 0, [ack(0, 9, ACCEPT)])])
        entry = only_partition(answer)
        assert entry["acknowledge_error_code"] == 0
        assert [(r["first_offset"], r["last_offset"]) for r in entry["acquired_records"]] == [
            (15, 19)
        ]


def test_a_deleted_topic_is_an_error_not_a_crash(broker: BrokerProcess) -> None:
    topic, tid, group = setup_group(broker)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        assert acquired(share_fetch(client, group, member, 0, [(tid, 0, [])])) == [(0, 9, 1)]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic])[topic].result(timeout=WAIT)
        answer = share_fetch(client, group, member, 1, [(tid, 0, [ack(0, 9, ACCEPT)])])
        entry = only_partition(answer)
        assert entry["acknowledge_error_code"] == error_codes.code_for("UNKNOWN_TOPIC_ID")
        assert entry["error_code"] == error_codes.code_for("UNKNOWN_TOPIC_ID")
    # The broker serves on.
    _, other, group2 = setup_group(broker)
    with RawClient(broker) as client:
        assert acquired(share_fetch(client, group2, member, 0, [(other, 0, [])])) == [(0, 9, 1)]


def test_a_topic_deleted_and_created_again_starts_the_group_afresh(
    broker: BrokerProcess,
) -> None:
    """The share-partitions of a deleted topic go with it: the topic made again under the
    same name is a new topic (a new id), read from its start, not from where the old one
    was acknowledged to."""
    topic, old, group = setup_group(broker)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        assert acquired(share_fetch(client, group, member, 0, [(old, 0, [])])) == [(0, 9, 1)]
        answer = share_fetch(client, group, member, 1, [(old, 0, [ack(0, 9, ACCEPT)])])
        assert only_partition(answer)["acknowledge_error_code"] == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=WAIT)
    recreated = False
    while not recreated:  # the name is free once the deletion has gone through
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=WAIT)
            recreated = True
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, exc
    produce_numbered(broker, topic, 4)
    new = topic_id(broker, topic)
    assert new != old
    with RawClient(broker) as client:
        answer = share_fetch(client, group, member, 0, [(new, 0, [])])
        assert acquired(answer) == [(0, 3, 1)]
    # The old topic's state went with it, as Kafka's share coordinator tombstones it.
    key = SharePartitionKey(group, old, 0)
    deadline = time.monotonic() + WAIT
    while (key, True) not in state_records(broker.bootstrap):
        assert time.monotonic() < deadline, "the deleted topic's share state was kept"
        time.sleep(0.2)


def test_absurd_acknowledgement_ranges_are_refused_quickly(broker: BrokerProcess) -> None:
    _, tid, group = setup_group(broker)
    member = str(uuid.uuid4())
    huge = 2**62
    with RawClient(broker) as client:
        share_fetch(client, group, member, 0, [(tid, 0, [])])
        cases = [
            [ack(0, huge, ACCEPT)],  # far past anything acquired
            [ack(5, 3, ACCEPT)],  # last before first
            [ack(-5, 3, ACCEPT)],  # negative offsets
            [ack(0, 9, ACCEPT, RELEASE)],  # two types for ten offsets
            [ack(0, 9)],  # no type at all
        ]
        for epoch, batches in enumerate(cases, start=1):
            answer = share_fetch(client, group, member, epoch, [(tid, 0, batches)], max_records=0)
            code = only_partition(answer)["acknowledge_error_code"]
            assert code in (
                error_codes.code_for("INVALID_REQUEST"),
                error_codes.code_for("INVALID_RECORD_STATE"),
            ), (batches, code)
        # Nothing was changed by the refused batches: all ten are still this member's.
        done = share_fetch(
            client, group, member, len(cases) + 1, [(tid, 0, [ack(0, 9, ACCEPT)])], max_records=0
        )
        assert only_partition(done)["acknowledge_error_code"] == 0


def test_the_share_session_limit(make_broker: Any) -> None:
    broker: BrokerProcess = make_broker(**{"group.share.max.share.sessions": "2"})
    _, tid, group = setup_group(broker)
    clients = [RawClient(broker) for _ in range(3)]
    try:
        answers = [
            share_fetch(client, group, str(uuid.uuid4()), 0, [(tid, 0, [])], max_records=1)
            for client in clients
        ]
        assert [a["error_code"] for a in answers[:2]] == [0, 0]
        assert answers[2]["error_code"] == error_codes.code_for("SHARE_SESSION_LIMIT_REACHED")
    finally:
        for client in clients:
            client.close()
