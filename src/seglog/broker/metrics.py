"""The ``/metrics`` page: Kafka's metrics under the names Prometheus users already chart.

Theory of operation
-------------------
Nothing here runs on the request path. The event loop keeps a few counters
(:class:`~seglog.broker.state.Metrics`: requests, their times, bytes and
records in and out, connections); everything else (partition sizes and
offsets, consumer groups' committed offsets and lag) is read from the
broker's state when Prometheus scrapes, by the collectors below, so a scrape
costs one pass over the partitions and the groups' committed offsets and
never a pass over records.

Names. Kafka's own broker metrics are JMX MBeans; Prometheus users see them
through the JMX exporter with the usual Kafka rules (``lowercaseOutputName``,
``…PerSec`` meters' ``Count`` as ``kafka_<domain>_<type>_<name>_total``,
gauges' ``Value`` as ``kafka_<domain>_<type>_<name>``, histograms as a summary
of quantiles 0.50 … 0.999 plus ``_count``). :class:`KafkaBrokerCollector`
serves those names, so dashboards built for Kafka brokers work unchanged.
Consumer-group lag and per-partition offsets are not broker MBeans; users
take them from kafka_exporter, whose names and labels
:class:`KafkaExporterCollector` serves (``kafka_consumergroup_lag`` …).
Process metrics are prometheus_client's own (``process_*``, ``python_*``).
Every family is listed in ``docs/metrics.md`` (a test keeps the two equal).

Threads. The page is served by prometheus_client's HTTP server thread (see
:func:`start_metrics_server`), not by an asyncio handler on the event loop:
a scrape of a broker with many partitions formats tens of thousands of lines
(half a second for 2,000 partitions), and a node waits for other nodes'
offsets over its control channel; on the loop either would stop every
client for that long, in a thread the loop keeps running. The thread still
shares the GIL with the loop, so while a scrape runs the switch interval is
shortened (:data:`SCRAPE_SWITCH_INTERVAL`).

The loop owns the state the collectors read, so they read it only through
copies made in one step each (``dict(...)``, ``list(...)``, which CPython
performs without running other threads in between) and through attributes
holding ints; they never iterate a container the loop may be changing.

Nodes. Under ``--nodes N`` each node serves its own page on ``metrics.port``
plus its index, like its listeners: its partitions, the groups it
coordinates, its own requests and process. Lag of a group that committed an
offset of a partition led by another node is computed with that node's high
watermark, asked over the control channel (a node that does not answer in
time leaves those partitions' lag out of that scrape).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.share.metrics import ShareGroupCollector
from seglog.broker.state import BrokerState, RequestTimes
from seglog.coordinator.group import DEAD
from seglog.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)

QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)
"""Kafka's histogram percentiles (50th … 999th) with the JMX exporter's quantile labels."""

SCRAPE_SWITCH_INTERVAL = 0.0002
"""Python's thread switch interval (s) while a scrape runs; 0.005 otherwise.

