"""``seglog groups`` against a real broker: list, describe with lag, reset-offsets, delete."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import CliRunner, Result
from confluent_kafka import Consumer

from seglog.cli.main import cli
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.test_groups_confluent import create_topic, produce
from tests.cli.test_topics import ok, one_line_error


def run(broker: BrokerProcess, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["groups", *args, "--bootstrap-server", broker.bootstrap, "--timeout", "10"]
    )


def rows(output: str) -> list[list[str]]:
    """The rows of the table in ``output`` (the lines after its header)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    return [line.split() for line in lines[start + 1 :] if line and not line.startswith("(")]


def test_list_describe_reset_delete(make_broker: Callable[..., BrokerProcess], topic: str) -> None:
    broker = make_broker(**{"group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [f"m{i}" for i in range(10)], 2)
    group = f"{topic}-app"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "cli-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    read = 0
    while read < 6:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        read += 1
        consumer.commit(message=message, asynchronous=False)
    try:
        assert group in ok(run(broker, "list")).splitlines()
        assert [group, "Classic", "Stable"] in [
            line.split() for line in ok(run(broker, "list", "--state")).splitlines()
        ]
        described = ok(run(broker, "describe", group))
        assert described.startswith(f"Group {group} is Stable with 1 member(s).\n")
        table = rows(described)
        assert [r[:3] for r in table] == [[group, topic, "0"], [group, topic, "1"]]
        assert sum(int(r[3]) for r in table) == 6  # committed
        assert [r[4] for r in table] == ["5", "5"]  # log end
        assert sum(int(r[5]) for r in table) == 4  # lag
        assert all(r[7] == "cli-test" for r in table)
        one_line_error(
            run(broker, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"),
            "has active members",
        )
        one_line_error(run(broker, "delete", group), "has active members")
    finally:
        consumer.close()

    dry = ok(run(broker, "reset-offsets", group, "--topic", topic, "--to-earliest"))
    assert "not applied" in dry
    assert sum(int(r[5]) for r in rows(ok(run(broker, "describe", group)))) == 4
    done = ok(
        run(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "1", "--execute")
    )
    assert [r[2:] for r in rows(done)] == [["0", "1"], ["1", "1"]]
    shifted = run(broker, "reset-offsets", group, "--topic", topic, "--shift-by", "10", "--execute")
    assert [r[3] for r in rows(ok(shifted))] == ["5", "5"]  # clamped to the log end
    described = ok(run(broker, "describe", group))
    assert described.startswith(f"Group {group} is Empty with 0 member(s).\n")
    assert [r[5] for r in rows(described)] == ["0", "0"]
    assert ok(run(broker, "delete", group)) == f"Deleted group {group}.\n"
    assert group not in ok(run(broker, "list")).splitlines()
    one_line_error(run(broker, "describe", group), "does not exist")
    one_line_error(run(broker, "delete", group), "does not exist")


def test_usage_and_connection_errors() -> None:
    result = CliRunner().invoke(cli, ["groups", "reset-offsets", "g", "--topic", "t"])
    assert result.exit_code == 2 and "exactly one of" in result.output
    down = CliRunner().invoke(
        cli, ["groups", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "1"]
    )
    one_line_error(down, "cannot connect to 127.0.0.1:")
