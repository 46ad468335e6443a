"""``GET /v1/share-groups/{share_group}``: a share group, its members and its partitions' records.

The group, its members and its start offsets are asked of the group's
coordinator as a Kafka admin client asks them, as the HTTP caller
(ShareGroupDescribe, DescribeShareGroupOffsets: DESCRIBE on the group). The
records of each partition by state (in flight, acquired, available,
acknowledged, archived) live only in the share-partition its leader holds in
memory, so they are a partition question (:data:`SHARE_PARTITION`) answered by
each partition's leader; a leader that holds none (no member has fetched
from it since it started) answers its log end only, and the counts are null.
"""

from __future__ import annotations

import weakref
from typing import Any

from aiohttp import web

from seglog.broker.http_api import partition_query
from seglog.broker.http_api.consumer_groups import coordinator_of, refused
from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.kafka_calls import ask
from seglog.broker.http_api.routes import Param, Route, json_response
from seglog.broker.http_api.topic_access import caller, state_of
from seglog.broker.http_api.v3_cluster import obj
from seglog.broker.share.service import ShareService
from seglog.protocol.api_keys import ApiKey
from seglog.storage.log_dir import LogDir

SHARE_GROUP_DESCRIBE_VERSION = 1
DESCRIBE_SHARE_GROUP_OFFSETS_VERSION = 0
SHARE_PARTITION = "share_partition"
"""The partition question: one share group's records of the partition, by state."""
COUNTS = ("in_flight", "acquired", "available", "acknowledged", "archived")

# The share services of the brokers of this process by their log directory: a question
# is given the log directory only (several brokers of one process each have their own).
_SERVICES: weakref.WeakKeyDictionary[LogDir, ShareService] = weakref.WeakKeyDictionary()


def attach(log_dir: LogDir, shares: ShareService | None) -> None:
    """Answer :data:`SHARE_PARTITION` for ``log_dir``'s partitions from ``shares``."""
    if shares is not None:
        _SERVICES[log_dir] = shares


def share_partition(log_dir: LogDir, topic: str, partition: int, args: dict[str, Any]) -> Any:
    """The group's records of the partition by state, and its log end (on a worker thread).

    The share-partition belongs to the event loop; its figures are read as
    ``/metrics`` reads them (``summary``), so a count may be a moment old or, while
    the loop changes the partition, off by the records of that change.
    """
    end = log_dir.log(topic, partition).high_watermark
    answer: dict[str, Any] = {"end_offset": end, "start_offset": None}
    answer.update(dict.fromkeys(COUNTS))
    shares = _SERVICES.get(log_dir)
    if shares is None:
        return answer
    group_id = str(args["group"])
    # partitions() copies the loop's table in one step; walking it here could see it change.
    for found in shares.partitions.partitions():
        if (
            found.key.group_id == group_id
            and found.topic == topic
            and found.key.partition == partition
        ):
            summary = found.summary()
            answer["start_offset"] = summary.start_offset
            for name in COUNTS:
                answer[name] = getattr(summary, name)
            break
    return answer


partition_query.register(SHARE_PARTITION, share_partition)


