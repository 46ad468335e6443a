"""Consumer groups: coordinators, membership, assignments and committed offsets.

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete and the
KIP-848 ConsumerGroupHeartbeat (v0-1; v1 adds the regex subscription, and
librdkafka 2.10+ needs it) and ConsumerGroupDescribe (v0).
``bytes`` fields (protocol metadata, assignments) decode to ``bytes``: they are
small and the coordinator keeps them beyond the request.

Notable version changes: FindCoordinator v4 batches keys (``coordinator_keys``
/ ``coordinators``); JoinGroup v4 needs a second join with the member id
assigned (MEMBER_ID_REQUIRED); v5 adds static membership (group_instance_id);
LeaveGroup v3 leaves in batches (``members``); OffsetFetch v8 asks for several
groups at once (``groups``).
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

FIND_COORDINATOR = Api(
    10,
    "FindCoordinator",
    "0-6",
    flexible=3,
    request=(
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+"),
        F("coordinator_keys", "[]string", "4+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3", ignorable=True),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F(
            "coordinators",
            "[]struct",
            "4+",
            fields=(
                F("key", "string", "4+"),
                F("node_id", "int32", "4+"),
                F("host", "string", "4+"),
                F("port", "int32", "4+"),
                F("error_code", "int16", "4+"),
                F("error_message", "string", "4+", nullable="4+", ignorable=True),
            ),
        ),
    ),
)

JOIN_GROUP = Api(
    11,
    "JoinGroup",
    "0-9",
    flexible=6,
    request=(
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1, ignorable=True),
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F(
            "protocols",
            "[]struct",
            fields=(
                F("name", "string"),
                F("metadata", "bytes"),
            ),
        ),
        F("reason", "string", "8+", nullable="8+", default=None, ignorable=True),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None, ignorable=True),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+"),
        F("member_id", "string"),
        F(
            "members",
            "[]struct",
            fields=(
                F("member_id", "string"),
                F("group_instance_id", "string", "5+", nullable="5+", default=None, ignorable=True),
                F("metadata", "bytes"),
            ),
        ),
    ),
)

SYNC_GROUP = Api(
    14,
    "SyncGroup",
    "0-5",
    flexible=4,
    request=(
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        F(
            "assignments",
            "[]struct",
            fields=(
                F("member_id", "string"),
                F("assignment", "bytes"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("protocol_name", "string", "5+", nullable="5+", default=None, ignorable=True),
        F("assignment", "bytes"),
    ),
)

HEARTBEAT = Api(
    12,
    "Heartbeat",
    "0-4",
    flexible=4,
    request=(
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
    ),
)

LEAVE_GROUP = Api(
    13,
    "LeaveGroup",
    "0-5",
    flexible=4,
    request=(
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F(
            "members",
            "[]struct",
            "3+",
            fields=(
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+", default=None),
                F("reason", "string", "5+", nullable="5+", default=None, ignorable=True),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F(
            "members",
            "[]struct",
            "3+",
            fields=(
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+"),
                F("error_code", "int16", "3+"),
            ),
        ),
    ),
)

OFFSET_COMMIT = Api(
    8,
    "OffsetCommit",
    "2-9",
    flexible=8,
    request=(
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1, ignorable=True),
        F("member_id", "string", "1+", ignorable=True),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1, ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("committed_offset", "int64"),
                        F("committed_leader_epoch", "int32", "6+", default=-1, ignorable=True),
                        F("committed_metadata", "string", nullable="0+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                    ),
                ),
            ),
        ),
    ),
)

OFFSET_FETCH = Api(
    9,
    "OffsetFetch",
    "1-9",
    flexible=6,
    request=(
        F("group_id", "string", "0-7"),
        F(
            "topics",
            "[]struct",
            "0-7",
            nullable="2-7",
            fields=(
                F("name", "string", "0-7"),
                F("partition_indexes", "[]int32", "0-7"),
            ),
        ),
        F(
            "groups",
            "[]struct",
            "8+",
            fields=(
                F("group_id", "string", "8+"),
                F("member_id", "string", "9+", nullable="9+", default=None, ignorable=True),
                F("member_epoch", "int32", "9+", default=-1, ignorable=True),
                F(
                    "topics",
                    "[]struct",
                    "8+",
                    nullable="8+",
                    fields=(
                        F("name", "string", "8+"),
                        F("partition_indexes", "[]int32", "8+"),
                    ),
                ),
            ),
        ),
        F("require_stable", "bool", "7+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "topics",
            "[]struct",
            "0-7",
            fields=(
                F("name", "string", "0-7"),
                F(
                    "partitions",
                    "[]struct",
                    "0-7",
                    fields=(
                        F("partition_index", "int32", "0-7"),
                        F("committed_offset", "int64", "0-7", failed=-1),
                        F("committed_leader_epoch", "int32", "5-7", default=-1, ignorable=True),
                        F("metadata", "string", "0-7", nullable="0-7"),
                        F("error_code", "int16", "0-7"),
                    ),
                ),
            ),
        ),
        F("error_code", "int16", "2-7", ignorable=True),
        F(
            "groups",
            "[]struct",
            "8+",
            fields=(
                F("group_id", "string", "8+"),
                F(
                    "topics",
                    "[]struct",
                    "8+",
                    fields=(
                        F("name", "string", "8+"),
                        F(
                            "partitions",
                            "[]struct",
                            "8+",
                            fields=(
                                F("partition_index", "int32", "8+"),
                                F("committed_offset", "int64", "8+", failed=-1),
                                F(
                                    "committed_leader_epoch",
                                    "int32",
                                    "8+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                F("metadata", "string", "8+", nullable="8+"),
                                F("error_code", "int16", "8+"),
                            ),
                        ),
                    ),
                ),
                F("error_code", "int16", "8+"),
            ),
        ),
    ),
)

LIST_GROUPS = Api(
    16,
    "ListGroups",
    "0-5",
    flexible=3,
    request=(
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16"),
        F(
            "groups",
            "[]struct",
            fields=(
                F("group_id", "string"),
                F("protocol_type", "string"),
                F("group_state", "string", "4+", ignorable=True),
                F("group_type", "string", "5+", ignorable=True),
            ),
        ),
    ),
)

DESCRIBE_GROUPS = Api(
    15,
    "DescribeGroups",
    "0-6",
    flexible=5,
    request=(
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "groups",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", "6+", nullable="6+", default=None),
                F("group_id", "string"),
                F("group_state", "string"),
                F("protocol_type", "string"),
                F("protocol_data", "string"),
                F(
                    "members",
                    "[]struct",
                    fields=(
                        F("member_id", "string"),
                        F(
                            "group_instance_id",
                            "string",
                            "4+",
                            nullable="4+",
                            default=None,
                            ignorable=True,
                        ),
                        F("client_id", "string"),
                        F("client_host", "string"),
                        F("member_metadata", "bytes"),
                        F("member_assignment", "bytes"),
                    ),
                ),
                F("authorized_operations", "int32", "3+", default=-0x80000000),
            ),
        ),
    ),
)

DELETE_GROUPS = Api(
    42,
    "DeleteGroups",
    "0-2",
    flexible=2,
    request=(F("groups_names", "[]string"),),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("group_id", "string"),
                F("error_code", "int16"),
            ),
        ),
    ),
)

OFFSET_DELETE = Api(
    47,
    "OffsetDelete",
    "0",
    flexible=None,
    request=(
        F("group_id", "string"),
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F("partitions", "[]struct", fields=(F("partition_index", "int32"),)),
            ),
        ),
    ),
    response=(
        F("error_code", "int16"),
        F("throttle_time_ms", "int32", ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                    ),
                ),
            ),
        ),
    ),
)

CONSUMER_GROUP_HEARTBEAT = Api(
    68,
    "ConsumerGroupHeartbeat",
    "0-1",
    flexible=0,
    request=(
        F("group_id", "string"),
        F("member_id", "string"),
        F("member_epoch", "int32"),
        F("instance_id", "string", nullable="0+", default=None),
        F("rack_id", "string", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", default=-1),
        F("subscribed_topic_names", "[]string", nullable="0+", default=None),
        F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        F("server_assignor", "string", nullable="0+", default=None),
        F(
            "topic_partitions",
            "[]struct",
            nullable="0+",
            default=None,
            fields=(
                F("topic_id", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("member_id", "string", nullable="0+", default=None),
        F("member_epoch", "int32"),
        F("heartbeat_interval_ms", "int32"),
        F(
            "assignment",
            "struct",
            nullable="0+",
            default=None,
            fields=(
                F(
                    "topic_partitions",
                    "[]struct",
                    fields=(
                        F("topic_id", "uuid"),
                        F("partitions", "[]int32"),
                    ),
                ),
            ),
        ),
    ),
)


_DESCRIBED_ASSIGNMENT = (
    F(
        "topic_partitions",
        "[]struct",
        fields=(
            F("topic_id", "uuid"),
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        ),
    ),
)

CONSUMER_GROUP_DESCRIBE = Api(
    69,
    "ConsumerGroupDescribe",
    "0-1",
    flexible=0,
    request=(
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "groups",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
                F("group_id", "string"),
                F("group_state", "string"),
                F("group_epoch", "int32"),
                F("assignment_epoch", "int32"),
                F("assignor_name", "string"),
                F(
                    "members",
                    "[]struct",
                    fields=(
                        F("member_id", "string"),
                        F("instance_id", "string", nullable="0+", default=None),
                        F("rack_id", "string", nullable="0+", default=None),
                        F("member_epoch", "int32"),
                        F("client_id", "string"),
                        F("client_host", "string"),
                        F("subscribed_topic_names", "[]string"),
                        F("subscribed_topic_regex", "string", nullable="0+", default=None),
                        F("assignment", "struct", fields=_DESCRIBED_ASSIGNMENT),
                        F("target_assignment", "struct", fields=_DESCRIBED_ASSIGNMENT),
                        F("member_type", "int8", "1+", default=-1, ignorable=True),
                    ),
                ),
                F("authorized_operations", "int32", default=-(2**31)),
            ),
        ),
    ),
)
