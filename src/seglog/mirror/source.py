"""Where a mirror reads from: a log directory on this machine, or a running broker.

Both are topic sources (:mod:`seglog.topic_source`), opened as a mirror
needs them: read_committed, as a consumer of the copied topics would read
them. A partition ends at its last stable offset (the undecided data of an
open transaction waits for its marker), the records of aborted transactions
are left out, and control batches (transaction markers) are never records:
their offsets are gaps in what a source yields, like the offsets compaction
removed. Committed offsets of a log directory count those of a transaction
only once it committed, as the group coordinator does.

:class:`LogDirSource` reads the files read-only (the directory may belong to
a running broker, seglog's or Kafka's); :class:`BrokerSource` asks any
Kafka-protocol broker through confluent-kafka (librdkafka's default
``isolation.level`` is read_committed), without joining a consumer group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seglog.storage.filenames import is_internal
from seglog.topic_source import TopicInfo, TopicSource
from seglog.topic_source.broker import BrokerTopicSource, Timeout
from seglog.topic_source.files import FilesTopicSource

__all__ = [
    "BrokerSource",
    "LogDirSource",
    "Source",
    "SourceTopic",
    "is_internal",
]

Source = TopicSource
"""What a mirror needs of the cluster it copies from."""

SourceTopic = TopicInfo
"""A topic to mirror: its partition count and its topic-level config overrides."""

# The command-line option that sets the mirror's time limits, named when one runs out.
_TIMEOUT_SETTING = "--timeout"


class LogDirSource(FilesTopicSource):
    """A log directory read in place, read-only, as a read_committed consumer reads it."""

    def __init__(self, root: str | Path) -> None:
        super().__init__(root, read_committed=True)


class BrokerSource(BrokerTopicSource):
    """Any Kafka-protocol broker, read with confluent-kafka (no consumer group)."""

    def __init__(self, config: dict[str, Any], timeout: float = 30.0) -> None:
        limit = Timeout(timeout, _TIMEOUT_SETTING)
        consumer = {
            **config,
            "group.id": "seglog-mirror-source",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        super().__init__(config, consumer, lookup_timeout=limit, read_timeout=limit)
        self.timeout = timeout
        # Made now, so that a bad setting is reported when the source is opened.
        _ = self.admin, self.consumer
