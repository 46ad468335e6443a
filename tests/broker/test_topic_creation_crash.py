"""kill -9 in the middle of CreateTopics, CreatePartitions or DeleteTopics: all or nothing.

Whatever the moment of the kill, the restarted broker has either the whole
topic with its configs or no trace of it, and retrying the creation succeeds.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from tests.broker.conftest import BrokerProcess

PARTITIONS = 200
ROUNDS = 3


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": "0"})


def _partition_count(admin: AdminClient, topic: str) -> int | None:
    metadata = admin.list_topics(timeout=30)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return None
    return len(info.partitions)


def _policy(admin: AdminClient, topic: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return str(configs["cleanup.policy"].value)


def _kill_once_started(broker: BrokerProcess, started: Path, rng: random.Random) -> None:
    """kill -9 soon after the first directory of the change appears (or it ends)."""
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(rng.uniform(0, 0.3))
    broker.kill()


def test_a_kill_during_creation_leaves_all_or_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261126)
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        for round_ in range(ROUNDS):
            topic = f"compacted-{round_}"
            admin = _admin(broker)
            spec = NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})
            admin.create_topics([spec], operation_timeout=60)
            _kill_once_started(broker, broker.data / f"{topic}-0", rng)
            broker.start()
            admin = _admin(broker)
            count = _partition_count(admin, topic)
            assert count in (None, PARTITIONS), f"round {round_}: {count} partitions"
            if count is None:
                assert not any(broker.data.glob(f"{topic}-*")), "files of a topic not created"
                admin.create_topics([spec])[topic].result(timeout=60)  # the retry succeeds
            assert _partition_count(admin, topic) == PARTITIONS
            assert _policy(admin, topic) == "compact"
    finally:
        if broker.alive():
            broker.kill()


def test_a_kill_during_create_partitions_or_deletion_leaves_all_or_nothing(
    tmp_path: Path,
) -> None:
    rng = random.Random(11262026)
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        for round_ in range(ROUNDS):
            topic = f"grown-{round_}"
            admin = _admin(broker)
            admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
                topic
            ].result(timeout=60)
            admin.create_partitions([NewPartitions(topic, PARTITIONS)], operation_timeout=60)
            _kill_once_started(broker, broker.data / f"{topic}-1", rng)
            broker.start()
            admin = _admin(broker)
            assert _partition_count(admin, topic) in (1, PARTITIONS)
            assert _policy(admin, topic) == "compact"
            if _partition_count(admin, topic) == 1:
                assert not (broker.data / f"{topic}-1").exists()
                admin.create_partitions([NewPartitions(topic, PARTITIONS)])[topic].result(60)
            assert _partition_count(admin, topic) == PARTITIONS
            # Then a deletion, killed part way: the topic is whole or gone.
            admin.delete_topics([topic], operation_timeout=60)
            _kill_once_started(broker, broker.data / "seglog-topics.json", rng)
            broker.start()
            admin = _admin(broker)
            assert _partition_count(admin, topic) in (None, PARTITIONS)
            if _partition_count(admin, topic) is None:
                assert not any(broker.data.glob(f"{topic}-*"))
    finally:
        if broker.alive():
            broker.kill()
