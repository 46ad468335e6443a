"""API keys, the registry of described APIs, and the versions the broker advertises.

Theory of operation
-------------------
:data:`REGISTRY` maps every API key seglog describes to an :class:`ApiInfo`:
request and response descriptions, the range of versions described (and
therefore encodable and decodable), and the first flexible version. It is
built from the tables in :mod:`seglog.protocol.messages` and is the single
source for version questions: header versions, ``decode_request``'s checks,
and the ApiVersions answer.

:data:`SUPPORTED` is the subset the broker serves today and advertises in
ApiVersions: for each API a range inside the described one (a test holds it
to that). The ranges are honest — every version in them is implemented — and
reach down to what clients probe before they enable features: Produce from 0
(librdkafka enables compression only when the advertised Produce range
reaches v0; v0-2 carry legacy message sets) and Fetch from 4. An API without
a handler is described but not advertised.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any, NamedTuple

from seglog.protocol.messages import ALL
from seglog.protocol.schema import Api, Message


class ApiKey(IntEnum):
    """Kafka's API keys (those seglog describes)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ENVELOPE = 58
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class ApiInfo(NamedTuple):
    """What the protocol layer knows of one API."""

    request: Message
    response: Message
    min_version: int
    max_version: int
    flexible_version: int | None
    """The first flexible version, or None if no version is flexible."""
    api: Api


REGISTRY: dict[ApiKey, ApiInfo] = {
    ApiKey(api.key): ApiInfo(
        api.request, api.response, api.min_version, api.max_version, api.flexible, api
    )
    for api in ALL
}
"""Every described API: the single source for versions and flexibility."""

DESCRIPTIONS: dict[int, Api] = {int(key): info.api for key, info in REGISTRY.items()}
"""API key → :class:`Api` (the same tables as :data:`REGISTRY`)."""

SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # Cluster tools, answered as a one-node cluster would.
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # ACLs: SECURITY_DISABLED unless authorizer.class.name is set.
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # Client quotas, enforced by delaying answers.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # Security: SASL, SCRAM credentials (KIP-554).
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # Consumer groups (classic protocol): from v0 where described, since librdkafka
    # enables its group features (and LZ4) only when FindCoordinator and the
    # membership APIs reach v0. FindCoordinator v5-6 only add error codes and
    # share groups, which seglog does not implement.
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # KIP-848 consumer protocol (group.protocol=consumer): server-side assignment.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    # KIP-932 share groups; v0 was Kafka 4.0's early access, removed in 4.1.
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}
"""API key → (min, max) version the broker serves and advertises; within :data:`REGISTRY`."""

SHARE_APIS: frozenset[int] = frozenset(
    {
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    }
)
"""The share group APIs (KIP-932): ApiVersions leaves them out with ``group.share.enable=false``."""

BETWEEN_NODES: dict[int, tuple[int, int]] = {**SUPPORTED, ApiKey.ENVELOPE: (0, 0)}
"""What a node serves to the other nodes of its cluster: :data:`SUPPORTED` and Envelope.

Envelope carries a client's request to the controller with the client's
principal, so it is taken only from a node, never from a client.
"""


def description(api_key: int) -> Api | None:
    """The description of ``api_key``, if seglog has one."""
    return DESCRIPTIONS.get(api_key)


def supported_range(api_key: int) -> tuple[int, int] | None:
    """The versions of ``api_key`` the broker serves, or None."""
    return SUPPORTED.get(api_key)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of ``api_key`` is flexible (False for unknown APIs)."""
    api = DESCRIPTIONS.get(api_key)
    return api is not None and api.is_flexible(api_version)


def api_versions_entries(
    ranges: Mapping[int, tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """The ``api_keys`` rows of an ApiVersions response, in key order.

    ``ranges`` defaults to :data:`SUPPORTED`; pass ``{k: (i.min_version,
    i.max_version) for k, i in REGISTRY.items()}`` to advertise everything
    described.
    """
    table = SUPPORTED if ranges is None else ranges
    return [
        {"api_key": int(key), "min_version": low, "max_version": high}
        for key, (low, high) in sorted(table.items())
    ]


__all__ = [
    "BETWEEN_NODES",
    "DESCRIPTIONS",
    "REGISTRY",
    "SHARE_APIS",
    "SUPPORTED",
    "ApiInfo",
    "ApiKey",
    "api_versions_entries",
    "description",
    "is_flexible",
    "supported_range",
]
