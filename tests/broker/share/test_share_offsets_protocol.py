"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the wire."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer

from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import create_topic, produce_numbered, set_group_configs
from tests.broker.share.raw import RawClient, ack, share_fetch, topic_id

ACCEPT = 1


def _describe(client: RawClient, group: str, topic: str | None = None) -> Any:
    topics = None if topic is None else [{"topic_name": topic, "partitions": [0]}]
    answer = client.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": group, "topics": topics}]}
    )
    [described] = answer["groups"]
    return described


def _start_offsets(described: Any) -> dict[tuple[str, int], int]:
    return {
        (t["topic_name"], p["partition_index"]): p["start_offset"]
        for t in described["topics"]
        for p in t["partitions"]
    }


def _at(partition: int, offset: int) -> dict[str, int]:
    return {"partition_index": partition, "start_offset": offset}


def _heartbeat(client: RawClient, group: str, member: str, epoch: int, topic: str) -> Any:
    return client.request(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": [topic] if epoch == 0 else None,
        },
    )


def test_describe_alter_and_delete_share_group_offsets(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    produce_numbered(broker, topic, 20)
    tid = topic_id(broker, topic)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        joined = _heartbeat(client, group, member, 0, topic)
        assert joined["error_code"] == 0, joined
        share_fetch(client, group, member, 0, [(tid, 0, [])])
        share_fetch(client, group, member, 1, [(tid, 0, [ack(0, 19, ACCEPT)])], max_records=0)
        assert _start_offsets(_describe(client, group)) == {(topic, 0): 20}
        assert _start_offsets(_describe(client, group, topic)) == {(topic, 0): 20}
        # A member is in the group: offsets cannot be changed under it.
        body = {
            "group_id": group,
            "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 5}]}
            ],
        }
        refused = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)
        assert refused["error_code"] == error_codes.code_for("NON_EMPTY_GROUP")
        left = _heartbeat(client, group, member, -1, topic)
        assert left["error_code"] == 0
        share_fetch(client, group, member, -1, [])
        altered = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)
        assert altered["error_code"] == 0, altered
        assert altered["responses"][0]["partitions"][0]["error_code"] == 0
        assert _start_offsets(_describe(client, group)) == {(topic, 0): 5}
        # Back at 5: the next member gets 5-19 again.
        again = str(uuid.uuid4())
        answer = share_fetch(client, group, again, 0, [(tid, 0, [])])
        ranges = answer["responses"][0]["partitions"][0]["acquired_records"]
        assert (ranges[0]["first_offset"], ranges[-1]["last_offset"]) == (5, 19)
        share_fetch(client, group, again, -1, [(tid, 0, [ack(5, 19, ACCEPT)])])
        deleted = client.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            0,
            {"group_id": group, "topics": [{"topic_name": topic}]},
        )
        assert deleted["error_code"] == 0, deleted
        assert deleted["responses"][0]["error_code"] == 0
        assert _start_offsets(_describe(client, group)) == {}


def test_share_offsets_of_other_groups_and_topics(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    produce_numbered(broker, topic, 1)
    classic = f"c-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": classic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        while consumer.poll(1.0) is None:
            pass
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    with RawClient(broker) as client:
        described = _describe(client, classic)
        assert described["error_code"] == error_codes.code_for("GROUP_ID_NOT_FOUND")
        body = {
            "group_id": f"s-{uuid.uuid4().hex[:8]}",
            "topics": [
                {
                    "topic_name": "no-such-topic",
                    "partitions": [{"partition_index": 0, "start_offset": 0}],
                }
            ],
        }
        answer = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)
        assert answer["error_code"] == 0
        partition = answer["responses"][0]["partitions"][0]
        assert partition["error_code"] == error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
