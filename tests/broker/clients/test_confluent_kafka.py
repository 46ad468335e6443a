from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.clients.payloads import CODECS, messages
from tests.broker.conftest import BrokerProcess


def consume_all(bootstrap: str, topic: str, count: int, partition: int = 0) -> list:  # type: ignore[type-arg]
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    got = []
    try:
        while len(got) < count:
            message = consumer.poll(10)
            assert message is not None, f"timed out after {len(got)} messages"
            assert message.error() is None, message.error()
            got.append(message)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    expected = messages()
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5}
    )
    for key, value, headers, ts in expected:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts)
    assert producer.flush(20) == 0
    got = consume_all(broker.bootstrap, topic, len(expected))
    for message, (key, value, headers, ts) in zip(got, expected, strict=True):
        assert message.key() == key
        assert message.value() == value
        assert (message.headers() or []) == headers
        assert message.timestamp()[1] == ts
    assert [m.offset() for m in got] == list(range(len(expected)))


def test_idempotent_producer(broker: BrokerProcess, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(20) == 0
    got = consume_all(broker.bootstrap, topic, 100)
    assert [m.value() for m in got] == [b"%d" % i for i in range(100)]
