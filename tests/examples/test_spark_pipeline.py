"""The example pipeline of examples/, run as a user runs it, against a real broker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.broker.conftest import BrokerProcess

SCRIPT = Path(__file__).resolve().parent.parent.parent / "examples" / "spark_pipeline.py"


def _run(broker: BrokerProcess, events: int, checkpoint: Path) -> str:
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--bootstrap",
            broker.bootstrap,
            "--events",
            str(events),
            "--checkpoint",
            str(checkpoint),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _events_read(output: str) -> int:
    return sum(int(n) for n in re.findall(r"micro-batch \d+: (\d+) events", output))


def _latest_counts(broker: BrokerProcess) -> dict[bytes, int]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.partition.eof": True}
    )
    latest: dict[bytes, int] = {}
    try:
        consumer.assign([TopicPartition("clicks-per-user", 0, 0)])
        while True:
            message = consumer.poll(10)
            assert message is not None, "the results topic did not reach its end"
            if message.error():
                break  # partition EOF
            latest[message.key()] = json.loads(message.value())["clicks"]
    finally:
        consumer.close()
    return latest


# Each run starts its own Spark (a JVM): on a busy machine that alone takes minutes.
@pytest.mark.timeout(900)
def test_the_pipeline_counts_every_event_once_across_runs(
    make_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = make_broker(**{"group.initial.rebalance.delay.ms": "0"})
    checkpoint = tmp_path / "checkpoint"
    first = _run(broker, 2000, checkpoint)
    assert "produced 2000 events into 'clicks'" in first
    assert _events_read(first) == 2000
    assert sum(_latest_counts(broker).values()) == 2000
    # A second run resumes from its checkpoint: only the new events are read.
    second = _run(broker, 500, checkpoint)
    assert _events_read(second) == 500
    assert sum(_latest_counts(broker).values()) == 2500
    assert "user" in second and "clicks" in second  # the batch query's table
