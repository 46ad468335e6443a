"""``seglog offsets`` against a real broker: watermarks, log start, offsets by time."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port

BASE_TS = 1_700_000_000_000


def run(broker: BrokerProcess | str, *args: str, timeout: float = 10) -> Result:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    return CliRunner().invoke(
        cli, [*args, "--bootstrap-server", bootstrap, "--timeout", str(timeout)]
    )


def table(broker: BrokerProcess, topic: str, *args: str) -> list[list[str]]:
    result = run(broker, "offsets", topic, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return [line.split() for line in result.stdout.splitlines()]


def one_line_error(result: Result, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("seglog: error: ")
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def setup_topic(broker: BrokerProcess, topic: str) -> AdminClient:
    """Partition 0: 10 messages at BASE_TS + 100 * i; partition 1: 3 messages; 2: none."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=BASE_TS + 100 * i)
    for i in range(3):
        producer.produce(topic, value=b"%d" % i, partition=1, timestamp=BASE_TS + 5000 + i)
    assert producer.flush(10) == 0
    return admin


def test_earliest_and_latest(broker: BrokerProcess, topic: str) -> None:
    admin = setup_topic(broker, topic)
    assert table(broker, topic) == [
        ["TOPIC", "PARTITION", "EARLIEST", "LATEST"],
        [topic, "0", "0", "10"],
        [topic, "1", "0", "3"],
        [topic, "2", "0", "0"],
    ]
    # DeleteRecords moves the log start: EARLIEST follows.
    admin.delete_records([TopicPartition(topic, 0, 4)])[TopicPartition(topic, 0)].result(10)
    assert table(broker, topic, "--partition", "0") == [
        ["TOPIC", "PARTITION", "EARLIEST", "LATEST"],
        [topic, "0", "4", "10"],
    ]


def test_offsets_by_time_agree_with_the_produced_timestamps(
    broker: BrokerProcess, topic: str
) -> None:
    setup_topic(broker, topic)
    # What the broker holds, read back with seglog consume: (offset, timestamp) per message.
    consumed = run(broker, "consume", topic, "--partition", "0", "--from-beginning", "--exit",
                   "--format", "json")  # fmt: skip
    assert consumed.exit_code == 0, consumed.output
    stored = [(r["offset"], r["timestamp"]) for r in map(json.loads, consumed.stdout.splitlines())]
    assert stored == [(i, BASE_TS + 100 * i) for i in range(10)]
    for offset, timestamp in stored:
        for asked in (timestamp, timestamp - 99):  # exactly, and just after the one before
            rows = table(broker, topic, "--partition", "0", "--timestamp", str(asked))
            assert rows[1] == [topic, "0", "0", "10", str(offset)], (asked, rows)

    rows = table(broker, topic, "--timestamp", str(BASE_TS + 950))
    assert rows == [
        ["TOPIC", "PARTITION", "EARLIEST", "LATEST", "AT", str(BASE_TS + 950)],
        [topic, "0", "0", "10", "-"],  # nothing that recent in partition 0
        [topic, "1", "0", "3", "0"],
        [topic, "2", "0", "0", "-"],
    ]


def test_errors(broker: BrokerProcess, topic: str) -> None:
    setup_topic(broker, topic)
    one_line_error(run(broker, "offsets", f"{topic}-missing"), "does not exist")
    one_line_error(
        run(broker, "offsets", topic, "--partition", "3"),
        f"topic '{topic}' has no partition 3 (partitions 0-2)",
    )
    one_line_error(
        run(f"127.0.0.1:{free_port()}", "offsets", topic, timeout=1),
        "cannot connect to 127.0.0.1:",
    )
