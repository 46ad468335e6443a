"""Share groups on ``/metrics``: what happens to records, per group and partition.

Kafka counts acknowledgements broker-wide by type
(``kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=…``,
served under the JMX exporter's name); seglog adds, per share group and
partition, the records acquired, acknowledged, released, rejected, archived
and redelivered, the in-flight records by state, the share-partition start
offset and the lag (records not yet acknowledged or archived), and the open
share sessions. Read from copies made in one step each, as the other
collectors do (see :mod:`seglog.broker.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from seglog.broker.share.service import ShareService
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

EVENTS = ("acquired", "acknowledged", "released", "rejected", "archived", "redelivered")
_ACK_TYPES = (("accept", "acknowledged"), ("release", "released"), ("reject", "rejected"))


class ShareGroupCollector(Collector):
    """Share-partitions' counters and in-flight records of one broker."""

    def __init__(self, shares: ShareService, log_dir: LogDir) -> None:
        self._shares = shares
        self._log_dir = log_dir

    def collect(self) -> Iterator[Metric]:
        """The families, from copies of each share-partition's figures."""
        acks = CounterMetricFamily(
            "kafka_server_sharegroupmetrics_recordacknowledgements",
            "Records acknowledged by share group members, by acknowledgement type",
            labels=["acktype"],
        )
        records = CounterMetricFamily(
            "kafka_sharegroup_records",
            "Records of a share-partition by what happened to them",
            labels=["group", "topic", "partition", "event"],
        )
        in_flight = GaugeMetricFamily(
            "kafka_sharegroup_inflight_records",
            "In-flight records of a share-partition by state",
            labels=["group", "topic", "partition", "state"],
        )
        start = GaugeMetricFamily(
            "kafka_sharegroup_start_offset",
            "The share-partition start offset: every record below it is done",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kafka_sharegroup_lag",
            "Records of the partition the share group has not acknowledged or archived yet",
            labels=["group", "topic", "partition"],
        )
        retired = self._shares.partitions.retired_counters
        totals = {event: retired.get(event, 0) for event in EVENTS}
        for share_partition in list(self._shares.partitions.partitions()):
            try:
                counters = dict(share_partition.counters)
                summary = share_partition.summary()
                log = self._log_dir.log(share_partition.topic, share_partition.key.partition)
                high_watermark = log.high_watermark
            except Exception:  # changed by the loop meanwhile, or deleted: next scrape
                continue
            labels = [
                share_partition.key.group_id,
                share_partition.topic,
                str(share_partition.key.partition),
            ]
            for event in EVENTS:
                value = counters.get(event, 0)
                totals[event] += value
                records.add_metric([*labels, event], value)
            for state in ("acquired", "available", "acknowledged", "archived"):
                in_flight.add_metric([*labels, state], getattr(summary, state))
            start.add_metric(labels, summary.start_offset)
            done = summary.acknowledged + summary.archived
            lag.add_metric(labels, max(high_watermark - summary.start_offset - done, 0))
        for ack_type, event in _ACK_TYPES:
            acks.add_metric([ack_type], totals[event])
        yield acks
        yield records
        yield in_flight
        yield start
        yield lag
        yield GaugeMetricFamily(
            "kafka_server_share_sessions",
            "Open share sessions (ShareFetch) on this broker",
            value=len(self._shares.sessions),
        )
