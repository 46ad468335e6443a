"""Share groups on ``/metrics``: acknowledgements by type, each share-partition's records by
event and state, the open share sessions; a deleted topic's share-partitions leave the page
and the broker-wide totals do not fall."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable

from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.share.helpers import WAIT
from tests.broker.share.raw import RawClient, ack, acquired, setup_group, share_fetch

ACCEPT, RELEASE, REJECT = 1, 2, 3
ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the page, by name and sorted labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        page = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


def of(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_share_group_metrics(make_broker: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    broker = make_broker(**{"metrics.port": str(port)})
    topic, tid, group = setup_group(broker)
    member = str(uuid.uuid4())
    where = {"group": group, "topic": topic, "partition": "0"}
    with RawClient(broker) as client:
        assert acquired(share_fetch(client, group, member, 0, [(tid, 0, [])])) == [(0, 9, 1)]
        acks = [ack(0, 5, ACCEPT), ack(6, 7, RELEASE), ack(8, 9, REJECT)]
        share_fetch(client, group, member, 1, [(tid, 0, acks)])
        # The two released records came back at once, to the same fetch.
        samples = scrape(port)
        assert of(samples, "kafka_server_share_sessions") == 1
    assert of(samples, ACKS, acktype="accept") == 6
    assert of(samples, ACKS, acktype="release") == 2
    assert of(samples, ACKS, acktype="reject") == 2
    assert of(samples, "kafka_sharegroup_records_total", **where, event="acquired") == 12
    assert of(samples, "kafka_sharegroup_records_total", **where, event="redelivered") == 2
    assert of(samples, "kafka_sharegroup_inflight_records", **where, state="acquired") == 2
    assert of(samples, "kafka_sharegroup_start_offset", **where) == 6

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=WAIT)
    deadline = time.monotonic() + WAIT
    samples = scrape(port)
    while (
        of(samples, "kafka_sharegroup_start_offset", **where) is not None
        or of(samples, "kafka_server_share_sessions") != 0
    ):
        assert time.monotonic() < deadline, "the deleted topic's share-partition stayed"
        time.sleep(0.1)
        samples = scrape(port)
    assert of(samples, ACKS, acktype="accept") == 6  # a counter never falls
    assert of(samples, ACKS, acktype="reject") == 2
    assert not [key for key in samples if ("topic", topic) in key[1]]
