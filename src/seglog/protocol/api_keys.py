"""API keys and the versions seglog serves: the single source of the ApiVersions answer.

``SUPPORTED`` maps each API to the range the broker advertises. The ranges
are honest (every version in them is implemented and tested) and reach down
to the old versions librdkafka probes before it enables features: Produce
from 0 (older versions carry legacy message sets, converted to v2 on append)
and Fetch from 4.
"""

from __future__ import annotations

from enum import IntEnum

from seglog.protocol.messages import admin, core, groups
from seglog.protocol.schema import Api


class ApiKey(IntEnum):
    """Kafka's API keys."""

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
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60


DESCRIPTIONS: dict[int, Api] = {
    api.key: api
    for api in (
        core.API_VERSIONS,
        core.METADATA,
        core.PRODUCE,
        core.FETCH,
        core.LIST_OFFSETS,
        core.INIT_PRODUCER_ID,
        core.OFFSET_FOR_LEADER_EPOCH,
        admin.CREATE_TOPICS,
        admin.DELETE_TOPICS,
        admin.CREATE_PARTITIONS,
        admin.DELETE_RECORDS,
        admin.DESCRIBE_CONFIGS,
        admin.INCREMENTAL_ALTER_CONFIGS,
        admin.ALTER_CONFIGS,
        admin.DESCRIBE_CLUSTER,
        admin.DESCRIBE_LOG_DIRS,
        admin.SASL_HANDSHAKE,
        groups.FIND_COORDINATOR,
        groups.JOIN_GROUP,
        groups.SYNC_GROUP,
        groups.HEARTBEAT,
        groups.LEAVE_GROUP,
        groups.OFFSET_COMMIT,
        groups.OFFSET_FETCH,
        groups.LIST_GROUPS,
        groups.DESCRIBE_GROUPS,
        groups.DELETE_GROUPS,
        groups.OFFSET_DELETE,
    )
}

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
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
}


def description(api_key: int) -> Api | None:
    """The message description of ``api_key``, if seglog knows it."""
    return DESCRIPTIONS.get(api_key)


def supported_range(api_key: int) -> tuple[int, int] | None:
    """The versions of ``api_key`` the broker serves, or None."""
    return SUPPORTED.get(api_key)
