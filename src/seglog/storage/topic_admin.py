"""Topic administration: the interface the broker creates, grows, alters and deletes topics through.

A :class:`~seglog.storage.log_dir.LogDir` carries it out on disk (it is the
implementation a process alone in its directory uses). A process sharing the
directory with others may carry it out elsewhere (where the topic list is
written) behind the same interface; callers cannot tell the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from seglog.config import LogConfig
from seglog.storage.topic_list import TopicInfo

#: ``replicas(first, count)``: the replica assignment of partitions ``first`` to
#: ``first + count - 1`` of a topic being created or grown.
Replicas = Callable[[int, int], list[list[int]]]


class TopicAdministration(Protocol):
    """Create, grow, alter and delete topics (Kafka's CreateTopics, CreatePartitions, ...)."""

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> TopicInfo:
        """Create a topic; TopicExistsError, InvalidTopicError, InvalidPartitionsError, ..."""
        ...

    def create_partitions(self, name: str, total: int, *, replicas: Replicas | None = None) -> None:
        """Grow ``name`` to ``total`` partitions."""
        ...

    def alter_topic_config(
        self, name: str, set_configs: Mapping[str, object], delete_configs: Sequence[str] = ()
    ) -> LogConfig:
        """Set and remove topic-level overrides; the resolved config."""
        ...

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its files."""
        ...
