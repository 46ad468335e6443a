"""Mirror topics and consumer group positions to a Kafka-protocol cluster.

The move past one machine: :class:`Mirror` copies every record of the chosen
topics from a :class:`LogDirSource` (a log directory, read in place) or a
:class:`BrokerSource` (a running broker) into a :class:`Target` cluster, in
order and into the same partitions, resuming where the target stands after a
crash, and translates committed group offsets through an :class:`OffsetMap`.
``seglog mirror`` is the command over it.

Layering: like ``spark``, this package reads a cluster through a topic
source (:mod:`seglog.topic_source`: a log directory's files, or a broker
through confluent-kafka), writes to the target through confluent-kafka, and
never imports ``broker``.
"""

from __future__ import annotations

from seglog.mirror.copier import InexactTranslation, LagRow, Mirror, MirrorReport, Observer
from seglog.mirror.offset_map import OffsetMap, PartitionMap, Translation
from seglog.mirror.source import BrokerSource, LogDirSource, Source, SourceTopic
from seglog.mirror.target import Target, producer_defaults

__all__ = [
    "BrokerSource",
    "InexactTranslation",
    "LagRow",
    "LogDirSource",
    "Mirror",
    "MirrorReport",
    "Observer",
    "OffsetMap",
    "PartitionMap",
    "Source",
    "SourceTopic",
    "Target",
    "Translation",
    "producer_defaults",
]
