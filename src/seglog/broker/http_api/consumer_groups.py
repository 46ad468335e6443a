"""REST Proxy v3 consumer groups: the list, one group, its consumers, lags, lag summary; and
``POST /v1/groups/{g}/offsets/reset``.

Everything is asked of the broker as a Kafka admin client would ask it, as
the HTTP caller (:func:`~.kafka_calls.ask`): ListGroups of every node,
FindCoordinator, then DescribeGroups (classic groups) or
ConsumerGroupDescribe (KIP-848 groups), OffsetFetch of the group's
coordinator, and ListOffsets of each partition's leader. So the caller sees
exactly the groups, members and offsets its ACLs show a Kafka client
(DESCRIBE on the group, DESCRIBE on the topics), and a reset is an
OffsetCommit that needs READ on the group and the topic, refused while the
group has members, as ``kafka-consumer-groups --reset-offsets`` is.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from seglog.broker.http_api.errors import ApiError, bad_request
from seglog.broker.http_api.kafka_calls import ask
from seglog.broker.http_api.produce import READ_ONLY
from seglog.broker.http_api.routes import Param, Route, json_response
from seglog.broker.http_api.topic_access import (
    caller,
    check_cluster,
    partition_of,
    state_of,
    topic_for,
)
from seglog.broker.http_api.v3_cluster import cluster_url, list_schema, listing, obj
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.consumer_protocol import assigned_partitions

LIST_GROUPS_VERSION = 5
DESCRIBE_GROUPS_VERSION = 5
CONSUMER_GROUP_DESCRIBE_VERSION = 0
OFFSET_FETCH_VERSION = 9
LIST_OFFSETS_VERSION = 7
FIND_COORDINATOR_VERSION = 4
OFFSET_COMMIT_VERSION = 9
_GONE = error_codes.code_for("GROUP_ID_NOT_FOUND")
LATEST = -1
EARLIEST = -2

_STATUS = {
    "GROUP_AUTHORIZATION_FAILED": 403,
    "TOPIC_AUTHORIZATION_FAILED": 403,
    "CLUSTER_AUTHORIZATION_FAILED": 403,
    "GROUP_ID_NOT_FOUND": 404,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "NON_EMPTY_GROUP": 409,
    "UNKNOWN_MEMBER_ID": 409,
    "ILLEGAL_GENERATION": 409,
    "REBALANCE_IN_PROGRESS": 409,
    "INVALID_REQUEST": 400,
}


def refused(code: int, message: str | None, what: str) -> ApiError:
    """A Kafka error answered by the broker, as the API's error."""
    name = error_codes.name_for(code)
    return ApiError(_STATUS.get(name, 503), name, message or f"{what}: {name}")


