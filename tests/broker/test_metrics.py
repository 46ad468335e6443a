"""/metrics: Kafka's and kafka_exporter's names, read from a real broker after real work."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from seglog.broker.metrics import QUANTILES, SCRAPE_SWITCH_INTERVAL, _ScrapeRegistry, percentile
from seglog.broker.state import RECENT_TIMES, Metrics
from tests.broker.conftest import BrokerProcess, free_port

TOPIC = "kafka_server_brokertopicmetrics_"
REQUEST = "kafka_network_requestmetrics_"
DOCS = Path(__file__).resolve().parents[2] / "docs"


# ------------------------------------------------------------------ units


def test_percentiles_interpolate_between_the_values_around_the_rank() -> None:
    values = [float(v) for v in range(1, 100)]  # 1 … 99: rank q·100 is the value q·100
    assert percentile(values, 0.50) == 50.0
    assert percentile(values, 0.75) == 75.0
    assert percentile([10.0, 20.0], 0.50) == pytest.approx(15.0)
    assert percentile([7.0], 0.999) == 7.0
    assert percentile([], 0.99) == 0.0
    assert percentile([1.0, 2.0, 3.0], 0.01) == 1.0  # below the first rank: the smallest


def test_request_times_keep_a_window_of_the_latest_and_count_every_request() -> None:
    metrics = Metrics()
    for _ in range(RECENT_TIMES):
        metrics.observe("Produce", 9, "NONE", 1.0)  # 1 s = 1000 ms
    for _ in range(RECENT_TIMES):
        metrics.observe("Produce", 9, "NONE", 0.002)
    times = metrics.times["Produce"]
    assert times.count == 2 * RECENT_TIMES
    assert times.total_ms == pytest.approx(RECENT_TIMES * 1002.0)
    # The slow ones are all overwritten: the window shows requests as they are now.
    assert sorted(times.recent) == [pytest.approx(2.0)] * RECENT_TIMES
    assert metrics.requests[("Produce", 9)] == 2 * RECENT_TIMES
    assert metrics.errors[("Produce", "NONE")] == 2 * RECENT_TIMES


# ---------------------------------------------------------- a real broker


@dataclass
class Scrapes:
    """Pages scraped at two moments of one workload on one broker."""

    topic: str
    group: str
    bootstrap: str
    metrics_port: int
    #: While the group's consumer is still a member, after it committed all 10 records.
    during: str
    #: After the consumer left and 5 more records were produced (lag 5).
    after: str


def _scrape(port: int, host: str = "127.0.0.1") -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _samples(page: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def _value(page: str, name: str, **labels: str) -> float:
    samples = _samples(page)
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} not on the page"
    return samples[key]


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapes]:
    """One broker with /metrics: produce 10, consume and commit 10 in a group, produce 5 more."""
    metrics_port, registry_port = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path_factory.mktemp("metrics") / "data",
        {
            "metrics.port": str(metrics_port),
            "group.initial.rebalance.delay.ms": "0",
            # Served too, so that its metrics are on the page (one schema registered below).
            "schema.registry.port": str(registry_port),
        },
    )
    broker.start()
    topic = f"measured-{os.getpid()}"
    group = f"dashboard-{os.getpid()}"
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce(topic, value=b"v%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe([topic])
            got = 0
            deadline = time.monotonic() + 60
            while got < 10:
                assert time.monotonic() < deadline, f"consumed {got} of 10"
                message = consumer.poll(1)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                got += 1
            consumer.commit(asynchronous=False)
            during = _scrape(metrics_port)
        finally:
            consumer.close()
        for i in range(5):
            producer.produce(topic, value=b"w%d" % i)
        assert producer.flush(30) == 0
        _register_a_schema(registry_port, f"{topic}-value")
        after = _scrape(metrics_port)
        yield Scrapes(
            topic=topic,
            group=group,
            bootstrap=broker.bootstrap,
            metrics_port=metrics_port,
            during=during,
            after=after,
        )
    finally:
        assert broker.stop() == 0


def test_records_and_bytes_in_and_out_are_counted_per_topic_and_in_all(scrapes: Scrapes) -> None:
    page, topic = scrapes.after, scrapes.topic
    assert _value(page, TOPIC + "messagesin_total", topic=topic) == 15
    assert _value(page, TOPIC + "messagesin_total") == 15
    bytes_in = _value(page, TOPIC + "bytesin_total", topic=topic)
    assert bytes_in == _value(page, "kafka_log_log_size", topic=topic, partition="0")
    assert _value(page, TOPIC + "bytesin_total") == bytes_in
    # The consumer read the first 10 records' batches: part of what came in.
    bytes_out = _value(page, TOPIC + "bytesout_total", topic=topic)
    assert 0 < bytes_out <= bytes_in
    assert _value(page, TOPIC + "bytesout_total") == bytes_out
    appends = _value(page, TOPIC + "totalproducerequests_total", topic=topic)
    assert appends >= 2  # two flushes, at least one produce request each
    assert _value(page, TOPIC + "totalfetchrequests_total", topic=topic) >= 1


def test_requests_and_their_times_are_counted_by_api(scrapes: Scrapes) -> None:
    page = scrapes.after
    families = {f.name: f for f in text_string_to_metric_families(page)}
    produce = sum(
        s.value for s in families[REQUEST + "requests"].samples if s.labels["request"] == "Produce"
    )
    assert produce >= 2
    assert _value(page, REQUEST + "errors_total", request="Produce", error="NONE") == produce
    assert _value(page, REQUEST + "totaltimems_count", request="Produce") == produce
    assert _value(page, REQUEST + "totaltimems_sum", request="Produce") > 0
    quantiles = [
        _value(page, REQUEST + "totaltimems", request="Produce", quantile=label)
        for label, _ in QUANTILES
    ]
    assert quantiles == sorted(quantiles) and quantiles[0] > 0
    assert _value(page, REQUEST + "totaltimems_count", request="OffsetCommit") >= 1
    # A fetch counts as Fetch and, as in Kafka, as FetchConsumer.
    fetches = _value(page, REQUEST + "totaltimems_count", request="Fetch")
    assert fetches >= 1
    assert _value(page, REQUEST + "totaltimems_count", request="FetchConsumer") == fetches
    # The producer is still connected when the second page is read.
    assert (
        _value(
            page,
            "kafka_server_socket_server_metrics_connection_count",
            listener="PLAINTEXT",
            networkprocessor="0",
        )
        >= 1
    )
    created = _value(
        page,
        "kafka_server_socket_server_metrics_connection_creation_total",
        listener="PLAINTEXT",
        networkprocessor="0",
    )
    assert created >= 2  # the producer's and the consumer's


def test_partition_sizes_and_offsets_are_those_of_the_log(scrapes: Scrapes) -> None:
    page, where = scrapes.after, {"topic": scrapes.topic, "partition": "0"}
    assert _value(page, "kafka_log_log_logstartoffset", **where) == 0
    assert _value(page, "kafka_log_log_logendoffset", **where) == 15
    assert _value(page, "kafka_log_log_size", **where) > 0
    assert _value(page, "kafka_log_log_numlogsegments", **where) == 1
    assert _value(page, "kafka_topic_partition_current_offset", **where) == 15
    assert _value(page, "kafka_topic_partition_oldest_offset", **where) == 0
    assert _value(page, "kafka_topic_partition_leader", **where) == 1
    assert _value(page, "kafka_topic_partitions", topic=scrapes.topic) == 1
    assert _value(page, "kafka_topic_partition_under_replicated_partition", **where) == 0
    assert _value(page, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # The topic and the 50 partitions of __consumer_offsets, all led here.
    assert _value(page, "kafka_server_replicamanager_partitioncount") >= 51
    assert _value(page, "kafka_brokers") == 1
    assert _value(page, "kafka_controller_kafkacontroller_activecontrollercount") == 1


def test_consumer_group_offsets_lag_and_members(scrapes: Scrapes) -> None:
    group, topic = scrapes.group, scrapes.topic
    where = {"consumergroup": group, "topic": topic, "partition": "0"}
    during, after = scrapes.during, scrapes.after
    assert _value(during, "kafka_consumergroup_members", consumergroup=group) == 1
    assert _value(during, "kafka_consumergroup_current_offset", **where) == 10
    assert _value(during, "kafka_consumergroup_lag", **where) == 0
    assert _value(after, "kafka_consumergroup_members", consumergroup=group) == 0
    assert _value(after, "kafka_consumergroup_current_offset", **where) == 10
    assert _value(after, "kafka_consumergroup_lag", **where) == 5
    sums = {"consumergroup": group, "topic": topic}
    assert _value(after, "kafka_consumergroup_lag_sum", **sums) == 5
    assert _value(after, "kafka_consumergroup_current_offset_sum", **sums) == 10


def test_a_deleted_group_leaves_the_page(scrapes: Scrapes) -> None:
    admin = AdminClient({"bootstrap.servers": scrapes.bootstrap})
    admin.delete_consumer_groups([scrapes.group])[scrapes.group].result(30)
    page = _scrape(scrapes.metrics_port)
    assert not [
        (name, labels)
        for name, labels in _samples(page)
        if ("consumergroup", scrapes.group) in labels
    ]


def _register_a_schema(port: int, subject: str) -> None:
    body = json.dumps({"schema": json.dumps({"type": "record", "name": "M", "fields": []})})
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/subjects/{subject}/versions",
        data=body.encode(),
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        assert json.loads(reply.read())["id"] == 1


def test_the_schema_registry_is_counted(scrapes: Scrapes) -> None:
    page = scrapes.after
    assert _value(page, "kafka_schema_registry_registered_count") == 1
    assert _value(page, "kafka_schema_registry_master_slave_role") == 1
    assert _value(page, "kafka_schema_registry_subjects") == 1
    assert _value(page, "kafka_schema_registry_versions", schema_type="AVRO", state="live") == 1


def test_the_process_is_measured(scrapes: Scrapes) -> None:
    page = scrapes.after
    assert _value(page, "process_resident_memory_bytes") > 0
    assert _value(page, "process_cpu_seconds_total") > 0
    assert _value(page, "process_open_fds") > 0
    assert any(name == "python_info" for name, _ in _samples(page))


def _served_names(page: str) -> set[str]:
    """Each family as users query it: counters with their ``_total``."""
    return {
        f.name + "_total" if f.type == "counter" else f.name
        for f in text_string_to_metric_families(page)
    }


def _documented_names() -> set[str]:
    text = (DOCS / "metrics.md").read_text()
    section = text.split("## Every metric", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_:][a-z0-9_:]*)` \|", section, re.MULTILINE))


def test_every_served_metric_is_documented_and_every_documented_one_served(
    scrapes: Scrapes,
) -> None:
    served = _served_names(scrapes.after)
    documented = _documented_names()
    assert served - documented == set(), "served but not in docs/metrics.md"
    assert documented - served == set(), "in docs/metrics.md but not served"
    assert not any(name.startswith("seglog_") for name in served)  # the old names are gone


_PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "inf", "nan",
}  # fmt: skip


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana label_values query) reads."""
    expr = re.sub(r"label_values\(\s*([^,)]+)(,[^)]*)?\)", r"\1", expr)
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings, in matchers above all
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges ([5m], [$__rate_interval])
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\s*(\()?", expr):
        word, call = match.group(1), match.group(2)
        if call is None and word.lower() not in _PROMQL_WORDS:
            names.add(word)
    return names


def test_promql_names_are_told_from_functions_labels_and_variables() -> None:
    assert promql_metric_names(
        'sum by (topic) (rate(a_total{instance=~"$instance", topic!=""}[$__rate_interval]))'
        " / on (topic) group_left b_count"
    ) == {"a_total", "b_count"}
    assert promql_metric_names("label_values(c_gauge, instance)") == {"c_gauge"}
    assert promql_metric_names('max(d{quantile="0.99"}) > 2') == {"d"}


def _dashboard_queries(dashboard: dict) -> list[str]:  # type: ignore[type-arg]
    queries = []

    def panels(items: list[dict]) -> Iterator[dict]:  # type: ignore[type-arg]
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        queries += [target["expr"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def test_the_grafana_dashboard_is_one_grafana_can_import() -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"] and all(t["expr"] for t in panel["targets"])


def test_the_grafana_dashboard_queries_what_a_running_broker_serves(scrapes: Scrapes) -> None:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    queries = _dashboard_queries(dashboard)
    assert len(queries) >= 20
    served = {name for name, _ in _samples(scrapes.after)}
    wanted = set().union(*(promql_metric_names(q) for q in queries))
    assert wanted - served == set(), "the dashboard queries metrics the broker does not serve"
    # Every part the dashboard is for: throughput, requests, partitions, lag, process.
    for name in (
        "kafka_server_brokertopicmetrics_bytesin_total",
        "kafka_server_brokertopicmetrics_bytesout_total",
        "kafka_network_requestmetrics_requests_total",
        "kafka_network_requestmetrics_totaltimems",
        "kafka_log_log_size",
        "kafka_log_log_logendoffset",
        "kafka_consumergroup_lag",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ):
        assert name in wanted, f"the dashboard does not chart {name}"


# ------------------------------------------------------------ metrics.host


def _refused(port: int, host: str) -> bool:
    try:
        _scrape(port, host)
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)
    return False


def test_metrics_listen_where_metrics_host_says(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    # All of 127.0.0.0/8 is this machine: two addresses tell where a socket is bound.
    default_port = free_port()
    make_broker(**{"metrics.port": str(default_port)})
    assert "kafka_brokers" in _scrape(default_port, "127.0.0.1")
    assert _refused(default_port, "127.0.0.2")

    chosen_port = free_port()
    make_broker(**{"metrics.port": str(chosen_port), "metrics.host": "127.0.0.2"})
    assert "kafka_brokers" in _scrape(chosen_port, "127.0.0.2")
    assert _refused(chosen_port, "127.0.0.1")

    everywhere_port = free_port()
    make_broker(**{"metrics.port": str(everywhere_port), "metrics.host": "0.0.0.0"})
    assert "kafka_brokers" in _scrape(everywhere_port, "127.0.0.1")
    assert "kafka_brokers" in _scrape(everywhere_port, "127.0.0.2")


def test_a_scrape_shortens_the_switch_interval_only_while_it_runs() -> None:
    seen: list[float] = []

    class Probe(Collector):
        def collect(self) -> Iterator[Metric]:
            seen.append(sys.getswitchinterval())
            yield GaugeMetricFamily("probe", "The interval seen while collecting.", value=1)

    before = sys.getswitchinterval()
    registry = _ScrapeRegistry(auto_describe=False)
    registry.register(Probe())
    assert b"probe 1.0" in generate_latest(registry)
    assert seen == [pytest.approx(SCRAPE_SWITCH_INTERVAL)]
    assert sys.getswitchinterval() == before


def test_the_key_index_gauge_falls_to_zero_once_the_indexer_caught_up(tmp_path: Path) -> None:
    from confluent_kafka.admin import NewTopic

    metrics_port = free_port()
    broker = BrokerProcess(tmp_path / "data", {"metrics.port": str(metrics_port)})
    broker.start()
    topic = f"keyed-{os.getpid()}"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(topic, 1, 1, config={"key.index.enable": "true"})])
        futures[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(50):
            producer.produce(topic, key=b"k%d" % (i % 5), value=b"v%d" % i)
        assert producer.flush(30) == 0
        name = "kafka_log_log_keyindexremainingbytes"
        deadline = time.monotonic() + 60
        while True:
            page = _scrape(metrics_port)
            left = _samples(page).get((name, frozenset({("topic", topic), ("partition", "0")})))
            if left == 0:
                break
            assert time.monotonic() < deadline, "the key index never caught up"
            time.sleep(0.1)
        assert _value(page, "kafka_log_log_size", topic=topic, partition="0") > 0
    finally:
        assert broker.stop() == 0
