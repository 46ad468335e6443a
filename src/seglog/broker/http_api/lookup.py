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
asks storage. Until the live engine offers lookups by key it reads the
partition as a consumer from the log start would (:func:`scan_partition`).

Storage calls block (file reads, an index caught up), so they run in worker
threads, never on the event loop; the leader serves ``find_key`` on its
channel's threads.
"""

from __future__ import annotations

import asyncio
import base64
import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from seglog.broker.nodes.cluster import Cluster
from seglog.records import batch
from seglog.records.record import decode_entry
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
    """The key's records in one partition this process leads, newest first (blocking)."""
    return scan_partition(log_dir, topic, partition, query)


SCAN_CHUNK = 1 << 20
"""Bytes of batches read at a time by :func:`scan_partition`."""


def scan_partition(
    log_dir: LogDir, topic: str, partition: int, query: KeyQuery
) -> list[FoundRecord]:
    """The key's records found by reading the whole partition, oldest to newest (blocking).

    What a consumer from the log start would see: up to the high watermark, or
    for read_committed up to the last stable offset without the batches of
    aborted transactions; control batches skipped.
    """
    log = log_dir.log(topic, partition)
    env = log_dir.env
    start = log.log_start_offset
    end = log.last_stable_offset if query.read_committed else log.high_watermark
    aborted: dict[int, list[tuple[int, int]]] = {}
    if query.read_committed:
        for txn in log.aborted_transactions(start, end):
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    found: list[FoundRecord] = []
    position = start
    while position < end:
        result = log.read(position, SCAN_CHUNK, max_offset=end)
        if result.data is None:
            break
        region = result.data.region
        view = memoryview(env.pread(region.fd, region.length, region.position, name=region.path))
        at = 0
        before = position
        while at + batch.LOG_OVERHEAD <= len(view):
            _, size = batch.peek_offset_and_size(view, at)
            if at + size > len(view):
                break  # a batch cut by the chunk: read again from its start
            entry = view[at : at + size]
            at += size
            skip = False
            if batch.peek_magic(entry) == batch.CURRENT_MAGIC:
                header = batch.read_header(entry)
                position = max(position, header.last_offset + 1)
                skip = header.is_control or (
                    header.is_transactional
                    and any(
                        first <= header.base_offset <= last
                        for first, last in aborted.get(header.producer_id, ())
                    )
                )
                producer_id, transactional = header.producer_id, header.is_transactional
            else:
                producer_id, transactional = -1, False
            if skip:
                continue
            for record in decode_entry(entry):
                position = max(position, record.offset + 1)
                if not before <= record.offset < end or record.key != query.key:
                    continue
                if (query.from_ms is not None and record.timestamp < query.from_ms) or (
                    query.to_ms is not None and record.timestamp > query.to_ms
                ):
                    continue
                found.append(
                    FoundRecord(
                        record.offset,
                        record.timestamp,
                        query.key,
                        record.value,
                        tuple((h.key, h.value) for h in record.headers),
                        producer_id,
                        transactional,
                        partition,
                        topic,
                    )
                )
        if position == before:
            break  # nothing whole was read: the log changed under the reader
    found.reverse()
    return found if query.limit is None else found[: query.limit]


def find_local(
    log_dir: LogDir, topic: str, partitions: Iterable[int], query: KeyQuery
) -> list[list[FoundRecord]]:
    """Each partition's records, newest first (blocking)."""
    return [find_in_partition(log_dir, topic, p, query) for p in partitions]


def merge(parts: Sequence[Sequence[FoundRecord]], limit: int | None) -> list[FoundRecord]:
    """Partitions' answers as one, newest first by timestamp, then offset, up to ``limit``.

    Each part keeps its own order (a partition's records newest by offset,
    whatever their timestamps): a merge, not a sort.
    """
    if len(parts) == 1:
        merged: Iterable[FoundRecord] = parts[0]
    else:
        merged = heapq.merge(*parts, key=lambda r: (-r.timestamp, -r.offset, r.partition))
    out: list[FoundRecord] = []
    for record in merged:
        if limit is not None and len(out) >= limit:
            break
        out.append(record)
    return out


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
    return merge(parts, query.limit)
