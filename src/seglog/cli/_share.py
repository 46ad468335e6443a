"""Share groups for ``seglog groups``, like kafka-share-groups.sh.

confluent-kafka's AdminClient has no share group calls, so these are raw
requests (:func:`~seglog.cli._raw_client.kafka_request`) to the group's
coordinator, found with FindCoordinator: ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets;
share groups are listed with ListGroups v5 of every broker. The records of
each partition by state live on its leader, so they come from the broker's
HTTP API (``GET /v1/share-groups/{group}``) when it serves one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seglog.cli._client import ClientError, ClientSettings
from seglog.cli._raw_client import kafka_request
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey

FIND_COORDINATOR_VERSION = 4
LIST_GROUPS_VERSION = 5
SHARE_GROUP_DESCRIBE_VERSION = 1
OFFSETS_VERSION = 0
COUNTS = ("in_flight", "acquired", "available")


def _error(code: int, message: str | None, group: str) -> ClientError:
    name = error_codes.name_for(code)
    if name == "GROUP_ID_NOT_FOUND":
        return ClientError(f"share group {group!r} does not exist")
    if name == "NON_EMPTY_GROUP":
        return ClientError(f"share group {group!r} has active members: stop them first")
    return ClientError(f"share group {group!r}: {message or name}")


def coordinator(client: ClientSettings, group: str) -> str:
    """``host:port`` of ``group``'s coordinator, as FindCoordinator answers it."""
    body = {"key_type": 0, "coordinator_keys": [group]}
    answer = kafka_request(client, ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION, body)
    [found] = answer["coordinators"]
    if found["error_code"] != 0:
        raise _error(found["error_code"], found.get("error_message"), group)
    return f"{found['host']}:{found['port']}"


@dataclass
class ShareMember:
    """One member of a share group."""

    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assigned: list[tuple[str, int]]


@dataclass
class ShareGroup:
    """A share group as its coordinator describes it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator: str
    members: list[ShareMember] = field(default_factory=list)


def describe(client: ClientSettings, group: str) -> ShareGroup | None:
    """``group`` if it is a share group, else None (a consumer group, or none at all)."""
    where = coordinator(client, group)
    body = {"group_ids": [group], "include_authorized_operations": False}
    answer = kafka_request(
        client, ApiKey.SHARE_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE_VERSION, body, address=where
    )
    [described] = answer["groups"]
    name = error_codes.name_for(described["error_code"])
    # Not a share group, or share groups are off (UNSUPPORTED_VERSION).
    if name in ("GROUP_ID_NOT_FOUND", "UNSUPPORTED_VERSION") or described["group_state"] in (
        "Dead",
        "",
    ):
        return None
    if name != "NONE":
        raise _error(described["error_code"], described.get("error_message"), group)
    members = [
        ShareMember(
            m["member_id"],
            m["client_id"],
            m["client_host"],
            m["member_epoch"],
            sorted(
                (tp["topic_name"], p)
                for tp in m["assignment"]["topic_partitions"]
                for p in tp["partitions"]
            ),
        )
        for m in described["members"]
    ]
    return ShareGroup(
        group,
        described["group_state"],
        described["group_epoch"],
        described["assignment_epoch"],
        where,
        members,
    )


def start_offsets(client: ClientSettings, group: ShareGroup) -> dict[tuple[str, int], int]:
    """The group's start offset of each partition it has state for (DescribeShareGroupOffsets)."""
    body = {"groups": [{"group_id": group.group_id, "topics": None}]}
    answer = kafka_request(
        client,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        OFFSETS_VERSION,
        body,
        address=group.coordinator,
    )
    [found] = answer["groups"]
    if found["error_code"] != 0:
        raise _error(found["error_code"], found.get("error_message"), group.group_id)
    return {
        (topic["topic_name"], part["partition_index"]): part["start_offset"]
        for topic in found["topics"]
        for part in topic["partitions"]
        if part["error_code"] == 0
    }


def alter_start_offsets(
    client: ClientSettings, group: str, topic: str, offsets: dict[int, int]
) -> None:
    """Start ``group`` over at ``offsets`` in ``topic`` (AlterShareGroupOffsets)."""
    body = {
        "group_id": group,
        "topics": [
            {
                "topic_name": topic,
                "partitions": [
                    {"partition_index": p, "start_offset": o} for p, o in sorted(offsets.items())
                ],
            }
        ],
    }
    answer = kafka_request(
        client,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        OFFSETS_VERSION,
        body,
        address=coordinator(client, group),
    )
    if answer["error_code"] != 0:
        raise _error(answer["error_code"], answer.get("error_message"), group)
    for found in answer["responses"]:
        for part in found["partitions"]:
            if part["error_code"] != 0:
                reason = part.get("error_message") or error_codes.name_for(part["error_code"])
                raise ClientError(f"{topic!r} partition {part['partition_index']}: {reason}")


def delete_offsets(client: ClientSettings, group: str, topics: list[str]) -> dict[str, str | None]:
    """Forget ``group``'s state in ``topics`` (DeleteShareGroupOffsets): each topic's error."""
    body = {"group_id": group, "topics": [{"topic_name": t} for t in topics]}
    answer = kafka_request(
        client,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        OFFSETS_VERSION,
        body,
        address=coordinator(client, group),
    )
    if answer["error_code"] != 0:
        raise _error(answer["error_code"], answer.get("error_message"), group)
    out: dict[str, str | None] = {}
    for found in answer["responses"]:
        code = found["error_code"]
        message = found.get("error_message") or error_codes.name_for(code)
        out[found["topic_name"]] = None if code == 0 else message
    return out


def list_groups(client: ClientSettings, brokers: list[str], types: list[str]) -> list[Any]:
    """(group id, type, state) of every group of ``types`` on ``brokers`` (ListGroups v5)."""
    found = set()
    for where in brokers:
        answer = kafka_request(
            client,
            ApiKey.LIST_GROUPS,
            LIST_GROUPS_VERSION,
            {"states_filter": [], "types_filter": types},
            address=where,
        )
        if answer["error_code"] != 0:
            name = error_codes.name_for(answer["error_code"])
            raise ClientError(f"cannot list the groups of {where}: {name}")
        for g in answer["groups"]:
            found.add((g["group_id"], g["group_type"], g["group_state"]))
    return sorted(found)
