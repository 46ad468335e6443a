"""``seglog topics`` against a real broker: create, list, describe, alter, delete, errors."""

from __future__ import annotations

from click.testing import CliRunner, Result

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port


def run(broker: BrokerProcess, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["topics", *args, "--bootstrap-server", broker.bootstrap, "--timeout", "10"]
    )


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def one_line_error(result: Result, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout == ""
    assert result.stderr.startswith("seglog: error: ")
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def describe_lines(broker: BrokerProcess, topic: str) -> list[list[str]]:
    return [line.split("\t") for line in ok(run(broker, "describe", topic)).splitlines()]


def test_create_list_describe_alter_delete(broker: BrokerProcess, topic: str) -> None:
    created = run(
        broker, "create", topic, "--partitions", "2", "--config", "retention.ms=1234",
        "--config", "segment.bytes=1048576",
    )  # fmt: skip
    assert ok(created) == f"Created topic {topic}.\n"
    assert topic in ok(run(broker, "list")).splitlines()
    assert topic in ok(run(broker, "list", "--exclude-internal")).splitlines()

    head, *partitions = describe_lines(broker, topic)
    assert head[0] == f"Topic: {topic}" and head[1].startswith("TopicId: ")
    assert head[2:] == [
        "PartitionCount: 2",
        "ReplicationFactor: 1",
        "Configs: retention.ms=1234,segment.bytes=1048576",
    ]
    assert [p[1:3] for p in partitions] == [
        [f"Topic: {topic}", "Partition: 0"],
        [f"Topic: {topic}", "Partition: 1"],
    ]
    leader = partitions[0][3]
    assert leader.startswith("Leader: ") and leader != "Leader: none"
    assert partitions[0][4:] == [
        leader.replace("Leader", "Replicas"),
        leader.replace("Leader", "Isr"),
    ]

    altered = run(
        broker, "alter", topic, "--partitions", "5", "--config", "cleanup.policy=compact",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert ok(altered).splitlines() == [
        f"Altered configs of topic {topic}: set cleanup.policy=compact, deleted retention.ms.",
        f"Topic {topic} now has 5 partitions.",
    ]
    head, *partitions = describe_lines(broker, topic)
    assert head[2] == "PartitionCount: 5" and len(partitions) == 5
    assert head[4] == "Configs: cleanup.policy=compact,segment.bytes=1048576"

    assert ok(run(broker, "delete", topic)) == f"Deleted topic {topic}.\n"
    assert topic not in ok(run(broker, "list")).splitlines()
    one_line_error(run(broker, "describe", topic), f"topic '{topic}' does not exist")


def test_default_partition_count_and_describe_all(broker: BrokerProcess, topic: str) -> None:
    ok(run(broker, "create", topic))
    everything = ok(run(broker, "describe"))
    assert f"Topic: {topic}\t" in everything
    assert describe_lines(broker, topic)[0][2] == "PartitionCount: 1"


def test_if_exists_and_if_not_exists(broker: BrokerProcess, topic: str) -> None:
    ok(run(broker, "create", topic))
    one_line_error(run(broker, "create", topic), f"topic '{topic}' already exists")
    assert ok(run(broker, "create", topic, "--if-not-exists")) == ""

    missing = f"{topic}-missing"
    for args in (
        ["delete", missing],
        ["alter", missing, "--partitions", "3"],
        ["alter", missing, "--config", "retention.ms=1"],
        ["describe", missing],
    ):
        one_line_error(run(broker, *args), f"topic '{missing}' does not exist")
        assert ok(run(broker, *args, "--if-exists")) == ""


def test_broker_refusals_are_one_line(broker: BrokerProcess, topic: str) -> None:
    one_line_error(run(broker, "create", topic, "--config", "segment.bytes=lots"), "segment.bytes")
    one_line_error(run(broker, "create", topic, "--replication-factor", "3"), "replication")
    ok(run(broker, "create", topic, "--partitions", "3"))
    one_line_error(run(broker, "alter", topic, "--partitions", "2"), "3 partitions")
    one_line_error(run(broker, "alter", topic, "--config", "no.such.config=1"), "no.such.config")


def test_usage_errors(broker: BrokerProcess, topic: str) -> None:
    nothing = run(broker, "alter", topic)
    assert nothing.exit_code == 2 and "nothing to alter" in nothing.stderr
    malformed = run(broker, "create", topic, "--config", "retention.ms")
    assert malformed.exit_code == 2 and "expected key=value" in malformed.stderr


def test_bad_client_property(broker: BrokerProcess) -> None:
    one_line_error(run(broker, "list", "-X", "no.such.property=1"), "no.such.property")


def test_unreachable_broker() -> None:
    result = CliRunner().invoke(
        cli, ["topics", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "1"]
    )
    one_line_error(result, "cannot connect to 127.0.0.1:")
