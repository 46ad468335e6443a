from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.broker.clients.payloads import CODECS, messages
from tests.broker.conftest import BrokerProcess


async def _round_trip(bootstrap: str, topic: str, codec: str) -> list:  # type: ignore[type-arg]
    expected = messages()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec
    )
    await producer.start()
    try:
        for key, value, headers, ts in expected:
            await producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        while len(got) < len(expected):
            batch = await consumer.getmany(timeout_ms=10_000)
            assert batch, "timed out"
            for records in batch.values():
                got.extend(records)
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_every_codec(broker: BrokerProcess, topic: str, codec: str) -> None:
    if codec == "snappy":
        pytest.importorskip("snappy")
    got = asyncio.run(_round_trip(broker.bootstrap, topic, codec))
    expected = messages()
    assert [(m.key, m.value, list(m.headers), m.timestamp) for m in got] == [
        (k, v, h, t) for k, v, h, t in expected
    ]
