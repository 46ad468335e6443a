"""Authorized operations (KIP-430) in the describe answers, for every API that carries them.

A client may ask what it may do with a topic, a group or the cluster: Metadata
(``include_topic_authorized_operations``, and ``include_cluster_authorized_operations``
in v8–v10), DescribeCluster, DescribeGroups (v3+), ConsumerGroupDescribe and
ShareGroupDescribe (``include_authorized_operations``); DescribeTopicPartitions
always tells. The answer is a bit field of ``AclOperation`` codes: of the operations
the resource type supports, those the authorizer allows the principal on that
resource, as Kafka's ``AuthHelper.authorizedOperations`` computes them; every
supported one without an authorizer. The handlers leave the field at its default
(``NOT_REQUESTED``); :func:`fill` sets it afterwards, for both cases, in one place.

As in Kafka, entries that failed are left alone: a group not described
(an error code), a topic the principal may not describe; the cluster's
operations are 0 for a principal without DESCRIBE on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seglog.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey

NOT_REQUESTED = -(2**31)
"""The schemas' default: not asked for (Java's ``Integer.MIN_VALUE``)."""

SUPPORTED: dict[int, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
    ),
}
"""The operations each resource type supports (Kafka's ``AclEntry.supportedOperations``)."""

May = Callable[[Operation, int, str], bool]
"""Whether the principal may do an operation on a resource (type, name)."""

_TOPIC_FAILED = error_codes.code_for("TOPIC_AUTHORIZATION_FAILED")


@dataclass(frozen=True)
class _Carrier:
    """Where one API's answer carries authorized operations, and what asks for them."""

    flag: str | None
    """The request's field that asks (None: always answered)."""
    versions: tuple[int, int]
    entries: str | None
    """The answer's list of entries holding the field (None: the answer itself)."""
    field: str
    resource_type: ResourceType
    name: str | None
    """The entry's field naming the resource (None: the cluster)."""


_ALL_VERSIONS = (0, 2**15)
_GROUPS = _Carrier(
    "include_authorized_operations",
    _ALL_VERSIONS,
    "groups",
    "authorized_operations",
    ResourceType.GROUP,
    "group_id",
)
_CLUSTER = _Carrier(
    "include_cluster_authorized_operations",
    _ALL_VERSIONS,
    None,
    "cluster_authorized_operations",
    ResourceType.CLUSTER,
    None,
)
_TOPICS = _Carrier(
    None, _ALL_VERSIONS, "topics", "topic_authorized_operations", ResourceType.TOPIC, "name"
)

_CARRIERS: dict[int, tuple[_Carrier, ...]] = {
    ApiKey.METADATA: (
        _Carrier(
            "include_topic_authorized_operations",
            (8, 2**15),
            "topics",
            "topic_authorized_operations",
            ResourceType.TOPIC,
            "name",
        ),
        # Kafka answers the cluster's operations in Metadata v8-v10 only (KIP-700).
        _Carrier(
            "include_cluster_authorized_operations",
            (8, 10),
            None,
            "cluster_authorized_operations",
            ResourceType.CLUSTER,
            None,
        ),
    ),
    ApiKey.DESCRIBE_CLUSTER: (_CLUSTER,),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (_TOPICS,),
    ApiKey.DESCRIBE_GROUPS: (
        _Carrier(
            "include_authorized_operations",
            (3, 2**15),
            "groups",
            "authorized_operations",
            ResourceType.GROUP,
            "group_id",
        ),
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (_GROUPS,),
    ApiKey.SHARE_GROUP_DESCRIBE: (_GROUPS,),
}


def authorized(may: May, resource_type: ResourceType, name: str) -> int:
    """The bit field of the operations ``may`` allows on the resource, of those it supports."""
    bits = 0
    for operation in SUPPORTED[resource_type]:
        if may(operation, resource_type, name):
            bits |= 1 << operation
    return bits


def fill(
    api_key: int, version: int, request: Mapping[str, Any], response: dict[str, Any], may: May
) -> None:
    """Set the authorized operations ``request`` asked for in ``response``, in place."""
    for carrier in _CARRIERS.get(api_key, ()):
        low, high = carrier.versions
        if not low <= version <= high or (carrier.flag and not request.get(carrier.flag)):
            continue
        if carrier.entries is None:
            describable = may(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
            response[carrier.field] = (
                authorized(may, ResourceType.CLUSTER, CLUSTER_NAME) if describable else 0
            )
            continue
        for entry in response.get(carrier.entries) or ():
            name = entry.get(carrier.name) if carrier.name else None
            if name is None or not _described(entry, carrier.resource_type):
                continue
            entry[carrier.field] = authorized(may, carrier.resource_type, name)


def _described(entry: Mapping[str, Any], resource_type: ResourceType) -> bool:
    """Kafka tells a topic's operations unless it may not be described, a group's if found."""
    code: int = entry.get("error_code", 0)
    return code != _TOPIC_FAILED if resource_type == ResourceType.TOPIC else code == 0


def anyone(operation: Operation, resource_type: int, name: str) -> bool:
    """The :data:`May` of a broker without an authorizer: everything is allowed."""
    return True
