"""Several nodes: a fetch waiting on a node is answered when its topic is deleted elsewhere.

The deletion is carried out by the controller, which has the other nodes
release their partitions over the control channel: the waiting fetch is woken
from that thread and answers the error at once, not at its max_wait_ms (ten
minutes here).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.nodes.conftest import Cluster, free_ports
from tests.broker.test_fetch_wait import PATIENCE, PURGATORY, Purgatory, RawFetch


def test_a_fetch_on_a_node_answers_at_once_when_the_controller_deletes_its_topic(
    make_cluster: Any,
) -> None:
    metrics = free_ports(2)  # node i serves its page on metrics.port + i - 1
    cluster: Cluster = make_cluster(2, **{"metrics.port": str(metrics)})
    # Node 2's page, read as the single-broker tests read theirs.
    node2 = Purgatory(metrics + 1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    topic = "deleted-under-a-fetch"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(PATIENCE)
    leaders = {
        p.id: p.leader
        for p in admin.list_topics(topic, timeout=PATIENCE).topics[topic].partitions.values()
    }
    # A partition node 2 leads, fetched from node 2; the controller is node 1.
    partition = next(p for p, leader in leaders.items() if leader == 2)
    fetch = RawFetch(cluster.port(2), topic, {partition: 0})
    node2.wait_until(lambda m: m[PURGATORY + "numdelayedoperations"] == 1, "the fetch waiting")
    admin.delete_topics([topic])[topic].result(PATIENCE)
    answer = fetch.answer()
    assert answer[partition]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    node2.wait_until(lambda m: m[PURGATORY + "purgatorysize"] == 0, "no waiter left")
