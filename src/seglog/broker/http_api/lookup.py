"""A key's records over a topic's partitions, whichever node leads each.

Alone, a broker searches its own partitions. One node of several searches
the partitions it leads and asks each other leader for its own, over the
nodes' control channel (op ``find_key``), then merges the answers. Asking the
leader rather than reading its files in place: only the leader knows its
partitions' high watermark, last stable offset and open transactions (what a
read_committed lookup must stop at), and it holds its active segment's key
index in memory, where a reader in place would rebuild it from the log for
every request.

One partition is searched by :func:`find_in_partition`, the one place that
asks storage (:meth:`LogDir.find <seglog.storage.log_dir.LogDir.find>`, through
the partition's key index; a topic without one is refused, not scanned).

Storage calls block (file reads, an index caught up), so they run in worker
threads, never on the event loop; the leader serves ``find_key`` on its
channel's threads.
"""

from __future__ import annotations

import asyncio
import base64
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from seglog.broker.nodes.cluster import Cluster
from seglog.storage.key_search import FoundRecord
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_list import TopicInfo

FIND_OP = "find_key"
"""The control-channel op a node serves for the partitions it leads."""
PEER_TIMEOUT = 30.0
"""How long a node waits for another node's part of a lookup."""


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


def find_local(
    log_dir: LogDir, topic: str, partitions: Iterable[int], query: KeyQuery
) -> list[list[FoundRecord]]:
    """Each partition's records, newest first (blocking)."""
    return [find_in_partition(log_dir, topic, p, query) for p in partitions]


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


def serve_find(log_dir: LogDir, request: dict[str, Any]) -> dict[str, Any]:
    """The leader's side of ``find_key``: its partitions' answers (on a channel thread)."""
    query = KeyQuery.from_json(request["query"])
    parts = find_local(
        log_dir, str(request["topic"]), [int(p) for p in request["partitions"]], query
    )
    return {"ok": True, "parts": [[record_to_json(r) for r in part] for part in parts]}


def _ask(
    cluster: Cluster, node_id: int, topic: str, partitions: list[int], query: KeyQuery
) -> list[list[FoundRecord]]:
    request = {
        "op": FIND_OP,
        "topic": topic,
        "partitions": partitions,
        "query": query.to_json(),
    }
    answer = cluster.control(node_id, request, PEER_TIMEOUT)
    return [[record_from_json(r) for r in part] for part in answer["parts"]]


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
    by_leader: defaultdict[int, list[int]] = defaultdict(list)
    for partition in partitions:
        by_leader[cluster.leader(info, partition)].append(partition)
    calls = []
    for node_id, mine in sorted(by_leader.items()):
        if node_id == cluster.node_id:
            calls.append(asyncio.to_thread(find_local, log_dir, info.name, mine, query))
        else:
            calls.append(asyncio.to_thread(_ask, cluster, node_id, info.name, mine, query))
    answers = await asyncio.gather(*calls)
    parts = [part for answer in answers for part in answer]
    return merge(parts, query.limit, whole_topic=whole_topic)
