"""Fixtures of the topic source tests: log directories in temporary directories, and
``tests/broker``'s real broker (``seglog serve`` on a free port) whose log directory
the files source reads while it runs."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.broker.conftest import broker, topic

__all__ = ["broker", "create_topic", "topic"]


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    """Create ``name`` on the broker at ``bootstrap`` and wait for the answer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)]
    )
    futures[name].result(timeout=30)