A scrape is pure Python and holds the GIL. With the default interval, each
time the event loop lets the GIL go (every socket call does) it waits up to
5 ms to get it back. Measured on 2 cores with 2,000 partitions and 20 groups
(a 0.5 s scrape), scraped back to back: requests per second fell from about
4,500 to 800 with 5 ms, to 1,400 with 0.2 ms (0.05 ms did no better). The
interval returns to what it was once no scrape runs.
"""

LATEST_TIMESTAMP = -1
"""ListOffsets' timestamp asking for the latest offset (the high watermark)."""
REMOTE_OFFSETS_TIMEOUT = 2.0
"""How long a scrape waits for another node's high watermarks (consumer lag)."""


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ascending ``ordered`` values (0.0 when there are none).

    Linear interpolation between the two values around rank ``q·(n+1)``,
    the rule of the histograms Kafka's JMX metrics come from.
    """
    n = len(ordered)
    if n == 0:
        return 0.0
    rank = q * (n + 1)
    if rank < 1:
        return ordered[0]
    if rank >= n:
        return ordered[-1]
    below = ordered[int(rank) - 1]
    above = ordered[int(rank)]
    return below + (rank - int(rank)) * (above - below)


def _summary(
    name: str, documentation: str, label: str, series: Iterable[tuple[str, RequestTimes]]
) -> Metric:
    """A summary family shaped as the JMX exporter shows a Kafka histogram."""
    family = Metric(name, documentation, "summary")
    for value, times in series:
        recent = sorted(list(times.recent))
        for quantile, q in QUANTILES:
            family.add_sample(name, {label: value, "quantile": quantile}, percentile(recent, q))
        family.add_sample(name + "_count", {label: value}, times.count)
        family.add_sample(name + "_sum", {label: value}, times.total_ms)
    return family


class KafkaBrokerCollector(Collector):
    """Kafka's broker metrics as the JMX exporter names them (see the module docs)."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        """The families, read from the broker's state now."""
        state = self._state
        metrics = state.metrics
        topics = state.log_dir.topics()
        per_topic = {name: c for name, c in dict(metrics.topics).items() if name in topics}

        def per_topic_counter(name: str, documentation: str, total: int, attr: str) -> Metric:
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic, counters in sorted(per_topic.items()):
                family.add_metric([topic], getattr(counters, attr))
            # The broker-wide meter has no topic tag; the exporter gives it no label.
            family.add_sample(name + "_total", {}, total)
            return family

        yield per_topic_counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by produce requests, per topic and in all.",
            metrics.messages_in,
            "messages_in",
        )
        yield per_topic_counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record bytes appended by produce requests, per topic and in all.",
            metrics.bytes_in,
            "bytes_in",
        )
        yield per_topic_counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent in fetch responses, per topic and in all.",
            metrics.bytes_out,
            "bytes_out",
        )
        yield per_topic_counter(
            "kafka_server_brokertopicmetrics_totalproducerequests",
            "Partition appends by produce requests, per topic and in all.",
            sum(c.produce_requests for c in per_topic.values()),
            "produce_requests",
        )
        yield per_topic_counter(
            "kafka_server_brokertopicmetrics_totalfetchrequests",
            "Fetch responses that carried records of the topic, per topic and in all.",
            sum(c.fetch_requests for c in per_topic.values()),
            "fetch_requests",
        )

        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API and version.",
            labels=["request", "version"],
        )
        for (api, version), count in sorted(dict(metrics.requests).items()):
            requests.add_metric([api, str(version)], count)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Requests by API and the error that ended them (NONE: answered).",
            labels=["request", "error"],
        )
        for (api, error), count in sorted(dict(metrics.errors).items()):
            errors.add_metric([api, error], count)
        yield errors
        yield _summary(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer in ms: recent quantiles, count, sum.",
            "request",
            sorted(dict(metrics.times).items()),
        )

        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections, by listener.",
            labels=["listener", "networkprocessor"],
        )
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation",
            "Client connections accepted, by listener.",
            labels=["listener", "networkprocessor"],
        )
        # One event loop serves every connection: Kafka's network processor 0.
        for listener in state.settings.listeners:
            name = listener.name
            connections.add_metric([name, "0"], metrics.connections.get(name, 0))
            created.add_metric([name, "0"], metrics.connections_created.get(name, 0))
        yield connections
        yield created
        failed = CounterMetricFamily(
            "kafka_server_socket_server_metrics_failed_authentication",
            "Failed authentications, by listener and the principal the client claimed.",
            labels=["listener", "principal"],
        )
        for (listener_name, principal), count in sorted(
            state.authentication_failures.counts().items()
        ):
            failed.add_metric([listener_name, principal], count)
        yield failed
        yield from _fetch_purgatory(state)

        logs = sorted(state.log_dir.logs().items())
        size = GaugeMetricFamily(
            "kafka_log_log_size",
            "Bytes of the partition's segments.",
            labels=["topic", "partition"],
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset",
            "The partition's log start offset.",
            labels=["topic", "partition"],
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset",
            "The partition's log end offset.",
            labels=["topic", "partition"],
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments",
            "Segments of the partition.",
            labels=["topic", "partition"],
        )
        key_index_left = GaugeMetricFamily(
            "kafka_log_log_keyindexremainingbytes",
            "seglog's: bytes of the partition's segments its key index does not cover yet.",
            labels=["topic", "partition"],
        )
        served = 0
        for (topic, partition), log in logs:
            if log.closed:
                continue
            served += 1
            labels = [topic, str(partition)]
            size.add_metric(labels, log.size)
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.log_end_offset)
            segments.add_metric(labels, len(log.segments))
            if log.config.key_index_enable:
                # Sizes and counters only: no file is opened for a scrape.
                key_index_left.add_metric(labels, log.key_index_pending_bytes())
        yield from (size, start, end, segments, key_index_left)

        offline = len(state.log_dir.offline())
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions this broker holds.",
            value=served,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads (every partition it holds).",
            value=served,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions with fewer in-sync replicas than replicas: 0, each has one replica.",
            value=0,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_offlinereplicacount",
            "Partitions that could not be opened (storage errors).",
            value=offline,
        )
        cluster = state.cluster
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the controller, 0 on the other nodes.",
            value=1 if cluster.is_controller else 0,
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster.",
            value=len(topics),
        )
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster.",
            value=sum(info.partitions for info in topics.values()),
        )


def _fetch_purgatory(state: BrokerState) -> Iterator[Metric]:
    """The fetches waiting for data (:mod:`seglog.broker.delayed_fetch`), as Kafka's purgatory."""
    purgatory = state.fetch_purgatory
    label = ["delayedoperation"]
    size = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Waiting fetches on the partitions' watch lists, once per partition each reads.",
        labels=label,
    )
    size.add_metric(["Fetch"], purgatory.watched)
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Fetches waiting for data.",
        labels=label,
    )
    delayed.add_metric(["Fetch"], purgatory.delayed)
    yield size
    yield delayed
    for name, documentation, value in (
        ("expires", "Fetches answered at max_wait_ms without min_bytes.", purgatory.expired),
        ("checks", "Waiting fetches checked after a change to a partition.", purgatory.checks),
        ("wakeups", "Waiting fetches woken to read again.", purgatory.wakeups),
    ):
        family = CounterMetricFamily(
            f"kafka_server_delayedfetchmetrics_{name}", documentation, labels=["fetchertype"]
        )
        family.add_metric(["consumer"], value)
        yield family


