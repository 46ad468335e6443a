"""Authorized operations (KIP-430) in DescribeTopics, DescribeCluster and group descriptions, as
librdkafka asks, from a broker without an authorizer: every operation the resource supports."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.broker.conftest import BrokerProcess


def test_every_supported_operation_is_reported_when_asked(
    broker: BrokerProcess, topic: str
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    asked = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    described = asked[topic].result(30)
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    }
    # Not asked: none reported.
    plain = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert not plain.authorized_operations


def test_a_groups_operations_are_reported_when_asked(broker: BrokerProcess, topic: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        consumer.poll(1)
        asked = admin.describe_consumer_groups([topic], include_authorized_operations=True)
        described = asked[topic].result(30)
        assert set(described.authorized_operations) == {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
        }
        plain = admin.describe_consumer_groups([topic])[topic].result(30)
        assert not plain.authorized_operations
    finally:
        consumer.close()
