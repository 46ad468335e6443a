"""The /metrics page: Prometheus text with counters, latency histograms and log sizes."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable

from confluent_kafka import Producer

from seglog.broker.state import Metrics
from tests.broker.clients.test_confluent_kafka import consume_all
from tests.broker.conftest import BrokerProcess, free_port


def test_observe_fills_one_bucket_per_request() -> None:
    metrics = Metrics()
    for seconds in (0.0001, 0.0005, 0.003, 0.003, 7.0):
        metrics.observe("Produce", "NONE", seconds)
    assert metrics.requests[("Produce", "NONE")] == 5
    buckets = metrics.latency_buckets["Produce"]
    assert sum(buckets) == 5
    assert buckets[0] == 2  # <= 0.5 ms, the bound itself included
    assert buckets[Metrics.BUCKETS.index(0.005)] == 2
    assert buckets[-1] == 1  # above every bound: +Inf only


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _value(page: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", page, re.MULTILINE)
    assert match, f"{series} not on the page"
    return float(match.group(1))


def test_the_metrics_page_counts_what_the_broker_did(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    port = free_port()
    broker = make_broker(**{"metrics.port": str(port)})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("measured", value=b"v%d" % i)
    assert producer.flush(10) == 0
    assert len(consume_all(broker.bootstrap, "measured", 10)) == 10
    page = _scrape(port)
    assert _value(page, "seglog_bytes_in_total") > 0
    assert _value(page, "seglog_bytes_out_total") > 0
    produced = _value(page, 'seglog_requests_total{api="Produce",error="NONE"}')
    assert produced >= 1
    # The histogram is cumulative and ends at the request count.
    buckets = [
        float(v)
        for v in re.findall(
            r'^seglog_request_seconds_bucket\{api="Produce",le="[^"]+"\} (\S+)$', page, re.MULTILINE
        )
    ]
    assert buckets == sorted(buckets) and buckets[-1] == produced
    assert _value(page, 'seglog_request_seconds_count{api="Produce"}') == produced
    assert _value(page, 'seglog_log_size_bytes{topic="measured",partition="0"}') > 0