def _state(kafka_state: str) -> str:
    """Kafka's state name (``PreparingRebalance``) as REST Proxy's (``PREPARING_REBALANCE``)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", kafka_state).upper()


@dataclass
class Member:
    """One member of a group: who, and its partitions."""

    consumer_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignments: list[tuple[str, int]]


@dataclass
class Group:
    """A group as described by its coordinator."""

    group_id: str
    type: str
    """CLASSIC or CONSUMER."""
    kafka_state: str
    protocol_type: str
    assignor: str
    coordinator: int
    members: list[Member] = field(default_factory=list)

    def item(self, request: web.Request) -> dict[str, Any]:
        """Its REST Proxy v3 body."""
        url = f"{cluster_url(request)}/consumer-groups/{self.group_id}"
        return {
            "kind": "KafkaConsumerGroup",
            "metadata": {"self": url},
            "cluster_id": state_of(request).cluster_id,
            "consumer_group_id": self.group_id,
            "is_simple": self.type == "CLASSIC" and self.protocol_type == "",
            "partition_assignor": self.assignor,
            "state": _state(self.kafka_state),
            "kafka_state": self.kafka_state,
            "type": self.type,
            "coordinator": {"broker_id": self.coordinator},
            "member_count": len(self.members),
        }


def _several_nodes(request: web.Request) -> bool:
    return len(state_of(request).cluster.node_ids()) > 1


async def coordinator_of(request: web.Request, group_id: str) -> int:
    """The node coordinating ``group_id``, as FindCoordinator tells the caller."""
    state = state_of(request)
    if not _several_nodes(request):
        return state.cluster.node_id
    answer = await ask(
        request,
        ApiKey.FIND_COORDINATOR,
        FIND_COORDINATOR_VERSION,
        {"key_type": 0, "coordinator_keys": [group_id]},
    )
    [found] = answer["coordinators"]
    if found["error_code"] != 0:
        raise refused(found["error_code"], found.get("error_message"), f"group '{group_id}'")
    return int(found["node_id"])


def _classic(described: dict[str, Any], node: int) -> Group:
    members = []
    consumer = described["protocol_type"] == "consumer"
    for m in described["members"]:
        parts = assigned_partitions(bytes(m["member_assignment"])) if consumer else None
        members.append(
            Member(
                m["member_id"],
                m.get("group_instance_id"),
                m["client_id"],
                m["client_host"],
                sorted(parts or []),
            )
        )
    return Group(
        described["group_id"],
        "CLASSIC",
        described["group_state"],
        described["protocol_type"],
        described["protocol_data"],
        node,
        members,
    )


def _consumer(described: dict[str, Any], node: int) -> Group:
    members = []
    for m in described["members"]:
        parts = [
            (t["topic_name"], p)
            for t in m["assignment"]["topic_partitions"]
            for p in t["partitions"]
        ]
        members.append(
            Member(
                m["member_id"],
                m.get("instance_id"),
                m["client_id"],
                m["client_host"],
                sorted(parts),
            )
        )
    return Group(
        described["group_id"],
        "CONSUMER",
        described["group_state"],
        "consumer",
        described["assignor_name"],
        node,
        members,
    )


async def _describe(
    request: web.Request,
    node: int,
    classic: list[str],
    consumer: list[str],
    *,
    listing: bool = False,
) -> list[Group]:
    """Groups described by their coordinator ``node``; errors raised (403, 404), but when
    ``listing``, a group gone since it was listed is left out."""
    out: list[Group] = []
    if consumer:
        answer = await ask(
            request,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            CONSUMER_GROUP_DESCRIBE_VERSION,
            {"group_ids": consumer},
            node_id=node,
        )
        for described in answer["groups"]:
            if listing and described["error_code"] == _GONE:
                continue
            if described["error_code"] != 0:
                raise refused(
                    described["error_code"],
                    described.get("error_message"),
                    f"group '{described['group_id']}'",
                )
            out.append(_consumer(described, node))
    if classic:
        answer = await ask(
            request,
            ApiKey.DESCRIBE_GROUPS,
            DESCRIBE_GROUPS_VERSION,
            {"groups": classic},
            node_id=node,
        )
        for described in answer["groups"]:
            if described["error_code"] != 0:
                raise refused(described["error_code"], None, f"group '{described['group_id']}'")
            if listing and described["group_state"] == "Dead":
                continue
            out.append(_classic(described, node))
    return out


async def group_of(request: web.Request, group_id: str) -> Group:
    """One group, described as the caller (403 without DESCRIBE on it, 404 if unknown)."""
    node = await coordinator_of(request, group_id)
    answer = await ask(
        request,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        CONSUMER_GROUP_DESCRIBE_VERSION,
        {"group_ids": [group_id]},
        node_id=node,
    )
    [described] = answer["groups"]
    name = error_codes.name_for(described["error_code"])
    if name == "NONE":
        return _consumer(described, node)
    if name != "GROUP_ID_NOT_FOUND":
        raise refused(described["error_code"], described.get("error_message"), group_id)
    [group] = await _describe(request, node, [group_id], [])
    if group.kafka_state == "Dead":
        raise ApiError(404, "GROUP_ID_NOT_FOUND", f"group '{group_id}' does not exist")
    return group


async def _listed(request: web.Request) -> list[Group]:
    """Every group the caller may DESCRIBE, described by its coordinator."""
    state = state_of(request)
    cluster = state.cluster
    nodes = [n for n in cluster.node_ids() if cluster.alive(n)]

    async def of(node: int) -> list[Group]:
        answer = await ask(request, ApiKey.LIST_GROUPS, LIST_GROUPS_VERSION, {}, node_id=node)
        if answer["error_code"] != 0:
            raise refused(answer["error_code"], None, f"listing node {node}'s groups")
        # Share groups are not consumer groups: this API does not list them.
        classic = [g["group_id"] for g in answer["groups"] if g["group_type"] == "classic"]
        consumer = [g["group_id"] for g in answer["groups"] if g["group_type"] == "consumer"]
        return await _describe(request, node, classic, consumer, listing=True)

    per_node = await asyncio.gather(*(of(n) for n in nodes))
    return sorted((g for groups in per_node for g in groups), key=lambda g: g.group_id)


async def list_groups(request: web.Request) -> web.StreamResponse:
    """The groups the caller may DESCRIBE."""
    check_cluster(request)
    await caller(request)
    groups = await _listed(request)
    url = f"{cluster_url(request)}/consumer-groups"
    return json_response(listing("KafkaConsumerGroupList", url, [g.item(request) for g in groups]))


async def one_group(request: web.Request) -> web.StreamResponse:
    """One group."""
    check_cluster(request)
    group = await group_of(request, request.match_info["group"])
    return json_response(group.item(request))


async def consumers(request: web.Request) -> web.StreamResponse:
    """A group's members and their partitions."""
    check_cluster(request)
    group = await group_of(request, request.match_info["group"])
    url = f"{cluster_url(request)}/consumer-groups/{group.group_id}/consumers"
    data = [
        {
            "kind": "KafkaConsumer",
            "metadata": {"self": f"{url}/{m.consumer_id}"},
            "cluster_id": state_of(request).cluster_id,
            "consumer_group_id": group.group_id,
            "consumer_id": m.consumer_id,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "host": m.host,
            "assignments": [{"topic_name": t, "partition_id": p} for t, p in m.assignments],
        }
        for m in group.members
    ]
    return json_response(listing("KafkaConsumerList", url, data))


