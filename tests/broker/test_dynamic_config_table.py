"""The dynamic marker of the settings table and the file the dynamic configs live in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seglog.broker.dynamic_config import (
    CONFIGS_FILE,
    DynamicConfigs,
    InvalidBrokerConfigError,
    check_change,
    effective_settings,
)
from seglog.broker.settings import BrokerSettings
from seglog.config import BROKER_CONFIGS, TOPIC_CONFIGS, Dynamic


def test_every_topic_configs_broker_default_changes_cluster_wide_as_in_kafka() -> None:
    for topic in TOPIC_CONFIGS:
        if topic.internal or topic.broker_name is None:
            continue
        assert BROKER_CONFIGS[topic.broker_name].dynamic is Dynamic.CLUSTER_WIDE, topic.name
    # Kafka's coarse synonyms and where the broker listens or stores are read at start only.
    for name in ("log.retention.hours", "log.roll.hours", "listeners", "log.dirs", "node.id"):
        assert BROKER_CONFIGS[name].dynamic is None, name
    assert BROKER_CONFIGS["sasl.kerberos.min.time.before.relogin"].dynamic is Dynamic.PER_BROKER
    # A secret is never dynamic here: the file holds no password.
    assert not any(c.dynamic and c.sensitive for c in BROKER_CONFIGS.values())


def test_refusals_come_in_kafkas_order() -> None:
    with pytest.raises(InvalidBrokerConfigError, match=r"dynamically: Set\(log.dirs\)"):
        check_change({"log.dirs": "x", "log.retention.ms": "soon"}, per_broker=True)
    with pytest.raises(InvalidBrokerConfigError, match="Not a number of type LONG"):
        check_change(
            {"log.retention.ms": "soon", "sasl.kerberos.min.time.before.relogin": "1"},
            per_broker=False,
        )
    check_change({"sasl.kerberos.min.time.before.relogin": "1"}, per_broker=True)


def test_changes_are_kept_whole_and_read_back(tmp_path: Path) -> None:
    configs = DynamicConfigs.load(tmp_path, 1, {"log.retention.hours": "2"})
    configs.replace("", {"log.retention.ms": "1000"})
    configs.replace("1", {"num.partitions": "4"})
    configs.replace("2", {"num.partitions": "5"})
    assert not (tmp_path / (CONFIGS_FILE + ".tmp")).exists()
    again = DynamicConfigs.load(tmp_path, 1, {"log.retention.hours": "2"})
    assert again.default == {"log.retention.ms": "1000"}
    assert again.mine == {"num.partitions": "4"}
    assert again.level("2") == {"num.partitions": "5"}
    settings = BrokerSettings.from_properties({"log.retention.hours": "2"})
    effective = effective_settings(settings, again.effective())
    assert effective.log_defaults.retention_ms == 1000
    assert effective.num_partitions == effective.log_dir_settings.num_partitions == 4
    # Emptying a broker's level removes it from the file.
    again.replace("2", {})
    data = json.loads((tmp_path / CONFIGS_FILE).read_text())
    assert data["brokers"] == {"1": {"num.partitions": "4"}}


def test_what_no_longer_passes_is_ignored_at_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / CONFIGS_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "default": {"listeners": "PLAINTEXT://:1", "log.retention.ms": "5"},
                "brokers": {"1": {"num.partitions": "0"}},
            }
        )
    )
    configs = DynamicConfigs.load(tmp_path, 1, {})
    assert configs.default == {"log.retention.ms": "5"}
    assert configs.mine == {}
    assert "listeners" in caplog.text and "num.partitions" in caplog.text
