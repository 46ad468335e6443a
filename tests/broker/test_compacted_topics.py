"""A compacted topic written by idempotent producers, read back by librdkafka after cleaning."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.storage.cleaner import LogCleaner
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.broker.conftest import BrokerProcess

KEYS = 5
SEGMENT_MS = 20


def _produce(broker: BrokerProcess, topic: str, count: int, *, idempotent: bool = True) -> None:
    """``count`` records over the keys, one a batch, spread over segments ``segment.ms`` apart."""
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": idempotent,
            "linger.ms": 0,
            "batch.num.messages": 1,
        }
    )
    for i in range(count):
        if i % 20 == 0:
            # Segments roll on the records' timestamps: let time pass between groups.
            time.sleep(SEGMENT_MS * 1.5 / 1000)
        producer.produce(topic, key=b"key-%d" % (i % KEYS), value=b"v" * 100)
        producer.poll(0)
    assert producer.flush(30) == 0


def _clean(broker: BrokerProcess, topic: str) -> tuple[int, dict[int, list[int]]]:
    """Clean the stopped broker's topic; (log end, {producer id: record counts of its batches})."""
    with LogDir.open(broker.data, settings=LogDirSettings(log_cleaner_enable=False)) as log_dir:
        cleaner = LogCleaner(log_dir)
        while cleaner.clean_once() is not None:
            pass
        log = log_dir.log(topic, 0)
        batches: dict[int, list[int]] = {}
        for segment in log.segments:
            for header in segment.batch_headers(0):
                batches.setdefault(header.producer_id, []).append(header.record_count)
        return log.log_end_offset, batches


def test_librdkafka_reads_a_cleaned_topic_without_errors(make_broker: Any, topic: str) -> None:
    broker: BrokerProcess = make_broker(**{"log.cleaner.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
    _produce(broker, topic, 400)  # every record of this producer is overwritten below
    _produce(broker, topic, 400)
    _produce(broker, topic, 1, idempotent=False)  # rolls: the above is all cleaned
    assert broker.stop() == 0
    log_end, batches = _clean(broker, topic)
    assert len(batches) == 3
    first, second = (batches[pid] for pid in sorted(batches) if pid >= 0)
    assert first == [0], "the first producer keeps one empty batch, its last"
    assert second.count(0) <= 1

    broker.start()
    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": topic,
            "enable.auto.commit": False,
            "error_cb": errors.append,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    last_offset = -1
    latest: dict[bytes, int] = {}
    deadline = time.monotonic() + 30
    try:
        while last_offset < log_end - 1 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
                continue
            last_offset = message.offset()
            latest[message.key()] = message.offset()
    finally:
        consumer.close()
    assert errors == []
    assert last_offset == log_end - 1
    assert len(latest) == KEYS