async def committed(request: web.Request, group: Group) -> dict[tuple[str, int], int]:
    """The group's committed offsets (of the topics the caller may DESCRIBE)."""
    answer = await ask(
        request,
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH_VERSION,
        {"groups": [{"group_id": group.group_id, "topics": None}], "require_stable": False},
        node_id=group.coordinator,
    )
    [fetched] = answer["groups"]
    if fetched["error_code"] != 0:
        raise refused(fetched["error_code"], None, f"group '{group.group_id}'")
    out: dict[tuple[str, int], int] = {}
    for topic in fetched["topics"]:
        for part in topic["partitions"]:
            if part["error_code"] == 0 and part["committed_offset"] >= 0:
                out[(topic["name"], part["partition_index"])] = int(part["committed_offset"])
    return out


async def list_offsets(
    request: web.Request, partitions: list[tuple[str, int]], timestamp: int
) -> dict[tuple[str, int], int]:
    """ListOffsets of each partition's leader at ``timestamp`` (LATEST, EARLIEST or ms);
    partitions that answer an error (no DESCRIBE, gone) are left out."""
    state = state_of(request)
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in partitions:
        info = state.log_dir.topic(topic)
        if info is None or partition >= info.partitions:
            continue
        leader = state.cluster.leader(info, partition)
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)

    async def of(leader: int, topics: dict[str, list[int]]) -> dict[str, Any]:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": t,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                        for p in ps
                    ],
                }
                for t, ps in topics.items()
            ],
        }
        return await ask(request, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body, node_id=leader)

    answers = await asyncio.gather(*(of(n, t) for n, t in by_leader.items()))
    out: dict[tuple[str, int], int] = {}
    for answer in answers:
        for topic in answer["topics"]:
            for part in topic["partitions"]:
                if part["error_code"] == 0:
                    out[(topic["name"], part["partition_index"])] = int(part["offset"])
    return out


