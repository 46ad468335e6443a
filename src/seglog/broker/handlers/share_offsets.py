"""DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets (KIP-932).

A share group's "offset" in a partition is its share-partition start offset:
every record below it is acknowledged or archived. Describing reads the
share coordinator's state (or the share-partition in memory, which is never
behind it); altering starts the group over at a given offset, and deleting
forgets the group's state in a topic, both only while the group has no
members, as Kafka refuses them with NON_EMPTY_GROUP otherwise.
"""

from __future__ import annotations

import uuid
from typing import Any

from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader
from seglog.share.state import SharePartitionKey

_ZERO = uuid.UUID(int=0)


def _group_error(
    state: BrokerState, group_id: str, *, must_be_empty: bool
) -> tuple[str, str] | None:
    """Why ``group_id``'s share offsets cannot be touched now: (error, message), or None."""
    if state.shares is None:
        return "UNSUPPORTED_VERSION", "share groups are not enabled (group.share.enable)"
    coordinator = state.coordinator
    if group_id in coordinator.groups or group_id in coordinator.consumer_groups:
        return "GROUP_ID_NOT_FOUND", f"Group {group_id} is not a share group."
    group = coordinator.share_groups.get(group_id)
    if must_be_empty and group is not None and group.members:
        return "NON_EMPTY_GROUP", f"The group {group_id} has active members."
    return None


async def _start_offset(state: BrokerState, key: SharePartitionKey, topic: str) -> int:
    assert state.shares is not None
    for share_partition in state.shares.partitions.of_group(key.group_id):
        if share_partition.topic == topic and share_partition.key.partition == key.partition:
            return share_partition.start_offset
    found = await state.shares.partitions.persister.read(key)
    return -1 if found is None else found.start_offset


async def describe_share_group_offsets(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """The share-partition start offsets of each group, for the topics asked (or all)."""
    groups = []
    topics = state.log_dir.topics()
    names = {info.topic_id: name for name, info in topics.items()}
    for request in body["groups"]:
        group_id = request["group_id"]
        refusal = _group_error(state, group_id, must_be_empty=False)
        if refusal is not None:
            groups.append(
                {
                    "group_id": group_id,
                    "topics": [],
                    "error_code": error_codes.code_for(refusal[0]),
                    "error_message": refusal[1],
                }
            )
            continue
        assert state.shares is not None
        await state.shares.start(state.log_dir.env)
        wanted: dict[str, list[int]] = {}
        if request["topics"] is None:
            for key in await state.shares.partitions.persister.keys_of(group_id):
                name = names.get(key.topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(key.partition)
        else:
            for topic in request["topics"]:
                wanted[topic["topic_name"]] = list(topic["partitions"])
        answered = []
        for name, partitions in sorted(wanted.items()):
            info = topics.get(name)
            entries = []
            for index in sorted(partitions):
                entry: dict[str, Any] = {
                    "partition_index": index,
                    "start_offset": -1,
                    "leader_epoch": -1,
                    "error_code": 0,
                    "error_message": None,
                }
                if info is None or not 0 <= index < info.partitions:
                    entry["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
                else:
                    key = SharePartitionKey(group_id, info.topic_id, index)
                    entry["start_offset"] = await _start_offset(state, key, name)
                    entry["leader_epoch"] = 0
                entries.append(entry)
            answered.append(
                {
                    "topic_name": name,
                    "topic_id": info.topic_id if info is not None else _ZERO,
                    "partitions": entries,
                }
            )
        groups.append(
            {"group_id": group_id, "topics": answered, "error_code": 0, "error_message": None}
        )
    return {"throttle_time_ms": 0, "groups": groups}


async def _refused_or_started(state: BrokerState, group_id: str) -> dict[str, Any] | None:
    """The whole answer of a change refused for ``group_id``, or None once the store is up."""
    refusal = _group_error(state, group_id, must_be_empty=True)
    if refusal is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": error_codes.code_for(refusal[0]),
            "error_message": refusal[1],
            "responses": [],
        }
    assert state.shares is not None
    await state.shares.start(state.log_dir.env)
    return None


async def alter_share_group_offsets(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Start an empty share group over at the given offsets (``kafka-share-groups --reset``)."""
    group_id = body["group_id"]
    refused = await _refused_or_started(state, group_id)
    if refused is not None:
        return refused
    assert state.shares is not None
    topics = state.log_dir.topics()
    responses = []
    for topic in body["topics"]:
        name = topic["topic_name"]
        info = topics.get(name)
        entries = []
        for partition in topic["partitions"]:
            index = partition["partition_index"]
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "error_message": None,
            }
            if info is None or not 0 <= index < info.partitions:
                entry["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
            else:
                try:
                    start = partition["start_offset"]
                    await state.shares.reset(group_id, name, index, start)
                except SeglogError as exc:
                    entry["error_code"] = error_codes.code_for_exception(exc)
                    entry["error_message"] = str(exc)
            entries.append(entry)
        responses.append(
            {
                "topic_name": name,
                "topic_id": info.topic_id if info is not None else _ZERO,
                "partitions": entries,
            }
        )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


async def delete_share_group_offsets(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """Forget an empty share group's state in whole topics."""
    group_id = body["group_id"]
    refused = await _refused_or_started(state, group_id)
    if refused is not None:
        return refused
    assert state.shares is not None
    topics = state.log_dir.topics()
    responses = []
    for topic in body["topics"]:
        name = topic["topic_name"]
        info = topics.get(name)
        entry: dict[str, Any] = {
            "topic_name": name,
            "topic_id": info.topic_id if info is not None else _ZERO,
            "error_code": 0,
            "error_message": None,
        }
        if info is None:
            entry["error_code"] = error_codes.code_for("UNKNOWN_TOPIC_OR_PARTITION")
        else:
            try:
                await state.shares.forget_topic_of_group(group_id, name)
            except SeglogError as exc:
                entry["error_code"] = error_codes.code_for_exception(exc)
                entry["error_message"] = str(exc)
        responses.append(entry)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}
