"""The configuration table: Kafka's types, ranges and messages for every setting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.broker.settings import BrokerSettings
from seglog.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    LogConfig,
    Type,
    is_sensitive,
)
from seglog.coordinator.requests import CoordinatorConfig
from seglog.errors import InvalidConfigError
from seglog.storage.log_dir import LogDirSettings


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "segment.bytes",
            str(2**40),
            f"Invalid value {2**40} for configuration segment.bytes: Not a number of type INT",
        ),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.bytes", "1000", "Value must be at least 1048576"),
        ("segment.index.bytes", "1000000000000", "Not a number of type INT"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "NaN", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "1.01", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        (
            "segment.ms",
            "0",
            "Invalid value 0 for configuration segment.ms: Value must be at least 1",
        ),
        ("segment.ms", "1_000", "Not a number of type LONG"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("cleanup.policy", "delete,forever", "String must be one of: compact, delete"),
        ("compression.type", "brotli", "String must be one of"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("preallocate", "yes", "Expected value to be either true or false"),
    ],
)
def test_topic_config_out_of_range_is_refused(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"Invalid value .* for configuration") as caught:
        LogConfig.from_properties({name: value})
    assert message in str(caught.value)
    assert name in str(caught.value)


def test_unknown_topic_config_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match=r"Unknown topic config name: no\.such"):
        LogConfig.from_properties({"no.such": "1"})


def test_values_in_range_are_accepted() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": str(2**31 - 1),
            "segment.index.bytes": "4",
            "min.cleanable.dirty.ratio": "1",
            "cleanup.policy": "compact, delete",
            "retention.ms": "-1",
        }
    )
    assert config.segment_bytes == 2**31 - 1
    assert config.min_cleanable_dirty_ratio == 1.0
    assert config.cleanup_policy == "compact,delete"


@given(st.integers())
def test_int_configs_take_exactly_the_int32_range(value: int) -> None:
    # segment.index.bytes: an INT at least 4.
    if 4 <= value <= 2**31 - 1:
        assert LogConfig.from_properties(
            {"segment.index.bytes": str(value)}
        ).segment_index_bytes == (value)
    else:
        with pytest.raises(InvalidConfigError):
            LogConfig.from_properties({"segment.index.bytes": str(value)})


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_dirty_ratio_is_a_number_between_0_and_1(value: float) -> None:
    text = repr(value) if value == value else "NaN"
    if 0 <= value <= 1:
        assert LogConfig.from_properties({"min.cleanable.dirty.ratio": text})
    else:
        with pytest.raises(InvalidConfigError):
            LogConfig.from_properties({"min.cleanable.dirty.ratio": text})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("log.segment.bytes", str(2**40)),
        ("log.index.size.max.bytes", "2"),
        ("log.cleaner.min.cleanable.ratio", "2"),
        ("num.partitions", "0"),
        ("socket.request.max.bytes", "big"),
        ("node.id", "one"),
        ("auto.create.topics.enable", "maybe"),
        ("log.retention.check.interval.ms", "0"),
        ("log.cleaner.backoff.ms", "-1"),
        ("offsets.topic.num.partitions", "0"),
        ("group.max.size", "0"),
        ("metrics.port", "70000"),
        ("log.roll.hours", "0"),
    ],
)
def test_broker_config_out_of_range_is_refused(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=f"for configuration {name}: "):
        BrokerSettings.from_properties({name: value})


def test_every_component_reads_the_one_table() -> None:
    properties = {
        "broker.id": "7",
        "log.segment.bytes": "2097152",
        "log.retention.minutes": "2",
        "log.retention.hours": "5",
        "log.cleaner.enable": "false",
        "log.cleaner.io.max.bytes.per.second": "1e6",
        "offsets.retention.minutes": "3",
        "offsets.topic.num.partitions": "4",
        "num.partitions": "3",
    }
    settings = BrokerSettings.from_properties(properties)
    assert settings.node_id == 7
    assert settings.num_partitions == 3
    assert settings.log_defaults.segment_bytes == 2_097_152
    assert settings.log_defaults.retention_ms == 120_000  # minutes win over hours
    assert settings.log_dir_settings == LogDirSettings.from_properties(properties)
    assert settings.log_dir_settings.node_id == 7
    assert settings.log_dir_settings.log_cleaner_enable is False
    assert settings.log_dir_settings.log_cleaner_io_max_bytes_per_second == 1e6
    coordinator = CoordinatorConfig.from_properties(properties)
    assert coordinator.offsets_retention_ms == 180_000
    assert coordinator.offsets_topic_num_partitions == 4


def test_dataclass_defaults_are_the_table_defaults() -> None:
    assert LogConfig.from_properties({}) == LogConfig()
    assert LogDirSettings.from_properties({}) == LogDirSettings()
    assert CoordinatorConfig.from_properties({}) == CoordinatorConfig()
    config = BrokerConfig({})
    for definition in TOPIC_CONFIGS:
        if not definition.internal:
            assert config[definition.broker_name] == definition.default


def test_secrets_are_sensitive() -> None:
    assert BROKER_CONFIGS["ssl.keystore.password"].type is Type.PASSWORD
    for name in (
        "ssl.keystore.password",
        "sasl.jaas.config",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        "listener.name.ssl.ssl.key.password",
        "some.unknown.plugin.secret",
    ):
        assert is_sensitive(name), name
    for name in ("log.segment.bytes", "listeners", "ssl.keystore.location"):
        assert not is_sensitive(name), name
