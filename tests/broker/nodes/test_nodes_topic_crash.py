"""--nodes 2: the controller killed during a forwarded CreateTopics leaves all or nothing."""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

PARTITIONS = 120


def _count(admin: AdminClient, topic: str) -> int | None:
    info = admin.list_topics(timeout=30).topics.get(topic)
    return None if info is None or info.error is not None else len(info.partitions)


def test_a_controller_killed_during_a_forwarded_creation_leaves_all_or_nothing(
    make_cluster: Any,
) -> None:
    rng = random.Random(7)
    cluster = make_cluster(2)
    for round_ in range(2):
        topic = f"forwarded-{round_}"
        # Through node 2, which forwards the creation to the controller (node 1).
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(2), "log_level": "0"})
        spec = NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})
        future = admin.create_topics([spec], operation_timeout=60, request_timeout=90)[topic]
        deadline = time.monotonic() + 60
        while not (cluster.data / f"{topic}-0").exists() and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.2))
        cluster.kill_node(1)
        # An error answer is allowed if nothing is left; checked below.
        with contextlib.suppress(KafkaException):
            future.result(timeout=120)
        cluster.wait_listening([1], timeout=60)
        count = _count(admin, topic)
        assert count in (None, PARTITIONS), f"round {round_}: {count} partitions"
        if count is None:
            admin.create_topics([spec])[topic].result(timeout=120)  # the retry succeeds
        assert _count(admin, topic) == PARTITIONS
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(timeout=30)
        assert configs["cleanup.policy"].value == "compact"
