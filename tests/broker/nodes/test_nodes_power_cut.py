"""One node of ``seglog serve --nodes 2`` loses power while the other keeps running.

The node runs over :mod:`tests.broker.nodes.power_cut`'s file system: a cut drops
what it wrote but did not fsync, in its partitions only. What the broker promises
must hold: a record acknowledged (acks=all) on a topic with ``flush.messages=1``
was fsynced before the answer, so it survives; the other node's partitions are
untouched; after the node's recovery the directory passes ``seglog verify``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.cli.serve import TEST_NODE_HOOK
from seglog.storage import filenames
from tests.broker.nodes import power_cut
from tests.broker.nodes.conftest import Cluster, listening
from tests.log_dirs import check_log_dirs

REPOSITORY = Path(__file__).resolve().parents[3]
COUNT = 40


def _environment(image: Path, node_index: int) -> dict[str, str]:
    """This process's environment, with the node hook armed for ``node_index``."""
    environment = dict(os.environ)
    # The node imports the hook from tests/: the repository goes on its path, after
    # what is there (the sources under test first).
    paths = [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    environment["PYTHONPATH"] = os.pathsep.join([*paths, str(REPOSITORY)])
    environment[TEST_NODE_HOOK] = power_cut.HOOK
    environment[power_cut.NODE] = str(node_index)
    environment[power_cut.IMAGE] = str(image)
    return environment


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap(1)}).list_topics(timeout=30)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def _produce(cluster: Cluster, topic: str, partitions: list[int]) -> dict[int, list[bytes]]:
    """COUNT records to each partition, every one acknowledged (acks=all, idempotent)."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap(1), "acks": "all", "enable.idempotence": True}
    )
    sent = {p: [f"{topic}-{p}-{i}".encode() for i in range(COUNT)] for p in partitions}
    failures: list[Any] = []
    for partition, values in sent.items():
        for value in values:
            producer.produce(
                topic,
                value=value,
                partition=partition,
                on_delivery=lambda err, _msg: failures.append(err) if err else None,
            )
    assert producer.flush(60) == 0
    assert failures == []
    return sent


def _read(cluster: Cluster, topic: str, partition: int) -> list[bytes]:
    """Every record of the partition, up to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(1),
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=60)
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 120  # a guard against a hang only
        while len(values) < high and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                value = message.value()
                assert value is not None
                values.append(value)
        return values
    finally:
        consumer.close()


def _wait_restarted(cluster: Cluster, node_id: int, old: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if cluster.node_pid(node_id) != old and listening(cluster.port(node_id)):
                return
        except LookupError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"node {node_id} was not restarted")


@pytest.mark.parametrize("victim", [2, 1], ids=["a node", "the controller"])
def test_a_node_losing_power_keeps_every_fsynced_acknowledged_record(
    make_cluster: Any, tmp_path: Path, victim: int
) -> None:
    """Node 1 is the controller: it creates every topic's partition directories."""
    survivor = 3 - victim
    image = tmp_path / "power-cut-image"
    cluster: Cluster = make_cluster(2, environment=_environment(image, node_index=victim - 1))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(survivor)})
    created = admin.create_topics(
        [NewTopic("synced", 2, 1, config={"flush.messages": "1"}), NewTopic("unsynced", 2, 1)]
    )
    for future in created.values():
        future.result(60)
    led: dict[str, dict[int, int]] = {}
    for topic in ("synced", "unsynced"):
        led[topic] = {leader: p for p, leader in _leaders(cluster, topic).items()}
        assert sorted(led[topic]) == [1, 2]  # one partition on each node
    sent = {topic: _produce(cluster, topic, [0, 1]) for topic in ("synced", "unsynced")}

    running = cluster.node_pid(survivor)
    old = cluster.node_pid(victim)
    os.kill(old, power_cut.SIGNAL)
    _wait_restarted(cluster, victim, old)
    assert cluster.node_pid(survivor) == running  # the other node ran on throughout

    # The restarted node found its partitions as the cut left them, and only those.
    restored = json.loads(power_cut.applied_path(image).read_text())
    assert f"synced-{led['synced'][victim]}" in restored
    assert f"unsynced-{led['unsynced'][victim]}" in restored
    others = {f"synced-{led['synced'][survivor]}", f"unsynced-{led['unsynced'][survivor]}"}
    assert not others & set(restored)
    assert all(filenames.parse_partition_dir(name) for name in restored)

    # Acknowledged after an fsync: all there, on both nodes.
    for partition in (0, 1):
        assert _read(cluster, "synced", partition) == sent["synced"][partition]
    # Never synced: the node that lost power lost them (what is left is a prefix),
    # the other node keeps all of them.
    cut, kept_whole = led["unsynced"][victim], led["unsynced"][survivor]
    kept = _read(cluster, "unsynced", cut)
    assert len(kept) < COUNT
    assert kept == sent["unsynced"][cut][: len(kept)]
    assert _read(cluster, "unsynced", kept_whole) == sent["unsynced"][kept_whole]

    # The node takes new records on the partition that lost some.
    more = _produce(cluster, "unsynced", [cut])[cut]
    assert _read(cluster, "unsynced", cut) == kept + more

    assert cluster.stop() == 0
    check_log_dirs(cluster.data)
