"""Declarative descriptions of every API seglog speaks, one module per API family.

Each module holds :class:`~seglog.protocol.schema.Api` tables written in
seglog's compact notation from Apache Kafka's message specifications
(Apache-2.0): field names are the specifications' names in snake_case, version
ranges are the specifications' own strings (``"3+"``, ``"0-12"``), and only
fields of the described versions are listed. There is no behaviour here;
:mod:`seglog.protocol.schema` compiles the tables into codecs and
:mod:`seglog.protocol.api_keys` registers them.
"""

from __future__ import annotations

from seglog.protocol.messages import (
    admin,
    api_versions,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    producer,
    sasl,
    security,
)
from seglog.protocol.schema import Api

ALL: tuple[Api, ...] = (
    produce.PRODUCE,
    fetch.FETCH,
    offsets.LIST_OFFSETS,
    metadata.METADATA,
    groups.OFFSET_COMMIT,
    groups.OFFSET_FETCH,
    groups.FIND_COORDINATOR,
    groups.JOIN_GROUP,
    groups.HEARTBEAT,
    groups.LEAVE_GROUP,
    groups.SYNC_GROUP,
    groups.DESCRIBE_GROUPS,
    groups.LIST_GROUPS,
    sasl.SASL_HANDSHAKE,
    api_versions.API_VERSIONS,
    admin.CREATE_TOPICS,
    admin.DELETE_TOPICS,
    admin.DELETE_RECORDS,
    producer.INIT_PRODUCER_ID,
    offsets.OFFSET_FOR_LEADER_EPOCH,
    security.DESCRIBE_ACLS,
    security.CREATE_ACLS,
    security.DELETE_ACLS,
    admin.DESCRIBE_CONFIGS,
    admin.ALTER_CONFIGS,
    admin.DESCRIBE_LOG_DIRS,
    sasl.SASL_AUTHENTICATE,
    admin.CREATE_PARTITIONS,
    groups.DELETE_GROUPS,
    admin.INCREMENTAL_ALTER_CONFIGS,
    groups.OFFSET_DELETE,
    security.DESCRIBE_USER_SCRAM_CREDENTIALS,
    security.ALTER_USER_SCRAM_CREDENTIALS,
    admin.DESCRIBE_CLUSTER,
    groups.CONSUMER_GROUP_HEARTBEAT,
    groups.CONSUMER_GROUP_DESCRIBE,
)
"""Every described API, in API key order."""

__all__ = ["ALL"]