class KafkaExporterCollector(Collector):
    """Topic offsets and consumer groups under kafka_exporter's names and labels."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        """The families, read from the broker's state now."""
        state = self._state
        cluster = state.cluster
        node_id = cluster.node_id
        alive = sum(1 for n in cluster.node_ids() if cluster.alive(n))
        yield GaugeMetricFamily(
            "kafka_brokers", "Number of Brokers in the Kafka Cluster.", value=alive
        )
        info = GaugeMetricFamily(
            "kafka_broker_info",
            "Information about the Kafka Broker (this node).",
            labels=["address", "id"],
        )
        listener = (state.settings.advertised_listeners or state.settings.listeners)[0]
        # kafka_exporter's value is the broker's id too.
        info.add_metric([f"{listener.host}:{listener.port}", str(node_id)], node_id)
        yield info

        topics = state.log_dir.topics()
        partitions = GaugeMetricFamily(
            "kafka_topic_partitions", "Number of partitions for this Topic.", labels=["topic"]
        )
        for name, described in sorted(topics.items()):
            partitions.add_metric([name], described.partitions)
        yield partitions

        labels = ["topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition (the high watermark).",
            labels=labels,
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition (the log start offset).",
            labels=labels,
        )
        leader = GaugeMetricFamily(
            "kafka_topic_partition_leader",
            "Leader Broker ID of this Topic/Partition.",
            labels=labels,
        )
        replicas = GaugeMetricFamily(
            "kafka_topic_partition_replicas",
            "Number of Replicas for this Topic/Partition.",
            labels=labels,
        )
        in_sync = GaugeMetricFamily(
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition.",
            labels=labels,
        )
        preferred = GaugeMetricFamily(
            "kafka_topic_partition_leader_is_preferred",
            "1 if Topic/Partition is using the Preferred Broker.",
            labels=labels,
        )
        under = GaugeMetricFamily(
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated.",
            labels=labels,
        )
        high_watermarks: dict[tuple[str, int], int] = {}
        for (topic, partition), log in sorted(state.log_dir.logs().items()):
            if log.closed:
                continue
            high_watermarks[(topic, partition)] = log.high_watermark
            pair = [topic, str(partition)]
            current.add_metric(pair, log.high_watermark)
            oldest.add_metric(pair, log.log_start_offset)
            leader.add_metric(pair, node_id)
            replicas.add_metric(pair, 1)
            in_sync.add_metric(pair, 1)
            preferred.add_metric(pair, 1)
            under.add_metric(pair, 0)
        yield from (current, oldest, leader, replicas, in_sync, preferred, under)
        yield from self._groups(high_watermarks)

    def _groups(self, high_watermarks: dict[tuple[str, int], int]) -> Iterator[Metric]:
        """Committed offsets, lag and members of the groups this broker coordinates."""
        coordinator = self._state.coordinator
        group_labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Current Offset of a ConsumerGroup at Topic/Partition.",
            labels=group_labels,
        )
        current_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions.",
            labels=["consumergroup", "topic"],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current Approximate Lag of a ConsumerGroup at Topic/Partition.",
            labels=group_labels,
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions.",
            labels=["consumergroup", "topic"],
        )
        members = GaugeMetricFamily(
            "kafka_consumergroup_members",
            "Amount of members in a consumer group.",
            labels=["consumergroup"],
        )
        committed: dict[str, dict[tuple[str, int], int]] = {}
        groups = dict(coordinator.groups)
        consumer_groups = dict(coordinator.consumer_groups)
        for group_id in sorted(set(groups) | set(consumer_groups)):
            group = groups.get(group_id)
            if group is not None and group.is_in(DEAD) and group_id not in consumer_groups:
                continue  # deleted, or its offsets expired: gone, as ListGroups has it
            stored = {} if group is None else dict(group.offsets)
            committed[group_id] = {key: c.offset for key, c in stored.items()}
            modern = consumer_groups.get(group_id)
            count = len(modern.members) if modern is not None else 0
            if group is not None:
                count += len(group.members)
            members.add_metric([group_id], count)
        missing = {
            key for offsets in committed.values() for key in offsets if key not in high_watermarks
        }
        if missing:
            high_watermarks = {**high_watermarks, **self._remote_high_watermarks(missing)}
        for group_id, offsets in committed.items():
            sums: defaultdict[str, int] = defaultdict(int)
            lags: defaultdict[str, int] = defaultdict(int)
            for (topic, partition), offset in sorted(offsets.items()):
                pair = [group_id, topic, str(partition)]
                current.add_metric(pair, offset)
                sums[topic] += offset
                end = high_watermarks.get((topic, partition))
                if end is not None:
                    behind = max(end - offset, 0)
                    lag.add_metric(pair, behind)
                    lags[topic] += behind
            for topic, total in sums.items():
                current_sum.add_metric([group_id, topic], total)
            for topic, total in lags.items():
                lag_sum.add_metric([group_id, topic], total)
        yield from (current, current_sum, lag, lag_sum, members)

    def _remote_high_watermarks(self, keys: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Other nodes' high watermarks of ``keys`` (none from a silent node).

        Asked as a consumer asks, with ListOffsets for the latest offsets, on
        the nodes' Kafka listener; the scrape runs on its own thread, so each
        node's answer is awaited on a loop of that thread.
        """
        state = self._state
        cluster = state.cluster
        by_node: defaultdict[int, defaultdict[str, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for topic, partition in keys:
            info = state.log_dir.topic(topic)
            if info is None or partition >= info.partitions:
                continue  # a deleted topic's offsets: kafka_exporter shows no lag either
            leader = cluster.leader(info, partition)
            if leader != cluster.node_id:
                by_node[leader][topic].append(partition)
        found: dict[tuple[str, int], int] = {}
        for node, wanted in by_node.items():
            request = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "timestamp": LATEST_TIMESTAMP} for p in parts
                        ],
                    }
                    for topic, parts in wanted.items()
                ],
            }
            try:
                answer = asyncio.run(
                    cluster.call(node, ApiKey.LIST_OFFSETS, 5, request, REMOTE_OFFSETS_TIMEOUT)
                )
            except ControllerUnavailableError as exc:
                logger.debug("no high watermarks from node %d for /metrics: %s", node, exc)
                continue
            for topic_answer in answer["topics"]:
                for entry in topic_answer["partitions"]:
                    if entry["error_code"] == 0:
                        found[(topic_answer["name"], entry["partition_index"])] = entry["offset"]
        return found


class _SwitchSooner:
    """Shortens the switch interval while at least one scrape runs (see SCRAPE_SWITCH_INTERVAL)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved = sys.getswitchinterval()

    def enter(self) -> None:
        with self._lock:
            if self._running == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(SCRAPE_SWITCH_INTERVAL)
            self._running += 1

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                sys.setswitchinterval(self._saved)


_SWITCH = _SwitchSooner()


class _ScrapeRegistry(CollectorRegistry):
    """A registry whose scrapes let the event loop have the GIL back sooner."""

    def collect(self) -> Iterator[Metric]:
        """Every collector's families; the page is formatted as they come."""
        _SWITCH.enter()
        try:
            # The text of each family is made between two of these steps: the
            # interval stays short until the last family is formatted.
            yield from super().collect()
        finally:
            _SWITCH.leave()


def registry_for(state: BrokerState, extra: Sequence[Collector] = ()) -> CollectorRegistry:
    """A registry of the broker's collectors, ``extra`` ones (the schema registry's) and
    this process's own metrics.

    Not prometheus_client's default registry: each broker has its own, so that
    several brokers in one process (tests do that) do not mix their metrics.
    """
    registry = _ScrapeRegistry(auto_describe=False)
    registry.register(KafkaBrokerCollector(state))
    registry.register(KafkaExporterCollector(state))
    if state.shares is not None:
        registry.register(ShareGroupCollector(state.shares, state.log_dir))
    for collector in extra:
        registry.register(collector)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class MetricsServer:
    """``/metrics`` served by prometheus_client's HTTP server in its own thread."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        """The port it listens on (useful when configured as 0)."""
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_metrics_server(
    state: BrokerState, host: str, port: int, extra: Sequence[Collector] = ()
) -> MetricsServer:
    """Serve ``state``'s metrics (and ``extra`` collectors') on ``host``:``port`` ("" or
    0.0.0.0: every interface)."""
    registry = registry_for(state, extra)
    server, thread = start_http_server(port, addr=host or "0.0.0.0", registry=registry)
    return MetricsServer(server, thread)
