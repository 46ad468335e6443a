"""``seglog consume`` against a real broker: round trips, start positions, formats, errors."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from typing import Any

from click.testing import CliRunner, Result
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port

BASE_TS = 1_700_000_000_000


def run(broker: BrokerProcess, *args: str, data: bytes | None = None) -> Result:
    return CliRunner().invoke(
        cli, [*args, "--bootstrap-server", broker.bootstrap, "--timeout", "10"], input=data
    )


def consume(broker: BrokerProcess, topic: str, *args: str) -> bytes:
    result = run(broker, "consume", topic, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    # stderr holds only the summary line, whose count is what stdout holds.
    (line,) = result.stderr.splitlines()
    lines = result.stdout_bytes.count(b"\n")
    assert line.startswith(f"seglog consume: {lines} record{'' if lines == 1 else 's'} ("), line
    return result.stdout_bytes


def one_line_error(result: Result, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout == ""
    assert result.stderr.startswith("seglog: error: ")
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce_timed(broker: BrokerProcess, topic: str, values: list[bytes | None]) -> None:
    """Messages to partition 0 with timestamps BASE_TS, +100, +200...; some keys and headers."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value,
            key=None if i % 2 else b"key%d" % i,
            partition=0,
            timestamp=BASE_TS + i * 100,
            headers=[("n", b"%d" % i)],
        )
    assert producer.flush(10) == 0


def test_round_trip_through_produce_and_consume_json(broker: BrokerProcess, topic: str) -> None:
    lines = b"k1\thello\nk2\tw\xc3\xb6rld\n\xff\tnot utf-8 key\nk4\t\x80\x81\nk5\t\n"
    produced = run(
        broker, "produce", topic, "--key-separator", "\t", "--header", "app=cli",
        "--header", "empty=", data=lines,
    )  # fmt: skip
    assert produced.exit_code == 0, produced.output
    out = consume(broker, topic, "--from-beginning", "--exit", "--format", "json")
    records = [json.loads(line) for line in out.decode("utf-8").splitlines()]
    for record in records:
        assert isinstance(record.pop("timestamp"), int)
        assert record.pop("timestamp_type") == "CreateTime"
    b64 = base64.b64encode
    assert records == [
        {
            "topic": topic,
            "partition": 0,
            "offset": offset,
            "key": key,
            "value": value,
            "headers": [["app", "cli"], ["empty", ""]],
        }
        for offset, (key, value) in enumerate(
            [
                ("k1", "hello"),
                ("k2", "wörld"),
                ({"base64": b64(b"\xff").decode()}, "not utf-8 key"),
                ("k4", {"base64": b64(b"\x80\x81").decode()}),
                ("k5", ""),
            ]
        )
    ]
    # and the raw bytes, unchanged, in the kv format
    assert consume(broker, topic, "--from-beginning", "-e", "--format", "kv") == lines


def test_value_and_key_formats(broker: BrokerProcess, topic: str) -> None:
    produce_timed(broker, topic, [b"a", None, b"c"])
    assert consume(broker, topic, "--from-beginning", "-e") == b"a\nnull\nc\n"
    assert consume(broker, topic, "--from-beginning", "-e", "--print-key") == (
        b"key0\ta\nnull\tnull\nkey2\tc\n"
    )
    kv = consume(broker, topic, "--from-beginning", "-e", "--format", "kv", "--key-separator", "=>")
    assert kv == b"key0=>a\nnull=>null\nkey2=>c\n"
    out = consume(broker, topic, "--offset", "1", "--max-messages", "1", "--format", "json")
    assert json.loads(out) == {
        "topic": topic,
        "partition": 0,
        "offset": 1,
        "timestamp": BASE_TS + 100,
        "timestamp_type": "CreateTime",
        "key": None,
        "value": None,
        "headers": [["n", "1"]],
    }


def test_start_positions(broker: BrokerProcess, topic: str) -> None:
    produce_timed(broker, topic, [b"m%d" % i for i in range(6)])

    def values(*args: str) -> list[bytes]:
        return consume(broker, topic, "-e", *args).splitlines()

    everything = [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]
    assert values("--from-beginning") == everything
    assert values("--offset", "earliest") == everything
    assert values("--offset", "4") == [b"m4", b"m5"]
    assert values("--offset", "6") == []
    assert values("--offset", "latest") == []
    assert values() == []  # latest, like kafka-console-consumer without a group
    # offsets for times: the first message at or after the timestamp
    assert values("--timestamp", str(BASE_TS + 200)) == everything[2:]
    assert values("--timestamp", str(BASE_TS + 201)) == everything[3:]
    assert values("--timestamp", str(BASE_TS - 1)) == everything
    assert values("--timestamp", str(BASE_TS + 10_000)) == []
    # --max-messages stops without --exit
    assert consume(broker, topic, "--offset", "1", "--max-messages", "2") == b"m1\nm2\n"


def test_partitions(broker: BrokerProcess, topic: str) -> None:
    create(broker, topic, 3)
    for partition in range(3):
        lines = b"".join(b"p%d-%d\n" % (partition, i) for i in range(partition + 1))
        produced = run(broker, "produce", topic, "--partition", str(partition), data=lines)
        assert produced.exit_code == 0, produced.output
    assert consume(broker, topic, "--from-beginning", "-e", "--partition", "2") == (
        b"p2-0\np2-1\np2-2\n"
    )
    both = consume(broker, topic, "--from-beginning", "-e", "--partition", "0", "--partition", "1")
    assert sorted(both.splitlines()) == [b"p0-0", b"p1-0", b"p1-1"]
    everything = consume(broker, topic, "--from-beginning", "-e", "--format", "json")
    seen = sorted(
        (r["partition"], r["offset"], r["value"]) for r in map(json.loads, everything.splitlines())
    )
    assert seen == [(p, i, f"p{p}-{i}") for p in range(3) for i in range(p + 1)]


def test_exit_on_empty_partitions(broker: BrokerProcess, topic: str) -> None:
    create(broker, topic, 4)
    assert consume(broker, topic, "--from-beginning", "--exit") == b""


def test_errors(broker: BrokerProcess, topic: str) -> None:
    produce_timed(broker, topic, [b"only"])
    one_line_error(run(broker, "consume", f"{topic}-missing", "-e"), "does not exist")
    one_line_error(
        run(broker, "consume", topic, "--offset", "5", "-e"),
        f"offset 5 is out of range for '{topic}' partition 0 (earliest 0, latest 1)",
    )
    one_line_error(run(broker, "consume", topic, "--partition", "1", "-e"), "has no partition 1")
    both = run(broker, "consume", topic, "--from-beginning", "--offset", "1")
    assert both.exit_code == 2 and "only one of" in both.stderr
    bad = run(broker, "consume", topic, "--offset", "-3")
    assert bad.exit_code == 2 and "expected earliest, latest or an offset" in bad.stderr


def test_unknown_topic_without_auto_create(make_broker: Any) -> None:
    private = make_broker(**{"auto.create.topics.enable": "false"})
    one_line_error(run(private, "consume", "nowhere", "-e"), "topic 'nowhere' does not exist")


def test_unreachable_broker_is_one_line_on_real_stderr() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "seglog", "consume", "t", "-e", "--timeout", "1",
         "--bootstrap-server", f"127.0.0.1:{free_port()}"],
        capture_output=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seglog: error: cannot connect to"), lines
