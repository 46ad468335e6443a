"""A raw Kafka connection for the share APIs: one socket, kept, as a share session needs."""

from __future__ import annotations

import socket
import struct
import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from seglog.protocol.api_keys import ApiKey
from seglog.protocol.headers import decode_response, encode_request
from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import create_topic, produce_numbered, set_group_configs


class RawClient:
    """Requests on one connection (a share session lives as long as its connection)."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=60)
        self._correlation = 0

    def request(self, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        """Send one request and read its answer."""
        self._correlation += 1
        self.sock.sendall(
            encode_request(api, version, self._correlation, "share-test", body, framed=True)
        )
        size = struct.unpack(">i", self._read(4))[0]
        correlation, answer = decode_response(api, version, self._read(size))
        assert correlation == self._correlation
        return answer

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        """Close the connection (its share sessions end with it)."""
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def topic_id(broker: BrokerProcess, topic: str) -> uuid.UUID:
    """The id of ``topic``."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=60)
    return uuid_of(description.topic_id)


def uuid_of(value: Any) -> uuid.UUID:
    """A confluent-kafka Uuid as a Python UUID (from its two 64-bit halves)."""
    high = value.get_most_significant_bits() & (2**64 - 1)
    low = value.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(high << 64) | low)


def share_fetch(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    partitions: list[tuple[uuid.UUID, int, list[dict[str, Any]]]],
    *,
    max_records: int = 500,
    max_wait_ms: int = 0,
    forgotten: list[tuple[uuid.UUID, int]] | None = None,
) -> Any:
    """ShareFetch v1 for ``partitions``: (topic id, partition, acknowledgement batches)."""
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for tid, index, acks in partitions:
        by_topic.setdefault(tid, []).append(
            {"partition_index": index, "acknowledgement_batches": acks}
        )
    body = {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": max_records,
        "batch_size": max_records,
        "topics": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()],
        "forgotten_topics_data": [{"topic_id": t, "partitions": [i]} for t, i in (forgotten or [])],
    }
    return client.request(ApiKey.SHARE_FETCH, 1, body)


def ack(first: int, last: int, *types: int) -> dict[str, Any]:
    """One acknowledgement batch."""
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def setup_group(broker: BrokerProcess, records: int = 10) -> tuple[str, uuid.UUID, str]:
    """A topic of ``records`` numbered records and a group reading it from the start:
    (topic, its id, group)."""
    topic = create_topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    produce_numbered(broker, topic, records)
    return topic, topic_id(broker, topic), group


def only_partition(answer: Any) -> dict[str, Any]:
    """The one partition entry of a ShareFetch answer without a top-level error."""
    assert answer["error_code"] == 0, answer
    [topic] = answer["responses"]
    [partition] = topic["partitions"]
    return partition  # type: ignore[no-any-return]


def acquired(answer: Any) -> list[tuple[int, int, int]]:
    """The acquired ranges of that entry: (first, last, delivery count)."""
    return [
        (r["first_offset"], r["last_offset"], r["delivery_count"])
        for r in only_partition(answer)["acquired_records"]
    ]