async def share_group(request: web.Request) -> web.StreamResponse:
    """The group's state, members and, per partition, its start offset, records and lag."""
    group_id = request.match_info["share_group"]
    await caller(request)
    node = await coordinator_of(request, group_id)
    answer = await ask(
        request,
        ApiKey.SHARE_GROUP_DESCRIBE,
        SHARE_GROUP_DESCRIBE_VERSION,
        {"group_ids": [group_id], "include_authorized_operations": False},
        node_id=node,
    )
    [described] = answer["groups"]
    if described["error_code"] != 0:
        raise refused(described["error_code"], described.get("error_message"), group_id)
    if described["group_state"] in ("Dead", ""):
        raise ApiError(404, "GROUP_ID_NOT_FOUND", f"group '{group_id}' does not exist")
    members = []
    wanted: set[tuple[str, int]] = set()
    for member in described["members"]:
        assigned = sorted(
            (tp["topic_name"], p)
            for tp in member["assignment"]["topic_partitions"]
            for p in tp["partitions"]
        )
        wanted.update(assigned)
        members.append(
            {
                "member_id": member["member_id"],
                "member_epoch": member["member_epoch"],
                "client_id": member["client_id"],
                "host": member["client_host"],
                "rack": member.get("rack_id"),
                "subscribed_topics": sorted(member["subscribed_topic_names"]),
                "assignments": [{"topic": t, "partition": p} for t, p in assigned],
            }
        )
    offsets = await ask(
        request,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        DESCRIBE_SHARE_GROUP_OFFSETS_VERSION,
        {"groups": [{"group_id": group_id, "topics": None}]},
        node_id=node,
    )
    [group_offsets] = offsets["groups"]
    if group_offsets["error_code"] != 0:
        raise refused(group_offsets["error_code"], group_offsets.get("error_message"), group_id)
    starts: dict[tuple[str, int], int] = {}
    for topic in group_offsets["topics"]:
        for part in topic["partitions"]:
            if part["error_code"] == 0:
                starts[(topic["topic_name"], part["partition_index"])] = part["start_offset"]
    wanted.update(starts)
    state = state_of(request)
    topics = state.log_dir.topics()
    known = sorted(k for k in wanted if k[0] in topics and k[1] < topics[k[0]].partitions)
    found = await partition_query.ask_many(
        state.log_dir,
        state.cluster,
        [(topics[t], p) for t, p in known],
        SHARE_PARTITION,
        {"group": group_id},
    )
    partitions = []
    for (topic_name, index), facts in zip(known, found, strict=True):
        start = facts["start_offset"]
        if start is None:
            start = starts.get((topic_name, index), -1)
        end = facts["end_offset"]
        if start < 0:
            lag = None
        else:
            done = (facts["acknowledged"] or 0) + (facts["archived"] or 0)
            lag = max(end - start - done, 0)
        entry = {"topic": topic_name, "partition": index, "start_offset": start, "end_offset": end}
        entry.update({name: facts[name] for name in COUNTS})
        entry["lag"] = lag
        partitions.append(entry)
    return json_response(
        {
            "group_id": group_id,
            "state": described["group_state"],
            "group_epoch": described["group_epoch"],
            "assignment_epoch": described["assignment_epoch"],
            "assignor": described["assignor_name"],
            "coordinator": node,
            "members": members,
            "partitions": partitions,
        }
    )


_MEMBER = obj(
    member_id="string",
    member_epoch="integer",
    client_id="string",
    host="string",
    rack="string?",
)
_MEMBER["properties"]["subscribed_topics"] = {"type": "array", "items": {"type": "string"}}
_MEMBER["properties"]["assignments"] = {
    "type": "array",
    "items": obj(topic="string", partition="integer"),
}
_PARTITION = obj(
    topic="string",
    partition="integer",
    start_offset="integer",
    end_offset="integer",
    in_flight="integer?",
    acquired="integer?",
    available="integer?",
    acknowledged="integer?",
    archived="integer?",
    lag="integer?",
)
_GROUP = obj(
    group_id="string",
    state="string",
    group_epoch="integer",
    assignment_epoch="integer",
    assignor="string",
    coordinator="integer",
)
_GROUP["properties"]["members"] = {"type": "array", "items": _MEMBER}
_GROUP["properties"]["partitions"] = {"type": "array", "items": _PARTITION}

ROUTES = (
    Route(
        "GET",
        "/v1/share-groups/{share_group}",
        share_group,
        "getShareGroup",
        "A share group: state, members, and per partition its start offset, end offset, "
        "records in flight (acquired, available, acknowledged, archived) and lag "
        "(counts null while the partition's leader holds no state of the group)",
        params=(Param("share_group", "string", "the share group's id", location="path"),),
        response=_GROUP,
        errors=(401, 403, 404, 503),
    ),
)
