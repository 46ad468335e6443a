"""The group configs' table, checks and file (:mod:`seglog.broker.group_config`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seglog.broker.group_config import GROUP_CONFIGS_FILE, GroupConfigs, defaults, validate
from seglog.errors import InvalidConfigError


def test_defaults_follow_the_brokers_settings() -> None:
    values = defaults({"group.consumer.session.timeout.ms": "50000"})
    assert values["consumer.session.timeout.ms"] == "50000"
    assert values["consumer.heartbeat.interval.ms"] == "5000"
    assert values["share.auto.offset.reset"] == "latest"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"consumer.heartbeat.interval.ms": "nope"}, "consumer.heartbeat.interval.ms"),
        (
            {"consumer.heartbeat.interval.ms": "4000"},
            "consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"consumer.session.timeout.ms": "70000"},
            "consumer.session.timeout.ms must be less than or equal to "
            "group.consumer.max.session.timeout.ms",
        ),
        (
            {"share.record.lock.duration.ms": "10000"},
            "share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        ({"share.isolation.level": "dirty"}, "share.isolation.level"),
        ({"consumer.sesion.timeout.ms": "50000"}, "Unknown group config name"),
    ],
)
def test_refusals_carry_kafkas_messages(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        validate(props, {})


def test_configs_are_kept_whole_and_read_back(tmp_path: Path) -> None:
    configs = GroupConfigs.load(tmp_path, dict)
    configs.replace("a", {"consumer.session.timeout.ms": "50000"})
    configs.replace("b", {"consumer.heartbeat.interval.ms": "6000"})
    configs.replace("b", {})  # emptied: gone from the file
    assert not (tmp_path / (GROUP_CONFIGS_FILE + ".tmp")).exists()
    again = GroupConfigs.load(tmp_path, dict)
    assert again.groups == {"a": {"consumer.session.timeout.ms": "50000"}}
    assert again.consumer_overrides() == {"a": {"consumer.session.timeout.ms": 50000}}


def test_a_group_that_no_longer_fits_the_bounds_is_ignored_at_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / GROUP_CONFIGS_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "groups": {
                    "fits": {"consumer.session.timeout.ms": "50000"},
                    "too-long": {"consumer.session.timeout.ms": "59000"},
                },
            }
        )
    )
    configs = GroupConfigs.load(
        tmp_path, lambda: {"group.consumer.max.session.timeout.ms": "55000"}
    )
    assert configs.groups == {"fits": {"consumer.session.timeout.ms": "50000"}}
    assert "too-long" in caplog.text
