"""Topic administration, configs, offsets by time and DeleteRecords through real clients."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.broker.conftest import BrokerProcess

BASE_TS = 1_700_000_000_000


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_create_describe_alter_delete(broker: BrokerProcess, topic: str) -> None:
    client = admin(broker)
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1, config={"retention.ms": "1234"})]
    )
    futures[topic].result(10)
    metadata = client.list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3

    again = client.create_topics([NewTopic(topic, 1, 1)])
    try:
        again[topic].result(10)
        raise AssertionError("creating an existing topic must fail")
    except KafkaException as exc:
        assert exc.args[0].name() == "TOPIC_ALREADY_EXISTS"

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "1234"
    assert configs["segment.bytes"].value == "1073741824"

    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    client.incremental_alter_configs([change])[change].result(10)
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"

    client.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(client.list_topics(topic, timeout=10).topics[topic].partitions) == 5

    client.delete_topics([topic])[topic].result(10)
    assert topic not in client.list_topics(timeout=10).topics


def test_bad_topic_config_is_refused(broker: BrokerProcess, topic: str) -> None:
    client = admin(broker)  # keep the client alive until its futures resolve
    futures = client.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "lots"})])
    try:
        futures[topic].result(10)
        raise AssertionError("an invalid config must be refused")
    except KafkaException as exc:
        assert exc.args[0].name() == "INVALID_CONFIG"


def _produce_timed(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, timestamp=BASE_TS + i * 100)
        producer.flush(10)


def test_offsets_by_timestamp(broker: BrokerProcess, topic: str) -> None:
    _produce_timed(broker, topic, 20)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        wanted = [TopicPartition(topic, 0, BASE_TS + 550)]
        found = consumer.offsets_for_times(wanted, timeout=10)
        assert found[0].offset == 6  # first timestamp >= 550 is 600
        past_end = consumer.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 10**6)], 10)
        assert past_end[0].offset == -1
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 20)
    finally:
        consumer.close()
    client = admin(broker)
    result = client.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()})
    info = next(iter(result.values())).result(10)
    assert info.offset == 19 and info.timestamp == BASE_TS + 1900


def test_delete_records_moves_earliest(broker: BrokerProcess, topic: str) -> None:
    _produce_timed(broker, topic, 10)
    client = admin(broker)
    futures = client.delete_records([TopicPartition(topic, 0, 4)])
    deleted = next(iter(futures.values())).result(10)
    assert deleted.low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (4, 10)
    finally:
        consumer.close()


def test_delete_records_below_zero_is_out_of_range(broker: BrokerProcess, topic: str) -> None:
    """Only -1 means the high watermark; librdkafka's "no offset" (-1001) is refused as Kafka
    refuses it (librdkafka's test 0081-admin checks this)."""
    _produce_timed(broker, topic, 3)
    client = admin(broker)
    futures = client.delete_records([TopicPartition(topic, 0, -1001)])
    with pytest.raises(KafkaException) as refused:
        next(iter(futures.values())).result(10)
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_retention_config_change_takes_effect(make_broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker(**{"log.retention.check.interval.ms": "200"})
    client = admin(broker)
    client.create_topics([NewTopic(topic, 1, 1, config={"internal.segment.bytes": "2000"})])[
        topic
    ].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(30):
        producer.produce(topic, value=b"x" * 200, timestamp=BASE_TS + i)
        producer.flush(10)
    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    client.incremental_alter_configs([change])[change].result(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        import time

        deadline = time.monotonic() + 20
        low = 0
        while time.monotonic() < deadline:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            if low > 0:
                break
            time.sleep(0.2)
        # Records from 2023 are far older than one second: all but the active segment go.
        assert low == 30 and high == 30
    finally:
        consumer.close()


def _config_error(future: object) -> KafkaException:
    try:
        future.result(10)  # type: ignore[attr-defined]
    except KafkaException as exc:
        return exc
    raise AssertionError("an out-of-range config must be refused")


def test_out_of_range_configs_are_refused_with_kafkas_message(
    broker: BrokerProcess, topic: str
) -> None:
    client = admin(broker)
    futures = client.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(2**40)})])
    error = _config_error(futures[topic]).args[0]
    assert error.name() == "INVALID_CONFIG"
    assert error.str() == (
        f"Invalid value {2**40} for configuration segment.bytes: Not a number of type INT"
    )
    assert topic not in client.list_topics(timeout=10).topics

    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    for name, value, message in [
        ("min.cleanable.dirty.ratio", "NaN", "Not a number of type DOUBLE"),
        ("segment.index.bytes", "1000000000000", "Not a number of type INT"),
        ("segment.ms", "0", "Value must be at least 1"),
    ]:
        change = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        error = _config_error(client.incremental_alter_configs([change])[change]).args[0]
        assert error.name() == "INVALID_CONFIG"
        assert f"Invalid value {value} for configuration {name}: {message}" in error.str()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["segment.ms"].value == "604800000"


def test_broker_refuses_to_start_on_an_invalid_config(make_broker) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError) as caught:
        make_broker(**{"log.segment.bytes": str(2**40)})
    assert (
        f"Invalid value {2**40} for configuration log.segment.bytes: Not a number of type INT"
        in str(caught.value)
    )


def test_describe_broker_configs_hides_secrets(make_broker) -> None:  # type: ignore[no-untyped-def]
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="hunter2";'
    broker = make_broker(
        **{
            "ssl.keystore.password": "hunter2",
            "sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "my.plugin.token": "hunter2",
            "log.retention.hours": "2",
        }
    )
    client = admin(broker)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = client.describe_configs([resource])[resource].result(10)
    for name in (
        "ssl.keystore.password",
        "sasl.jaas.config",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        "my.plugin.token",
    ):
        assert configs[name].value is None, name
        assert configs[name].is_sensitive, name
    assert not any("hunter2" in (entry.value or "") for entry in configs.values())
    assert configs["ssl.key.password"].is_sensitive and configs["ssl.key.password"].value is None
    assert not configs["log.retention.ms"].is_sensitive
    assert configs["log.retention.ms"].value == "7200000"
    assert configs["log.segment.bytes"].value == "1073741824"
    assert configs["log.segment.bytes"].is_default
    assert configs["log.retention.hours"].value == "2"
    assert not configs["log.retention.hours"].is_default
