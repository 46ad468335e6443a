"""What the share group tests share: a topic of numbered records, group configs, consumers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol.api_keys import ApiKey
from seglog.share.state import SharePartitionKey
from seglog.share.state_records import decode_key
from seglog.share.state_store import STATE_TOPIC
from tests.broker.conftest import BrokerProcess
from tests.broker.test_dynamic_configs import _request

GROUP = 32
SET = 0
WAIT = 120.0


def create_topic(broker: BrokerProcess, partitions: int = 1) -> str:
    """A new topic of ``partitions`` partitions."""
    topic = f"share-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=WAIT)
    return topic


def produce_numbered(
    broker: BrokerProcess,
    topic: str,
    count: int,
    *,
    start: int = 0,
    extra: dict[str, Any] | None = None,
) -> None:
    """``count`` records with values ``b"<n>"`` for n from ``start``, all acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, **(extra or {})})
    for n in range(start, start + count):
        while True:
            try:
                producer.produce(topic, str(n).encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(WAIT) == 0


def group_configs_request(group: str, configs: dict[str, str]) -> dict[str, Any]:
    """An IncrementalAlterConfigs v1 body: SET ``configs`` on the GROUP resource ``group``."""
    return {
        "resources": [
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [
                    {"name": key, "config_operation": SET, "value": value}
                    for key, value in configs.items()
                ],
            }
        ],
        "validate_only": False,
    }


def set_group_configs(broker: BrokerProcess, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of ``configs`` on the GROUP resource ``group``."""
    body = group_configs_request(group, configs)
    answer = _request(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"][0]
    assert answer["error_code"] == 0, answer


def share_consumer(
    broker: BrokerProcess, group: str, topic: str, *, explicit: bool = False, **extra: Any
) -> ShareConsumer:
    """A subscribed ShareConsumer of ``group``."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            **extra,
        }
    )
    consumer.subscribe([topic])
    return consumer


def poll_until(
    consumer: ShareConsumer,
    done: Callable[[], bool],
    on_message: Callable[[Any], None],
    *,
    timeout: float = WAIT,
) -> None:
    """Poll ``consumer`` and hand each record to ``on_message`` until ``done()`` or timeout."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            if message.error() is None:
                on_message(message)


def wait_for_members(broker: BrokerProcess, group: str, count: int) -> None:
    """Wait until ShareGroupDescribe shows ``count`` members, each holding its assignment."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        body = {"group_ids": [group], "include_authorized_operations": False}
        [described] = _request(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, body)["groups"]
        members = described["members"]
        if len(members) == count and all(
            m["member_epoch"] == described["group_epoch"] and m["assignment"]["topic_partitions"]
            for m in members
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"{group} did not reach {count} assigned members")


def state_records(bootstrap: str) -> list[tuple[SharePartitionKey, bool]]:
    """Every record of ``__share_group_state`` so far: its key, and whether it is a tombstone."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}"})
    try:
        metadata = consumer.list_topics(STATE_TOPIC, timeout=WAIT).topics[STATE_TOPIC]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(STATE_TOPIC, p), timeout=WAIT)[1]
            for p in metadata.partitions
        }
        wanted = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(STATE_TOPIC, p, OFFSET_BEGINNING) for p in wanted])
        found: list[tuple[SharePartitionKey, bool]] = []
        deadline = time.monotonic() + WAIT
        while wanted and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            found.append((decode_key(message.key())[1], message.value() is None))
            if message.offset() + 1 >= ends[message.partition()]:
                wanted.discard(message.partition())
        assert not wanted, f"__share_group_state partitions {wanted} not read to their end"
        return found
    finally:
        consumer.close()