async def _lags(request: web.Request) -> tuple[Group, list[dict[str, Any]]]:
    """Each partition the group has committed or is assigned: offsets and lag.

    An assigned partition without a committed offset has neither a current
    offset nor a lag (``null``), as kafka-consumer-groups shows it ("-").
    """
    group = await group_of(request, request.match_info["group"])
    offsets = await committed(request, group)
    owner = {tp: m for m in group.members for tp in m.assignments}
    partitions = sorted({*offsets, *owner})
    ends = await list_offsets(request, partitions, LATEST)
    url = f"{cluster_url(request)}/consumer-groups/{group.group_id}/lags"
    data = []
    for topic, partition in partitions:
        end = ends.get((topic, partition))
        if end is None:
            continue  # a topic the caller may not DESCRIBE, or one deleted since
        current = offsets.get((topic, partition))
        member = owner.get((topic, partition))
        data.append(
            {
                "kind": "KafkaConsumerLag",
                "metadata": {"self": f"{url}/{topic}/partitions/{partition}"},
                "cluster_id": state_of(request).cluster_id,
                "consumer_group_id": group.group_id,
                "topic_name": topic,
                "partition_id": partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": None if current is None else max(0, end - current),
                "consumer_id": member.consumer_id if member else "",
                "client_id": member.client_id if member else "",
                "instance_id": member.instance_id if member else None,
            }
        )
    return group, data


async def lags(request: web.Request) -> web.StreamResponse:
    """Each committed partition's offset, log end offset and lag."""
    check_cluster(request)
    group, data = await _lags(request)
    url = f"{cluster_url(request)}/consumer-groups/{group.group_id}/lags"
    return json_response(listing("KafkaConsumerLagList", url, data))


async def lag_summary(request: web.Request) -> web.StreamResponse:
    """The group's largest and total lag."""
    check_cluster(request)
    group, lags = await _lags(request)
    data = [x for x in lags if x["lag"] is not None]
    worst = max(data, key=lambda x: x["lag"], default=None)
    return json_response(
        {
            "kind": "KafkaConsumerGroupLagSummary",
            "metadata": {
                "self": f"{cluster_url(request)}/consumer-groups/{group.group_id}/lag-summary"
            },
            "cluster_id": state_of(request).cluster_id,
            "consumer_group_id": group.group_id,
            "max_lag": worst["lag"] if worst else 0,
            "total_lag": sum(x["lag"] for x in data),
            "max_lag_topic_name": worst["topic_name"] if worst else None,
            "max_lag_partition_id": worst["partition_id"] if worst else None,
            "max_lag_consumer_id": worst["consumer_id"] if worst else None,
        }
    )


def _target(given: Any) -> tuple[str, int]:
    """The reset's target: ``("timestamp", LATEST|EARLIEST|ms)`` or ``("offset", n)``."""
    if given == "earliest":
        return "timestamp", EARLIEST
    if given == "latest":
        return "timestamp", LATEST
    if isinstance(given, dict) and len(given) == 1:
        [(kind, value)] = given.items()
        if (
            kind in ("offset", "timestamp")
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value >= 0
        ):
            return kind, value
    raise bad_request('to: "earliest", "latest", {"offset": N} or {"timestamp": MS}')


async def reset_offsets(request: web.Request) -> web.StreamResponse:
    """Commit new offsets for an empty group (see the module docstring)."""
    who = await caller(request)
    state = state_of(request)
    if not state.settings.console_write_enable:
        raise ApiError(403, "INVALID_REQUEST", READ_ONLY)
    try:
        body = await request.json()
    except ValueError:
        raise bad_request("the body is not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("topic"), str):
        raise bad_request('the body is {"topic": name, "partition"?: n, "to": ...}')
    unknown = set(body) - {"topic", "partition", "to"}
    if unknown:
        raise bad_request(f"unknown fields: {', '.join(sorted(unknown))}")
    kind, value = _target(body.get("to"))
    info = topic_for(request, who, body["topic"])
    partition = body.get("partition")
    if partition is None:
        partitions = list(range(info.partitions))
    elif isinstance(partition, int) and not isinstance(partition, bool):
        partitions = [partition_of(info, partition)]
    else:
        raise bad_request("partition: expected an integer")
    group_id = request.match_info["group"]
    node = await coordinator_of(request, group_id)
    try:
        group: Group | None = await group_of(request, group_id)
    except ApiError as exc:
        if exc.status != 404:
            raise
        group = None  # no such group yet: committing offsets creates it, as Kafka's tool does
    if group is not None and group.members:
        raise ApiError(
            409,
            "NON_EMPTY_GROUP",
            f"group '{group_id}' has {len(group.members)} active member(s): offsets can only "
            "be reset while the group is empty (stop its consumers first)",
        )
    pairs = [(info.name, p) for p in partitions]
    starts = await list_offsets(request, pairs, EARLIEST)
    ends = await list_offsets(request, pairs, LATEST)
    if kind == "offset":
        targets = {tp: min(max(value, starts.get(tp, 0)), ends.get(tp, value)) for tp in pairs}
    else:
        found = await list_offsets(request, pairs, value)
        # A timestamp after every record: the log end, as kafka-consumer-groups does.
        targets = {tp: found[tp] if found.get(tp, -1) >= 0 else ends.get(tp, 0) for tp in pairs}
    commit = {
        "group_id": group_id,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": info.name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": targets[(info.name, p)],
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in partitions
                ],
            }
        ],
    }
    answer = await ask(request, ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_VERSION, commit, node_id=node)
    for topic in answer["topics"]:
        for part in topic["partitions"]:
            if part["error_code"] != 0:
                raise refused(part["error_code"], None, f"committing to group '{group_id}'")
    return json_response(
        {
            "offsets": [
                {"topic": info.name, "partition": p, "offset": targets[(info.name, p)]}
                for p in partitions
            ]
        }
    )


