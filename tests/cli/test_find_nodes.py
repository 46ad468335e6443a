"""``seglog find`` against ``seglog serve --nodes 2 --console-port P``: bootstrapped from either
node, it finds that node's API port and the records of the partitions both nodes lead."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner
from confluent_kafka import Producer

from seglog.cli.main import cli
from tests.broker.http_api.conftest import create_topic, node_apis
from tests.broker.nodes.conftest import Cluster, free_ports, make_cluster

__all__ = ["make_cluster"]  # fixture


def test_either_node_answers_for_both(make_cluster: Any, topic: str) -> None:
    console = free_ports(2)
    cluster: Cluster = make_cluster(2, **{"console.port": str(console)})
    node_apis(cluster, console)
    create_topic(cluster.bootstrap(), topic, partitions=2)  # node 1 leads 0, node 2 leads 1
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 0})
    for partition, timestamp in ((0, 1000), (1, 2000), (0, 3000)):
        producer.produce(topic, b"p%d" % partition, b"k", partition=partition, timestamp=timestamp)
        assert producer.flush(30) == 0
    expected = [(0, "p0", 3000), (1, "p1", 2000), (0, "p0", 1000)]
    for source in (
        ["--bootstrap-server", cluster.bootstrap(1)],
        ["--bootstrap-server", cluster.bootstrap(2)],
        ["--log-dir", str(cluster.data)],
    ):
        result = CliRunner().invoke(cli, ["find", topic, "k", "--all", "--format", "json", *source])
        assert result.exit_code == 0, (result.output, result.exception)
        found = [json.loads(line) for line in result.stdout.splitlines()]
        assert [(r["partition"], r["value"], r["timestamp"]) for r in found] == expected, source
