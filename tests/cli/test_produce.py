"""``seglog produce`` against a real broker, checked with an independent consumer."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner, Result
from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port


def produce(broker: BrokerProcess, topic: str, data: bytes, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["produce", topic, *args, "--bootstrap-server", broker.bootstrap, "--timeout", "10"],
        input=data,
    )


def summary(result: Result) -> tuple[str, str]:
    """The summary line (the last of stderr) without its elapsed time and rate:
    (counts, last offsets)."""
    last = result.stderr.splitlines()[-1]
    assert last.startswith("seglog produce: "), result.stderr
    counts, _, rest = last.removeprefix("seglog produce: ").partition(" in ")
    assert rest.endswith(tuple("0123456789e")), last  # "...by partition: 0=5" or "none"
    return counts, rest.partition("last offset by partition: ")[2]


def one_line_error(result: Result, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith("seglog: error: ")
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def create(broker: BrokerProcess, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(10)


def read_back(broker: BrokerProcess, topic: str, partition: int, count: int) -> list[Message]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[Message] = []
    for _ in range(50):
        if len(messages) >= count:
            break
        messages += [m for m in consumer.consume(count, timeout=0.2) if m.error() is None]
    consumer.close()
    return messages


def test_keys_values_and_headers_arrive_exactly(broker: BrokerProcess, topic: str) -> None:
    lines = b"k1|hello\nk2|a|b with the separator\n|empty key\nk4|\nk5|\xff\xfe binary\r\nk6|last"
    result = produce(
        broker, topic, lines, "--key-separator", "|", "--header", "app=test", "--header", "x=a=b"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1  # the summary alone
    assert summary(result) == ("6 lines, 6 delivered, 0 failed", "0=5")
    messages = read_back(broker, topic, 0, 6)
    assert [(m.offset(), m.key(), m.value()) for m in messages] == [
        (0, b"k1", b"hello"),
        (1, b"k2", b"a|b with the separator"),
        (2, b"", b"empty key"),
        (3, b"k4", b""),
        (4, b"k5", b"\xff\xfe binary"),
        (5, b"k6", b"last"),
    ]
    assert all(m.headers() == [("app", b"test"), ("x", b"a=b")] for m in messages)


def test_without_separator_lines_are_values(broker: BrokerProcess, topic: str) -> None:
    result = produce(broker, topic, b"a:1\n\nb\tc\n")
    assert result.exit_code == 0, result.output
    messages = read_back(broker, topic, 0, 3)
    assert [(m.key(), m.value(), m.headers()) for m in messages] == [
        (None, b"a:1", None),
        (None, b"", None),
        (None, b"b\tc", None),
    ]


def test_partition_compression_acks_and_passthrough(broker: BrokerProcess, topic: str) -> None:
    create(broker, topic, 3)
    lines = b"".join(b"message %d\n" % i for i in range(20))
    for codec in ("gzip", "snappy", "lz4", "zstd", "none"):
        result = produce(
            broker, topic, lines, "--partition", "2", "--compression", codec, "--acks", "1",
            "-X", "linger.ms=50", "-X", "client.id=seglog-test",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    messages = read_back(broker, topic, 2, 100)
    assert [m.value() for m in messages] == [b"message %d" % i for i in range(20)] * 5
    assert read_back(broker, topic, 0, 0) == [] and read_back(broker, topic, 1, 0) == []


def test_a_line_without_the_separator_fails_alone(broker: BrokerProcess, topic: str) -> None:
    result = produce(broker, topic, b"k1=v1\nno separator\nk3=v3\n", "--key-separator", "=")
    assert result.exit_code == 1
    first, _ = result.stderr.splitlines()
    assert first == "seglog: line 2: not delivered: no key separator '=' in the line"
    assert summary(result) == ("3 lines, 2 delivered, 1 failed", "0=1")
    assert [(m.key(), m.value()) for m in read_back(broker, topic, 0, 2)] == [
        (b"k1", b"v1"),
        (b"k3", b"v3"),
    ]


def test_delivery_errors_from_the_broker_are_reported(broker: BrokerProcess, topic: str) -> None:
    create(broker, topic, 1, **{"max.message.bytes": "2000"})
    # One message a batch: the broker refuses whole batches, as Kafka does.
    lines = b"small\n" + b"x" * 5000 + b"\nsmall too\n"
    result = produce(broker, topic, lines, "-X", "batch.num.messages=1")
    assert result.exit_code == 1
    first, _ = result.stderr.splitlines()
    assert first.startswith("seglog: line 2: not delivered: ") and "too large" in first.lower()
    assert summary(result) == ("3 lines, 2 delivered, 1 failed", "0=1")
    assert [m.value() for m in read_back(broker, topic, 0, 2)] == [b"small", b"small too"]


def test_unknown_partition(broker: BrokerProcess, topic: str) -> None:
    create(broker, topic, 2)
    one_line_error(
        produce(broker, topic, b"x\n", "--partition", "2"),
        f"topic '{topic}' has no partition 2 (partitions 0-1)",
    )


def test_unknown_topic_without_auto_create(make_broker) -> None:  # type: ignore[no-untyped-def]
    private = make_broker(**{"auto.create.topics.enable": "false"})
    one_line_error(produce(private, "nowhere", b"x\n"), "topic 'nowhere' does not exist")


def test_bad_client_property(broker: BrokerProcess, topic: str) -> None:
    one_line_error(produce(broker, topic, b"x\n", "-X", "acks=sometimes"), "acks")


def test_unreachable_broker_is_one_line_on_real_stderr() -> None:
    # A subprocess, so that anything librdkafka printed itself would show up too.
    done = subprocess.run(
        [sys.executable, "-m", "seglog", "produce", "t", "--timeout", "1",
         "--bootstrap-server", f"127.0.0.1:{free_port()}"],
        input=b"x\n", capture_output=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("seglog: error: cannot connect to 127.0.0.1:")
    assert lines[0].endswith("Connection refused")
