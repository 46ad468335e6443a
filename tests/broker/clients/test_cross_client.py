"""What one client produces, the others read identically."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import Producer
from kafka import KafkaProducer

from tests.broker.clients import test_confluent_kafka, test_kafka_python
from tests.broker.clients.payloads import messages
from tests.broker.conftest import BrokerProcess


def _aiokafka_read(bootstrap: str, topic: str, count: int) -> list:  # type: ignore[type-arg]
    async def run() -> list:  # type: ignore[type-arg]
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        got: list = []  # type: ignore[type-arg]
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            while len(got) < count:
                batch = await consumer.getmany(timeout_ms=10_000)
                assert batch
                for records in batch.values():
                    got.extend(records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def test_confluent_writes_others_read(broker: BrokerProcess, topic: str) -> None:
    expected = messages(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4"})
    for key, value, headers, ts in expected:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts)
    assert producer.flush(20) == 0
    want = [(k, v, h, t) for k, v, h, t in expected]
    python_side = test_kafka_python.consume_all(broker.bootstrap, topic, 30)
    assert [(m.key, m.value, list(m.headers), m.timestamp) for m in python_side] == want
    aio_side = _aiokafka_read(broker.bootstrap, topic, 30)
    assert [(m.key, m.value, list(m.headers), m.timestamp) for m in aio_side] == want


def test_kafka_python_writes_confluent_reads(broker: BrokerProcess, topic: str) -> None:
    expected = messages(30)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="zstd")
    for key, value, headers, ts in expected:
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
    producer.flush(20)
    producer.close()
    got = test_confluent_kafka.consume_all(broker.bootstrap, topic, 30)
    assert [(m.key(), m.value(), m.headers() or [], m.timestamp()[1]) for m in got] == [
        (k, v, h, t) for k, v, h, t in expected
    ]
