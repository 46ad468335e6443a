"""``seglog-topics.json``: each topic's id, partition count, overrides and replicas.

Kafka keeps topic definitions in its metadata log; one machine needs only this
small JSON file, written atomically (a temporary file, fsync, rename).

A topic change that makes or removes partition directories is on record
before its first file is touched, so that a crash in the middle is finished
or taken back at the next start, never guessed from the directories found:

- a creation (CreateTopics, CreatePartitions) is written first with
  ``creating_from``, the partition count before it (0 for a new topic). At
  start, the partitions from there on are removed and the topic is what it
  was before: the client was never told the creation succeeded, and retrying
  it succeeds.
- a deletion is written first with ``deleting``. At start, the topic's
  remaining directories are removed and the topic with them: the client may
  have been told it is gone, and it stays gone.

Readers that do not write the list (the other nodes sharing the directory)
see only :func:`committed` topics: a creation under way is not there yet, a
deletion under way is already gone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from seglog.errors import StorageError

TOPICS_FILE = "seglog-topics.json"


@dataclass
class TopicInfo:
    """A topic's definition: id, partition count and config overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str] = field(default_factory=dict)
    #: Kafka's replica assignment: the node ids of each partition (one each
    #: here, its leader), or None where none was recorded.
    replicas: list[list[int]] | None = None
    #: While a creation is under way: the partition count before it (0 for a
    #: new topic); ``partitions`` is then the count it is making.
    creating_from: int | None = None
    #: While a deletion is under way.
    deleting: bool = False

    def copy(self) -> TopicInfo:
        """A copy that shares nothing mutable with this one."""
        return TopicInfo(
            self.name,
            self.topic_id,
            self.partitions,
            dict(self.overrides),
            None if self.replicas is None else [list(r) for r in self.replicas],
            self.creating_from,
            self.deleting,
        )

    def replicas_of(self, partition: int) -> list[int] | None:
        """The recorded replicas of ``partition``, or None."""
        if self.replicas is None or partition >= len(self.replicas):
            return None
        return self.replicas[partition]

    @property
    def unfinished(self) -> bool:
        """Whether a creation or deletion of this topic is under way (or was cut short)."""
        return self.deleting or self.creating_from is not None

    def before_creation(self) -> TopicInfo | None:
        """The topic as it was before its unfinished creation: None for a new topic."""
        if self.creating_from is None:
            return self
        if self.creating_from == 0:
            return None
        before = self.copy()
        before.partitions = self.creating_from
        if before.replicas is not None:
            before.replicas = before.replicas[: self.creating_from]
        before.creating_from = None
        return before


def committed(topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
    """The topics as a reader should see them: creations under way not yet, deletions gone."""
    result: dict[str, TopicInfo] = {}
    for name, info in topics.items():
        if info.deleting:
            continue
        before = info.before_creation()
        if before is not None:
            result[name] = before
    return result


def encode(topics: Mapping[str, TopicInfo]) -> str:
    """The file's text."""
    payload = {
        "version": 1,
        "topics": {info.name: _spec(info) for info in sorted(topics.values(), key=_name)},
    }
    return json.dumps(payload, indent=2) + "\n"


def decode(data: bytes, source: object) -> dict[str, TopicInfo]:
    """Every topic the file records, unfinished ones included; StorageError if it is not one."""
    try:
        raw = json.loads(data.decode("utf-8"))
        return {name: _info(name, spec) for name, spec in raw["topics"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"{source} is not a valid topic list: {exc}") from exc


def _name(info: TopicInfo) -> str:
    return info.name


def _spec(info: TopicInfo) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "id": str(info.topic_id),
        "partitions": info.partitions,
        "configs": dict(info.overrides),
    }
    if info.replicas is not None:
        spec["replicas"] = info.replicas
    if info.creating_from is not None:
        spec["creating_from"] = info.creating_from
    if info.deleting:
        spec["deleting"] = True
    return spec


def _info(name: str, spec: Mapping[str, Any]) -> TopicInfo:
    replicas = spec.get("replicas")
    creating_from = spec.get("creating_from")
    return TopicInfo(
        name,
        uuid.UUID(spec["id"]),
        int(spec["partitions"]),
        dict(spec["configs"]),
        None if replicas is None else [[int(node) for node in r] for r in replicas],
        None if creating_from is None else int(creating_from),
        bool(spec.get("deleting", False)),
    )


__all__ = ["TOPICS_FILE", "TopicInfo", "committed", "decode", "encode"]
