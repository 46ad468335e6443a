"""Transactions with the pure-Python clients: aiokafka's and kafka-python's
transactional producers, read back by read_committed consumers of each."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition

from tests.broker.conftest import BrokerProcess
from tests.broker.test_transactions import _create, _read


async def _aiokafka_round(bootstrap: str, topic: str, group: str) -> list[bytes]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{topic}")
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, f"kept-{i}".encode())
        try:
            async with producer.transaction():
                await producer.send(topic, b"dropped")
                await producer.flush()
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        async with producer.transaction():
            await producer.send_offsets_to_transaction({AioPartition(topic, 0): 3}, group)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        group_id=group,
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        partition = AioPartition(topic, 0)
        assert await consumer.committed(partition) == 3
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        for _ in range(20):
            batch = await consumer.getmany(timeout_ms=300)
            for records in batch.values():
                got.extend(r.value for r in records)
            if len(got) >= 3 and not batch:
                break
    finally:
        await consumer.stop()
    return got


def test_aiokafka_transactions(broker: BrokerProcess, topic: str) -> None:
    _create(broker.bootstrap, topic)
    got = asyncio.run(_aiokafka_round(broker.bootstrap, topic, f"{topic}-g"))
    assert got == [b"kept-0", b"kept-1", b"kept-2"]
    assert _read(broker.bootstrap, topic) == got


def test_kafka_python_transactions(broker: BrokerProcess, topic: str) -> None:
    _create(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{topic}")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"kept")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"dropped")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    consumer.assign([KafkaPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [message.value for message in consumer]
    consumer.close()
    assert got == [b"kept"]
    assert _read(broker.bootstrap, topic) == [b"kept"]
