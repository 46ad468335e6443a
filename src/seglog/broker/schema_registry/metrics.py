"""The schema registry's metrics on the broker's ``/metrics`` (when the registry is served).

Named as the JMX exporter names Confluent Schema Registry's MBeans where the
meaning is the same (``kafka.schema.registry:type=registered-count``,
``type=master-slave-role``), so its dashboards find them; the rest are seglog's
own. Figures are the registry's state as this broker last read it (a node that
is not the writer reads ``_schemas`` when it answers a request).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from seglog.broker.schema_registry.store import RegistryStore

__all__ = ["RegistryCollector"]


class RegistryCollector(Collector):
    """Versions, subjects and the writer's role of one broker's registry."""

    def __init__(self, store: RegistryStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        """The families, from one consistent look at the state."""
        figures = self._store.figures()
        yield GaugeMetricFamily(
            "kafka_schema_registry_registered_count",
            "Schema versions registered and not deleted",
            value=sum(n for (_, deleted), n in figures.versions.items() if not deleted),
        )
        yield GaugeMetricFamily(
            "kafka_schema_registry_master_slave_role",
            "1 on the broker (node) that writes the registry's changes, else 0",
            value=1 if figures.writer else 0,
        )
        versions = GaugeMetricFamily(
            "kafka_schema_registry_versions",
            "Schema versions by type, live or soft-deleted",
            labels=["schema_type", "state"],
        )
        for (schema_type, deleted), count in sorted(figures.versions.items()):
            versions.add_metric([schema_type, "deleted" if deleted else "live"], count)
        yield versions
        yield GaugeMetricFamily(
            "kafka_schema_registry_subjects",
            "Subjects with a live version",
            value=figures.subjects,
        )