_CLUSTER = Param("cluster_id", "string", "the cluster's id", location="path")
_GROUP = Param("group", "string", "the consumer group's id", location="path")
_GROUP_ITEM = obj(
    consumer_group_id="string",
    is_simple="boolean",
    partition_assignor="string",
    state="string",
    kafka_state="string",
    type="string",
    member_count="integer",
)
_GROUP_ITEM["properties"]["coordinator"] = obj(broker_id="integer")
_CONSUMER_ITEM = obj(consumer_id="string", instance_id="string?", client_id="string", host="string")
_CONSUMER_ITEM["properties"]["assignments"] = {
    "type": "array",
    "items": obj(topic_name="string", partition_id="integer"),
}
_LAG_ITEM = obj(
    topic_name="string",
    partition_id="integer",
    current_offset="integer?",
    log_end_offset="integer",
    lag="integer?",
    consumer_id="string",
    client_id="string",
)
_GROUP_PATH = "/v3/clusters/{cluster_id}/consumer-groups/{group}"

ROUTES = (
    Route(
        "GET",
        "/v3/clusters/{cluster_id}/consumer-groups",
        list_groups,
        "listConsumerGroups",
        "The consumer groups (classic and KIP-848) the caller may DESCRIBE",
        params=(_CLUSTER,),
        response=list_schema(_GROUP_ITEM),
        errors=(401, 404, 503),
    ),
    Route(
        "GET",
        _GROUP_PATH,
        one_group,
        "getConsumerGroup",
        "One consumer group (DESCRIBE on the group)",
        params=(_CLUSTER, _GROUP),
        response=_GROUP_ITEM,
        errors=(401, 403, 404, 503),
    ),
    Route(
        "GET",
        f"{_GROUP_PATH}/consumers",
        consumers,
        "listConsumers",
        "A consumer group's members and their partitions",
        params=(_CLUSTER, _GROUP),
        response=list_schema(_CONSUMER_ITEM),
        errors=(401, 403, 404, 503),
    ),
    Route(
        "GET",
        f"{_GROUP_PATH}/lags",
        lags,
        "listConsumerLags",
        "A consumer group's offsets, log end offsets and lags (null: assigned, not committed)",
        params=(_CLUSTER, _GROUP),
        response=list_schema(_LAG_ITEM),
        errors=(401, 403, 404, 503),
    ),
    Route(
        "GET",
        f"{_GROUP_PATH}/lag-summary",
        lag_summary,
        "getConsumerGroupLagSummary",
        "A consumer group's largest and total lag",
        params=(_CLUSTER, _GROUP),
        response=obj(
            max_lag="integer",
            total_lag="integer",
            max_lag_topic_name="string?",
            max_lag_partition_id="integer?",
        ),
        errors=(401, 403, 404, 503),
    ),
    Route(
        "POST",
        "/v1/groups/{group}/offsets/reset",
        reset_offsets,
        "resetGroupOffsets",
        "Reset an empty group's offsets of a topic (console.write.enable=true only)",
        params=(_GROUP,),
        response={
            "type": "object",
            "properties": {
                "offsets": {
                    "type": "array",
                    "items": obj(topic="string", partition="integer", offset="integer"),
                }
            },
        },
        errors=(400, 401, 403, 404, 409, 503),
    ),
)
