"""Network mode: any Kafka-protocol broker, through the broker topic source.

What is read, and how (confluent-kafka by assignment, watermarks, offsets by
time, errors that name their cause), is the broker topic source's
(:mod:`seglog.topic_source.broker`); this module holds what is Spark's: the
consumer configured as Spark configures its own, and the commit of a
streaming query's offsets to a group (``commitOffsetsToGroup``).

The consumer: no auto commit, no auto offset reset (out-of-range reads are
data loss, not silent jumps), ``read_uncommitted``; every ``kafka.*`` option
is passed through to librdkafka, which knows most Java client names
(``security.protocol``, ``sasl.*``, ``ssl.*`` ...). A lookup waits for the
cluster as long as the Java client would (``kafka.default.api.timeout.ms`` or
``kafka.request.timeout.ms``, see :attr:`SourceOptions.broker_timeout_ms`), a
read for ``kafkaConsumer.pollTimeoutMs``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import confluent_kafka as ck

from seglog.spark.offsets import TopicPartition
from seglog.spark.options import SourceOptions
from seglog.spark.transport import TopicTransport
from seglog.topic_source.broker import BrokerTopicSource, ClusterUnreachableError, Timeout

__all__ = ["ClusterUnreachableError", "NetworkTransport", "consumer_config"]

_LOOKUP_SETTING = "kafka.default.api.timeout.ms / kafka.request.timeout.ms"
_READ_SETTING = "kafkaConsumer.pollTimeoutMs"


def consumer_config(options: SourceOptions) -> dict[str, Any]:
    """librdkafka settings for reading ``options``' partitions by assignment only."""
    config: dict[str, Any] = {
        "group.id": f"{options.group_id_prefix}-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "isolation.level": "read_uncommitted",
        "fetch.max.bytes": 52_428_800,
        "queued.max.messages.kbytes": 262_144,
        "allow.auto.create.topics": False,
    }
    config.update(options.kafka_params)
    return config


class NetworkTransport(TopicTransport):
    """Offsets and records through one confluent-kafka consumer, created on first use."""

    source: BrokerTopicSource

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        super().__init__(
            BrokerTopicSource(
                options.kafka_params,
                consumer_config(options),
                lookup_timeout=Timeout(options.broker_timeout_ms / 1000, _LOOKUP_SETTING),
                read_timeout=Timeout(options.poll_timeout_ms / 1000, _READ_SETTING),
            )
        )

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit for a group without members, so lag tools see a pipeline's progress."""
        if not offsets:
            return
        config = consumer_config(self.options)
        config["group.id"] = group
        committer = ck.Consumer(config)
        try:
            committer.commit(
                offsets=[
                    ck.TopicPartition(tp.topic, tp.partition, offset)
                    for tp, offset in sorted(offsets.items())
                ],
                asynchronous=False,
            )
        finally:
            committer.close()
