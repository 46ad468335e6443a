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
    acls,
    admin,
    api_versions,
    fetch,
    forwarding,
    groups,
    metadata,
    offsets,
    produce,
    producer,
    quotas,
    replicas,
    sasl,
    security,
    share,
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
    producer.ADD_PARTITIONS_TO_TXN,
    producer.ADD_OFFSETS_TO_TXN,
    producer.END_TXN,
    producer.WRITE_TXN_MARKERS,
    producer.TXN_OFFSET_COMMIT,
    acls.DESCRIBE_ACLS,
    acls.CREATE_ACLS,
    acls.DELETE_ACLS,
    admin.DESCRIBE_CONFIGS,
    admin.ALTER_CONFIGS,
    replicas.ALTER_REPLICA_LOG_DIRS,
    admin.DESCRIBE_LOG_DIRS,
    sasl.SASL_AUTHENTICATE,
    admin.CREATE_PARTITIONS,
    groups.DELETE_GROUPS,
    replicas.ELECT_LEADERS,
    admin.INCREMENTAL_ALTER_CONFIGS,
    replicas.ALTER_PARTITION_REASSIGNMENTS,
    replicas.LIST_PARTITION_REASSIGNMENTS,
    groups.OFFSET_DELETE,
    quotas.DESCRIBE_CLIENT_QUOTAS,
    quotas.ALTER_CLIENT_QUOTAS,
    security.DESCRIBE_USER_SCRAM_CREDENTIALS,
    security.ALTER_USER_SCRAM_CREDENTIALS,
    forwarding.ENVELOPE,
    admin.DESCRIBE_CLUSTER,
    replicas.DESCRIBE_PRODUCERS,
    producer.DESCRIBE_TRANSACTIONS,
    producer.LIST_TRANSACTIONS,
    groups.CONSUMER_GROUP_HEARTBEAT,
    groups.CONSUMER_GROUP_DESCRIBE,
    replicas.DESCRIBE_TOPIC_PARTITIONS,
    share.SHARE_GROUP_HEARTBEAT,
    share.SHARE_GROUP_DESCRIBE,
    share.SHARE_FETCH,
    share.SHARE_ACKNOWLEDGE,
    share.DESCRIBE_SHARE_GROUP_OFFSETS,
    share.ALTER_SHARE_GROUP_OFFSETS,
    share.DELETE_SHARE_GROUP_OFFSETS,
)
"""Every described API, in API key order."""

__all__ = ["ALL"]
