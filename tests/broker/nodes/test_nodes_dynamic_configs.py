"""Dynamic broker configs changed through one node apply on every node (the default),
or on that node only (its own)."""

from __future__ import annotations

from typing import Any

from seglog.protocol import ApiKey
from tests.broker.nodes.conftest import Cluster, Raw

BROKER, TOPIC, GROUP = 4, 2, 32
SET = 0


def _set(port: int, name: str, key: str, value: str) -> None:
    raw = Raw(port)
    answer = raw.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": BROKER,
                    "resource_name": name,
                    "configs": [{"name": key, "config_operation": SET, "value": value}],
                }
            ],
            "validate_only": False,
        },
    )
    raw.close()
    assert answer["responses"][0]["error_code"] == 0, answer


def _describe(port: int, kind: int, name: str) -> dict[str, dict[str, Any]]:
    raw = Raw(port)
    answer = raw.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": kind, "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    raw.close()
    result = answer["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: c for c in result["configs"]}


def _create(port: int, topic: str) -> None:
    raw = Raw(port)
    answer = raw.call(
        ApiKey.CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 2,
                    "replication_factor": -1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 30000,
            "validate_only": False,
        },
    )
    raw.close()
    assert answer["topics"][0]["error_code"] == 0, answer


def test_the_default_reaches_every_node_and_a_nodes_own_stays_there(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    _create(cluster.port(1), "shared")
    # Changed through each node in turn: neither change may undo the other.
    _set(cluster.port(2), "", "log.retention.ms", "7200000")
    _set(cluster.port(1), "", "log.roll.ms", "3600000")
    _set(cluster.port(2), "2", "log.retention.ms", "60000")
    for node in (1, 2):
        default = _describe(cluster.port(node), BROKER, "")
        assert {k: v["value"] for k, v in default.items()} == {
            "log.retention.ms": "7200000",
            "log.roll.ms": "3600000",
        }
    mine = {
        node: _describe(cluster.port(node), BROKER, str(node))["log.retention.ms"]
        for node in (1, 2)
    }
    assert (mine[1]["value"], mine[1]["config_source"]) == ("7200000", 3)
    assert (mine[2]["value"], mine[2]["config_source"]) == ("60000", 2)
    topic = _describe(cluster.port(1), TOPIC, "shared")
    assert topic["retention.ms"]["value"] == "7200000"
    assert topic["segment.ms"]["value"] == "3600000"


def test_a_groups_configs_reach_every_node(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster: Cluster = make_cluster(2)
    group = "nodes-group-configs"
    # Changed through each node in turn: neither change may undo the other.
    for node, key, value in (
        (1, "consumer.session.timeout.ms", "50000"),
        (2, "consumer.heartbeat.interval.ms", "6000"),
    ):
        raw = Raw(cluster.port(node))
        answer = raw.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": GROUP,
                        "resource_name": group,
                        "configs": [{"name": key, "config_operation": SET, "value": value}],
                    }
                ],
                "validate_only": False,
            },
        )
        raw.close()
        assert answer["responses"][0]["error_code"] == 0, answer
    for node in (1, 2):
        configs = _describe(cluster.port(node), GROUP, group)
        assert configs["consumer.session.timeout.ms"]["value"] == "50000"
        assert configs["consumer.heartbeat.interval.ms"]["value"] == "6000"
