"""A key's records over a topic's partitions, whichever node leads each.

Each partition is searched by its leader, asked the question
:data:`QUESTION` through :mod:`.partition_query` (only the leader knows its
partitions' last stable offset and open transactions, which a read_committed
lookup must stop at, and it holds its active segment's key index in memory);
the answers are merged here.

One partition is searched by :func:`find_in_partition`, the one place that
asks storage (:meth:`LogDir.find <seglog.storage.log_dir.LogDir.find>`, through
the partition's key index; a topic without one is refused, not scanned).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from seglog.broker.http_api import partition_query
from seglog.broker.nodes.cluster import Cluster
from seglog.storage.key_search import FoundRecord
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_list import TopicInfo

QUESTION = "find_key"
"""The partition question of a lookup (see :mod:`.partition_query`)."""


@dataclass(frozen=True)
class KeyQuery:
    """What to find: a key's newest record, or its records newest first up to ``limit``."""

    key: bytes
    limit: int | None = 1
    """None: every record."""
    from_ms: int | None = None
    to_ms: int | None = None
    read_committed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The query as JSON values (for the control channel)."""
        values = asdict(self)
        values["key"] = base64.b64encode(self.key).decode()
        return values

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyQuery:
        """The inverse of :meth:`to_json`."""
        return cls(
            key=base64.b64decode(data["key"]),
            limit=data["limit"],
            from_ms=data["from_ms"],
            to_ms=data["to_ms"],
            read_committed=bool(data["read_committed"]),
        )


def find_in_partition(
    log_dir: LogDir, topic: str, partition: int, query: KeyQuery
) -> list[FoundRecord]:
    """The key's records in one partition this process leads, newest first (blocking).

    KeyIndexDisabledError when the topic keeps no key index.
    """
    return log_dir.find(
        topic,
        query.key,
        partition=partition,
        limit=query.limit,
        from_ms=query.from_ms,
        to_ms=query.to_ms,
        isolation="read_committed" if query.read_committed else "read_uncommitted",
    )


def merge(
    parts: Sequence[Sequence[FoundRecord]], limit: int | None, *, whole_topic: bool
) -> list[FoundRecord]:
    """Partitions' answers as one, up to ``limit``.

    One partition asked for: its own order, newest by offset. A whole topic:
    newest first by timestamp, then offset, as ``LogDir.find`` orders it.
    """
    found = [record for part in parts for record in part]
    if whole_topic:
        found.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
    return found if limit is None else found[:limit]


def record_to_json(record: FoundRecord) -> dict[str, Any]:
    """A found record as JSON values, bytes in base64 (the control channel's form)."""
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": base64.b64encode(record.key).decode(),
        "value": None if record.value is None else base64.b64encode(record.value).decode(),
        "headers": [
            [name, None if value is None else base64.b64encode(value).decode()]
            for name, value in record.headers
        ],
        "producer_id": record.producer_id,
        "transactional": record.transactional,
        "partition": record.partition,
        "topic": record.topic,
    }


def record_from_json(data: dict[str, Any]) -> FoundRecord:
    """The inverse of :func:`record_to_json`."""
    value = data["value"]
    return FoundRecord(
        offset=int(data["offset"]),
        timestamp=int(data["timestamp"]),
        key=base64.b64decode(data["key"]),
        value=None if value is None else base64.b64decode(value),
        headers=tuple(
            (str(name), None if v is None else base64.b64decode(v)) for name, v in data["headers"]
        ),
        producer_id=int(data["producer_id"]),
        transactional=bool(data["transactional"]),
        partition=int(data["partition"]),
        topic=str(data["topic"]),
    )


def _answer(log_dir: LogDir, topic: str, partition: int, args: dict[str, Any]) -> list[FoundRecord]:
    """The leader's answer to :data:`QUESTION` for one partition."""
    return find_in_partition(log_dir, topic, partition, KeyQuery.from_json(args))


partition_query.register(
    QUESTION,
    _answer,
    to_json=lambda part: [record_to_json(r) for r in part],
    from_json=lambda part: [record_from_json(r) for r in part],
)


async def find(
    log_dir: LogDir,
    cluster: Cluster,
    info: TopicInfo,
    partitions: Sequence[int],
    query: KeyQuery,
    *,
    whole_topic: bool,
) -> list[FoundRecord]:
    """The key's records in ``partitions`` of ``info``, newest first, up to ``query.limit``.

    ControllerUnavailableError when a leader of one of them does not answer;
    the storage layer's errors as they are.
    """
    answers = await partition_query.ask(
        log_dir, cluster, info, partitions, QUESTION, query.to_json()
    )
    return merge(answers, query.limit, whole_topic=whole_topic)
