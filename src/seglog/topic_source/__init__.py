"""A topic read from a log directory's files or from a broker over the Kafka protocol.

This package owns what Spark's data source and the mirror both need of the
cluster they read: the partitions of the topics, their earliest, latest and
last stable offsets, the offsets for a timestamp, the records of an offset
range read as a consumer of either isolation level reads them (aborted
transactions skipped, control batches dropped, a read_committed read stopped
at the last stable offset), and the offsets consumer groups have committed
(on a log directory, the replay of ``__consumer_offsets``).

One interface, :class:`TopicSource` (:mod:`seglog.topic_source.base`), and two
implementations: :class:`~seglog.topic_source.files.FilesTopicSource` reads a
log directory in place through :mod:`seglog.storage.reader`;
:class:`~seglog.topic_source.broker.BrokerTopicSource` asks any Kafka-protocol
broker through confluent-kafka. Their modules are imported by name, so that
a reader of files never loads the Kafka client (and the interface's values,
such as :class:`TopicPartition`, can be used by pure modules).

Layering: below ``spark`` and ``mirror``, which import it; it reads files only
through ``storage``, records through ``records``, the record layout of
``__consumer_offsets`` from ``coordinator.offset_store``, and never imports
``broker`` (a broker is reached over the network, like any Kafka cluster).
It knows nothing of Spark (no Arrow, no options) or of copying.
"""

from __future__ import annotations

from seglog.topic_source.base import (
    Chunk,
    HeaderPairs,
    LostCallback,
    Rows,
    StoredBatch,
    TopicInfo,
    TopicPartition,
    TopicSource,
    UnknownPartitionError,
)

__all__ = [
    "Chunk",
    "HeaderPairs",
    "LostCallback",
    "Rows",
    "StoredBatch",
    "TopicInfo",
    "TopicPartition",
    "TopicSource",
    "UnknownPartitionError",
]
