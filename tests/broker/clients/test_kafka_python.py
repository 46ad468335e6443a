from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.broker.clients.payloads import CODECS, messages
from tests.broker.conftest import BrokerProcess


def consume_all(bootstrap: str, topic: str, count: int) -> list:  # type: ignore[type-arg]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got = []
    for message in consumer:
        got.append(message)
        if len(got) == count:
            break
    consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    expected = messages()
    # kafka-python 3 turns idempotence on by default: InitProducerId and sequences.
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    for key, value, headers, ts in expected:
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
    producer.flush(20)
    producer.close()
    got = consume_all(broker.bootstrap, topic, len(expected))
    assert [(m.key, m.value, list(m.headers), m.timestamp) for m in got] == [
        (k, v, h, t) for k, v, h, t in expected
    ]
