"""Share group membership (KIP-932) on a real broker: raw ShareGroupHeartbeat and
ShareGroupDescribe, the group APIs on a share group, a restart, ApiVersions with share
groups disabled, and confluent-kafka's ShareConsumer joining."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.protocol import error_codes
from seglog.protocol.api_keys import SHARE_APIS, ApiKey
from tests.broker.conftest import BrokerProcess
from tests.broker.test_dynamic_configs import _request
from tests.broker.test_group_configs import SET, _incremental

WAIT = 60.0
NONE = 0
INVALID_REQUEST = error_codes.code_for("INVALID_REQUEST")
UNKNOWN_MEMBER_ID = error_codes.code_for("UNKNOWN_MEMBER_ID")
FENCED_MEMBER_EPOCH = error_codes.code_for("FENCED_MEMBER_EPOCH")
GROUP_ID_NOT_FOUND = error_codes.code_for("GROUP_ID_NOT_FOUND")
GROUP_MAX_SIZE_REACHED = error_codes.code_for("GROUP_MAX_SIZE_REACHED")
NON_EMPTY_GROUP = error_codes.code_for("NON_EMPTY_GROUP")
INCONSISTENT_GROUP_PROTOCOL = error_codes.code_for("INCONSISTENT_GROUP_PROTOCOL")
UNSUPPORTED_VERSION = error_codes.code_for("UNSUPPORTED_VERSION")


def _create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=WAIT)


def _heartbeat(
    broker: BrokerProcess,
    group: str,
    member: str,
    epoch: int,
    topics: list[str] | None = None,
) -> dict[str, Any]:
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": topics,
    }
    answer: dict[str, Any] = _request(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
    return answer


def _join(broker: BrokerProcess, group: str, topics: list[str]) -> tuple[str, dict[str, Any]]:
    member = str(uuid.uuid4())
    answer = _heartbeat(broker, group, member, 0, topics)
    assert answer["error_code"] == NONE, answer
    return member, answer


def _describe(broker: BrokerProcess, group: str) -> dict[str, Any]:
    body = {"group_ids": [group], "include_authorized_operations": False}
    described: dict[str, Any] = _request(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, body)["groups"][0]
    return described


def _wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _unique(topic: str, suffix: str) -> str:
    return f"{topic}-{suffix}"


# --------------------------------------------------------------- heartbeat


def test_join_heartbeat_leave_and_describe(broker: BrokerProcess, topic: str) -> None:
    _create_topic(broker, topic, 3)
    group = _unique(topic, "g")
    a, first = _join(broker, group, [topic])
    assert (first["member_id"], first["member_epoch"]) == (a, 1)
    assert first["heartbeat_interval_ms"] == 5000
    [assigned] = first["assignment"]["topic_partitions"]
    assert sorted(assigned["partitions"]) == [0, 1, 2]
    b, second = _join(broker, group, [topic])
    assert second["member_epoch"] == 2
    again = _heartbeat(broker, group, a, 1)
    assert (again["error_code"], again["member_epoch"]) == (NONE, 2)
    a_parts = set(again["assignment"]["topic_partitions"][0]["partitions"])
    b_parts = set(second["assignment"]["topic_partitions"][0]["partitions"])
    assert a_parts | b_parts == {0, 1, 2} and not a_parts & b_parts
    described = _describe(broker, group)
    assert described["error_code"] == NONE, described
    assert (described["group_state"], described["group_epoch"]) == ("Stable", 2)
    assert (described["assignment_epoch"], described["assignor_name"]) == (2, "simple")
    members = {m["member_id"]: m for m in described["members"]}
    assert set(members) == {a, b}
    assert members[a]["subscribed_topic_names"] == [topic]
    assert members[a]["client_id"] == "dynamic-configs-test"
    [tp] = members[a]["assignment"]["topic_partitions"]
    assert tp["topic_name"] == topic and set(tp["partitions"]) == a_parts
    left = _heartbeat(broker, group, b, -1)
    assert (left["error_code"], left["member_epoch"]) == (NONE, -1)
    assert _heartbeat(broker, group, b, 2)["error_code"] == UNKNOWN_MEMBER_ID
    assert len(_describe(broker, group)["members"]) == 1


def test_heartbeat_errors(broker: BrokerProcess, topic: str) -> None:
    _create_topic(broker, topic, 1)
    group = _unique(topic, "g")
    empty = _heartbeat(broker, group, "", 0, [topic])
    assert (empty["error_code"], empty["error_message"]) == (
        INVALID_REQUEST,
        "MemberId can't be empty.",
    )
    no_topics = _heartbeat(broker, group, str(uuid.uuid4()), 0, None)
    assert no_topics["error_code"] == INVALID_REQUEST
    assert no_topics["error_message"] == "SubscribedTopicNames must be set in first request."
    assert _heartbeat(broker, group, str(uuid.uuid4()), 3)["error_code"] == GROUP_ID_NOT_FOUND
    member, _ = _join(broker, group, [topic])
    unknown = _heartbeat(broker, group, str(uuid.uuid4()), 1)
    assert unknown["error_code"] == UNKNOWN_MEMBER_ID
    fenced = _heartbeat(broker, group, member, 5)
    assert fenced["error_code"] == FENCED_MEMBER_EPOCH, fenced
    # A consumer group's id is not a share group's, and the other way round.
    consumer_group = _unique(topic, "consumer")
    body = {
        "group_id": consumer_group,
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [topic],
        "topic_partitions": [],
    }
    assert _request(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)["error_code"] == NONE
    refused = _heartbeat(broker, consumer_group, str(uuid.uuid4()), 0, [topic])
    assert (refused["error_code"], refused["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        f"Group {consumer_group} is not a share group.",
    )
    body["group_id"] = group
    refused = _request(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert (refused["error_code"], refused["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group.",
    )
    unknown_group = _describe(broker, _unique(topic, "nothing"))
    assert unknown_group["error_code"] == GROUP_ID_NOT_FOUND


def test_group_config_sets_the_heartbeat_interval(broker: BrokerProcess, topic: str) -> None:
    _create_topic(broker, topic, 1)
    group = _unique(topic, "g")
    assert _incremental(broker, group, [("share.heartbeat.interval.ms", SET, "7000")]) == (
        NONE,
        None,
    )
    member, answer = _join(broker, group, [topic])
    assert answer["heartbeat_interval_ms"] == 7000
    assert _heartbeat(broker, group, member, 1)["heartbeat_interval_ms"] == 7000


def test_ten_members_on_one_partition_all_get_it(broker: BrokerProcess, topic: str) -> None:
    _create_topic(broker, topic, 1)
    group = _unique(topic, "g")
    members = [_join(broker, group, [topic])[0] for _ in range(10)]
    for epoch, member in enumerate(members, start=1):
        answer = _heartbeat(broker, group, member, epoch, [topic])
        assert answer["error_code"] == NONE, answer
        assert answer["assignment"]["topic_partitions"][0]["partitions"] == [0]
    described = _describe(broker, group)
    assert len(described["members"]) == 10
    for m in described["members"]:
        assert m["assignment"]["topic_partitions"][0]["partitions"] == [0], m


# ------------------------------------------------------ the other group APIs


def test_group_apis_on_a_share_group(broker: BrokerProcess, topic: str) -> None:
    _create_topic(broker, topic, 2)
    group = _unique(topic, "g")
    member, _ = _join(broker, group, [topic])
    listed = _request(broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    mine = [g for g in listed["groups"] if g["group_id"] == group]
    assert mine == [
        {
            "group_id": group,
            "protocol_type": "share",
            "group_state": "Stable",
            "group_type": "share",
        }
    ]
    only_share = _request(
        broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}
    )
    assert all(g["group_type"] == "share" for g in only_share["groups"])
    assert group in {g["group_id"] for g in only_share["groups"]}
    consumers = _request(
        broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]}
    )
    assert group not in {g["group_id"] for g in consumers["groups"]}
    empty_only = _request(
        broker, ApiKey.LIST_GROUPS, 5, {"states_filter": ["Empty"], "types_filter": ["share"]}
    )
    assert group not in {g["group_id"] for g in empty_only["groups"]}
    # DescribeGroups (the classic view) reports it Dead, as Kafka before v6 does.
    [classic] = _request(broker, ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})["groups"]
    assert (classic["error_code"], classic["group_state"], classic["members"]) == (
        NONE,
        "Dead",
        [],
    )
    # ... and from v6 on not found (KIP-1043), as Kafka's message says: not a classic group.
    [classic] = _request(broker, ApiKey.DESCRIBE_GROUPS, 6, {"groups": [group]})["groups"]
    assert (classic["error_code"], classic["error_message"]) == (
        error_codes.code_for("GROUP_ID_NOT_FOUND"),
        f"Group {group} is not a classic group.",
    )
    [consumer] = _request(
        broker,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        {"group_ids": [group], "include_authorized_operations": False},
    )["groups"]
    assert (consumer["error_code"], consumer["error_message"]) == (
        GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group.",
    )
    commit = _request(
        broker,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
    )
    assert commit["topics"][0]["partitions"][0]["error_code"] == GROUP_ID_NOT_FOUND
    fetched = _request(
        broker,
        ApiKey.OFFSET_FETCH,
        8,
        {"groups": [{"group_id": group, "topics": None}], "require_stable": False},
    )
    assert fetched["groups"][0]["error_code"] == GROUP_ID_NOT_FOUND, fetched
    join = _request(
        broker,
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert join["error_code"] == INCONSISTENT_GROUP_PROTOCOL
    deleted = _request(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    assert deleted["results"] == [{"group_id": group, "error_code": NON_EMPTY_GROUP}]
    assert _heartbeat(broker, group, member, -1)["error_code"] == NONE
    listed = _request(broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [g["group_state"] for g in listed["groups"] if g["group_id"] == group] == ["Empty"]
    deleted = _request(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    assert deleted["results"] == [{"group_id": group, "error_code": NONE}]
    assert _describe(broker, group)["error_code"] == GROUP_ID_NOT_FOUND
    gone = _request(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    assert gone["results"] == [{"group_id": group, "error_code": GROUP_ID_NOT_FOUND}]


# --------------------------------------------------- private brokers


def test_session_timeout_max_size_and_restart(make_broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(
        **{
            "group.share.min.session.timeout.ms": "1000",
            # Long enough that no member expires while ten join and the broker restarts,
            # on a loaded machine; the expiry at the end waits for it.
            "group.share.session.timeout.ms": "15000",
            "group.share.max.size": "10",
        }
    )
    _create_topic(broker, topic, 4)
    group = _unique(topic, "g")
    members = [_join(broker, group, [topic])[0] for _ in range(10)]
    full = _heartbeat(broker, group, str(uuid.uuid4()), 0, [topic])
    assert (full["error_code"], full["error_message"]) == (
        GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 10 members.",
    )
    # The group comes back after a restart, with its members and epochs.
    before = _describe(broker, group)
    assert broker.stop() == 0
    broker.start()
    after = _wait_for(
        lambda: (d := _describe(broker, group))["error_code"] == NONE and d, "the group to load"
    )
    assert (after["group_epoch"], after["assignment_epoch"]) == (
        before["group_epoch"],
        before["assignment_epoch"],
    )
    assert sorted(m["member_id"] for m in after["members"]) == sorted(members)
    # One member keeps heartbeating; the others expire after the session timeout.
    keeper = members[0]
    epoch = next(m["member_epoch"] for m in after["members"] if m["member_id"] == keeper)

    def only_keeper() -> bool:
        nonlocal epoch
        answer = _heartbeat(broker, group, keeper, epoch)
        assert answer["error_code"] == NONE, answer
        epoch = answer["member_epoch"]
        return [m["member_id"] for m in _describe(broker, group)["members"]] == [keeper]

    _wait_for(only_keeper, "the other members to time out")
    final = _heartbeat(broker, group, keeper, epoch, [topic])
    assert sorted(final["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1, 2, 3]


def test_share_groups_disabled(make_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = make_broker(**{"group.share.enable": "false"})
    versions = _request(broker, ApiKey.API_VERSIONS, 3, {})
    advertised = {entry["api_key"] for entry in versions["api_keys"]}
    assert advertised and not advertised & SHARE_APIS
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT in advertised
    answer = _heartbeat(broker, "g", str(uuid.uuid4()), 0, ["t"])
    assert answer["error_code"] == UNSUPPORTED_VERSION
    assert _describe(broker, "g")["error_code"] == UNSUPPORTED_VERSION


def test_share_groups_advertised_by_default(broker: BrokerProcess) -> None:
    versions = _request(broker, ApiKey.API_VERSIONS, 3, {})
    ranges = {e["api_key"]: (e["min_version"], e["max_version"]) for e in versions["api_keys"]}
    assert ranges[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
    assert ranges[ApiKey.SHARE_GROUP_DESCRIBE] == (1, 1)


# ---------------------------------------------------------- a real client


def test_confluent_share_consumer_joins(broker: BrokerProcess, topic: str) -> None:
    share_consumer = pytest.importorskip("confluent_kafka").ShareConsumer
    _create_topic(broker, topic, 2)
    group = _unique(topic, "g")
    consumer = share_consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])

        def assigned() -> Any:
            consumer.poll(0.2)
            described = _describe(broker, group)
            if described["error_code"] != NONE or not described["members"]:
                return None
            [member] = described["members"]
            parts = member["assignment"]["topic_partitions"]
            return member if parts else None

        member = _wait_for(assigned, "the share consumer to be assigned")
        [tp] = member["assignment"]["topic_partitions"]
        assert tp["topic_name"] == topic and sorted(tp["partitions"]) == [0, 1]
        assert member["subscribed_topic_names"] == [topic]
    finally:
        consumer.close()
