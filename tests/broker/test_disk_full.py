"""A broker whose disk fills up: errors instead of acknowledgements, reads go on, nothing lost.

The data directory lives on a small tmpfs mounted for the test (root only;
skipped where mounting is not allowed). A file fills the rest of it while a
producer with ``acks=all`` keeps sending: every produce that cannot be
written is answered KAFKA_STORAGE_ERROR, never acknowledged; consumers keep
reading what was written; once space is freed and the broker restarted,
every acknowledged record is there once and in order, and nothing that was
refused appears.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.clients.test_confluent_kafka import consume_all
from tests.broker.conftest import BrokerProcess
from tests.small_disk import fill_disk, mounted_tmpfs

DISK_BYTES = 16 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted at the end."""
    with mounted_tmpfs(tmp_path / "disk", DISK_BYTES) as mount_point:
        yield mount_point


def _produce(bootstrap: str, topic: str, count: int) -> tuple[list[bytes], list[tuple[bytes, int]]]:
    """Send ``count`` records one at a time; (acknowledged values, (value, error code) refused)."""
    acked: list[bytes] = []
    refused: list[tuple[bytes, int]] = []

    def delivered(err: KafkaError | None, message: object) -> None:
        value = message.value()  # type: ignore[attr-defined]
        if err is None:
            acked.append(value)
        else:
            refused.append((value, err.code()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "retries": 0,
            "linger.ms": 0,
            "message.timeout.ms": 5000,
            "enable.idempotence": False,
        }
    )
    for i in range(count):
        producer.produce(topic, value=b"r%05d-" % i + b"x" * 2000, on_delivery=delivered)
        producer.flush(10)
    return acked, refused


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return int(high)


def test_a_full_disk_refuses_produce_and_loses_nothing(small_disk: Path, tmp_path: Path) -> None:
    data = small_disk / "data"
    broker = BrokerProcess(
        data,
        {
            "log.flush.interval.messages": "1",
            "log.segment.bytes": "1048576",
            "log.index.size.max.bytes": "4096",
            "auto.create.topics.enable": "false",
        },
    )
    broker.log = tmp_path / "broker.log"  # not on the small disk
    filler = small_disk / "filler"
    topic = "filling"
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(10)
        before, refused = _produce(broker.bootstrap, topic, 50)
        assert len(before) == 50 and not refused

        fill_disk(filler, leave=40_000)
        during, refused = _produce(broker.bootstrap, topic, 60)
        # Some records fitted in the space left; then every one was refused.
        assert refused, "the disk never filled"
        assert {code for _, code in refused} == {KafkaError.KAFKA_STORAGE_ERROR}
        assert broker.alive()
        acked = before + during
        # Reads go on while the disk is full.
        got = [m.value() for m in consume_all(broker.bootstrap, topic, len(acked))]
        assert got == acked
        assert _end_offset(broker.bootstrap, topic) == len(acked)  # nothing refused is there

        filler.unlink()
        after, refused = _produce(broker.bootstrap, topic, 5)
        assert len(after) == 5 and not refused, "space was freed but produce still fails"
        acked += after
        broker.stop()
        broker.start()
        got = [m.value() for m in consume_all(broker.bootstrap, topic, len(acked))]
        assert got == acked, "after a restart the log is exactly what was acknowledged"
        assert _end_offset(broker.bootstrap, topic) == len(acked)
    finally:
        if broker.alive():
            broker.kill()
        with contextlib.suppress(FileNotFoundError):
            filler.unlink()
