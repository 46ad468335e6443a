"""``seglog groups`` of share groups against a real broker with confluent-kafka ShareConsumers:
list, describe (records by state from the HTTP API, or ``-`` without it), reset-offsets
(refused with members, applied without), delete-offsets, delete."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from click.testing import Result
from confluent_kafka import AcknowledgeType, Consumer

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.share.helpers import (
    WAIT,
    create_topic,
    produce_numbered,
    set_group_configs,
    share_consumer,
    wait_for_members,
)
from tests.cli.test_groups import rows, run
from tests.cli.test_topics import ok, one_line_error


def _holding(broker: BrokerProcess, group: str, topic: str) -> Any:
    """A member of ``group`` that accepted the first 4 of 10 records and holds the other 6."""
    consumer = share_consumer(broker, group, topic, explicit=True)
    got: list[Any] = []
    deadline = time.monotonic() + WAIT
    while len(got) < 10 and time.monotonic() < deadline:
        got.extend(m for m in consumer.poll(0.5) if m.error() is None)
    assert len(got) == 10
    for message in got[:4]:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync()
    wait_for_members(broker, group, 1)
    return consumer


def _until(check: Callable[[], Result], done: Callable[[str], bool]) -> str:
    """``check``'s output once ``done`` says so (or its last, to fail on)."""
    deadline = time.monotonic() + WAIT
    while True:
        output = ok(check())
        if done(output) or time.monotonic() > deadline:
            return output
        time.sleep(0.2)


def _share_group(broker: BrokerProcess) -> tuple[str, str]:
    topic = create_topic(broker)
    group = f"g-{topic}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    produce_numbered(broker, topic, 10)
    return topic, group


def test_share_group_with_the_http_api(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker(**{"console.port": str(free_port())})
    topic, group = _share_group(broker)
    consumer = _holding(broker, group, topic)
    try:
        assert group in ok(run(broker, "list")).splitlines()
        listed = [line.split() for line in ok(run(broker, "list", "--state")).splitlines()]
        assert [group, "Share", "Stable"] in listed
        assert ok(run(broker, "list", "--type", "share")).splitlines() == [group]
        assert group not in ok(run(broker, "list", "--type", "consumer")).splitlines()

        described = _until(
            lambda: run(broker, "describe", group),
            lambda out: [group, topic, "0", "4", "6", "6", "6", "0"] in rows(out),
        )
        assert described.startswith(f"Share group {group} is Stable with 1 member(s) (")
        partitions, members = described.split("\n\n")[1:3]
        # START-OFFSET, LAG, IN-FLIGHT, ACQUIRED, AVAILABLE
        assert rows(partitions) == [[group, topic, "0", "4", "6", "6", "6", "0"]]
        [member] = rows(members)
        assert member[0] == group and member[4] == "1" and member[-1] == f"{topic}:0"

        one_line_error(
            run(broker, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"),
            f"share group {group!r} has active members: stop them first",
        )
    finally:
        consumer.close()
    # Closed, the member leaves and its records are available again.
    _until(
        lambda: run(broker, "describe", group),
        lambda out: (
            "with 0 member(s)" in out and [group, topic, "0", "4", "6", "6", "0", "6"] in rows(out)
        ),
    )
    planned = ok(run(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "2"))
    assert rows(planned) == [[group, topic, "0", "2"]]
    assert planned.endswith("(not applied: add --execute to reset the offsets)\n")
    assert [group, topic, "0", "4"] == rows(ok(run(broker, "describe", group)))[0][:4]
    ok(run(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "2", "--execute"))
    assert rows(ok(run(broker, "describe", group)))[0][:5] == [group, topic, "0", "2", "8"]

    deleted = ok(run(broker, "delete-offsets", group, "--topic", topic))
    assert deleted == f"Deleted the offsets of group {group} in topic {topic}.\n"
    assert "\n\n" not in ok(run(broker, "describe", group)).strip()  # no partitions left

    assert ok(run(broker, "delete", group)) == f"Deleted group {group}.\n"
    assert group not in ok(run(broker, "list")).splitlines()


def test_share_group_without_the_http_api(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker()
    topic, group = _share_group(broker)
    plain = f"c-{uuid.uuid4().hex[:8]}"
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": plain})
    classic.subscribe([topic])
    consumer = _holding(broker, group, topic)
    try:
        deadline = time.monotonic() + WAIT
        while plain not in ok(run(broker, "list")) and time.monotonic() < deadline:
            classic.poll(0.2)
        assert ok(run(broker, "list", "--type", "share")).splitlines() == [group]
        assert plain in ok(run(broker, "list", "--type", "classic")).splitlines()
        assert group not in ok(run(broker, "list", "--type", "classic")).splitlines()
        described = ok(run(broker, "describe", group))
        # The lag is the log end less the start offset; the records by state are unknown.
        assert rows(described.split("\n\n")[1]) == [[group, topic, "0", "4", "6", "-", "-", "-"]]
        one_line_error(run(broker, "delete", group), f"group {group!r} has active members")
    finally:
        consumer.close()
        classic.close()
    one_line_error(
        run(broker, "delete-offsets", plain, "--topic", topic),
        f"{plain!r} is not a share group",
    )


def test_reset_plan_by_time_of_a_share_group(make_broker: Callable[..., BrokerProcess]) -> None:
    broker = make_broker()
    topic, group = _share_group(broker)
    consumer = _holding(broker, group, topic)
    consumer.close()

    def plan(*how: str) -> list[list[str]]:
        return rows(ok(run(broker, "reset-offsets", group, "--topic", topic, *how)))

    # Every record was written within the hour, none after 2999.
    assert plan("--by-duration", "PT1H") == [[group, topic, "0", "0"]]
    assert plan("--by-duration", "P1DT2H30M") == [[group, topic, "0", "0"]]
    assert plan("--to-datetime", "2999-01-01T00:00:00+00:00") == [[group, topic, "0", "10"]]
    assert plan("--to-datetime", "2000-01-01T00:00:00") == [[group, topic, "0", "0"]]
    wrong = run(broker, "reset-offsets", group, "--topic", topic, "--by-duration", "1h")
    assert wrong.exit_code == 2 and "PnDTnHnMnS" in wrong.stderr
