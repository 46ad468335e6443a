"""Consumer group coordination and committed offsets, by version.

Declarative tables in seglog's own form (see ``seglog.protocol.schema``), written
from the message specifications of Apache Kafka (Apache-2.0). Field names are
snake_case; version ranges are inclusive.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

FIND_COORDINATOR = Api(
    10,
    "FindCoordinator",
    versions=(0, 6),
    flexible=3,
    request=(
        F("key", "string", (0, 3)),
        F("key_type", "int8", (1, 6)),
        F("coordinator_keys", "[]string", (4, 6)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 6)),
        F("error_code", "int16", (0, 3)),
        F("error_message", "string", (1, 3), nullable=(1, 3)),
        F("node_id", "int32", (0, 3)),
        F("host", "string", (0, 3)),
        F("port", "int32", (0, 3)),
        F(
            "coordinators",
            "[]struct",
            (4, 6),
            fields=(
                F("key", "string", (4, 6)),
                F("node_id", "int32", (4, 6)),
                F("host", "string", (4, 6)),
                F("port", "int32", (4, 6)),
                F("error_code", "int16", (4, 6)),
                F("error_message", "string", (4, 6), nullable=(4, 6)),
            ),
        ),
    ),
)


JOIN_GROUP = Api(
    11,
    "JoinGroup",
    versions=(0, 9),
    flexible=6,
    request=(
        F("group_id", "string", (0, 9)),
        F("session_timeout_ms", "int32", (0, 9)),
        F("rebalance_timeout_ms", "int32", (1, 9), default=-1),
        F("member_id", "string", (0, 9)),
        F("group_instance_id", "string", (5, 9), nullable=(5, 9)),
        F("protocol_type", "string", (0, 9)),
        F(
            "protocols",
            "[]struct",
            (0, 9),
            fields=(
                F("name", "string", (0, 9)),
                F("metadata", "bytes", (0, 9)),
            ),
        ),
        F("reason", "string", (8, 9), nullable=(8, 9)),
    ),
    response=(
        F("throttle_time_ms", "int32", (2, 9)),
        F("error_code", "int16", (0, 9)),
        F("generation_id", "int32", (0, 9), default=-1),
        F("protocol_type", "string", (7, 9), nullable=(7, 9)),
        F("protocol_name", "string", (0, 9), nullable=(7, 9)),
        F("leader", "string", (0, 9)),
        F("skip_assignment", "bool", (9, 9)),
        F("member_id", "string", (0, 9)),
        F(
            "members",
            "[]struct",
            (0, 9),
            fields=(
                F("member_id", "string", (0, 9)),
                F("group_instance_id", "string", (5, 9), nullable=(5, 9)),
                F("metadata", "bytes", (0, 9)),
            ),
        ),
    ),
)


SYNC_GROUP = Api(
    14,
    "SyncGroup",
    versions=(0, 5),
    flexible=4,
    request=(
        F("group_id", "string", (0, 5)),
        F("generation_id", "int32", (0, 5)),
        F("member_id", "string", (0, 5)),
        F("group_instance_id", "string", (3, 5), nullable=(3, 5)),
        F("protocol_type", "string", (5, 5), nullable=(5, 5)),
        F("protocol_name", "string", (5, 5), nullable=(5, 5)),
        F(
            "assignments",
            "[]struct",
            (0, 5),
            fields=(
                F("member_id", "string", (0, 5)),
                F("assignment", "bytes", (0, 5)),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 5)),
        F("error_code", "int16", (0, 5)),
        F("protocol_type", "string", (5, 5), nullable=(5, 5)),
        F("protocol_name", "string", (5, 5), nullable=(5, 5)),
        F("assignment", "bytes", (0, 5)),
    ),
)


HEARTBEAT = Api(
    12,
    "Heartbeat",
    versions=(0, 4),
    flexible=4,
    request=(
        F("group_id", "string", (0, 4)),
        F("generation_id", "int32", (0, 4)),
        F("member_id", "string", (0, 4)),
        F("group_instance_id", "string", (3, 4), nullable=(3, 4)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 4)),
        F("error_code", "int16", (0, 4)),
    ),
)


LEAVE_GROUP = Api(
    13,
    "LeaveGroup",
    versions=(0, 5),
    flexible=4,
    request=(
        F("group_id", "string", (0, 5)),
        F("member_id", "string", (0, 2)),
        F(
            "members",
            "[]struct",
            (3, 5),
            fields=(
                F("member_id", "string", (3, 5)),
                F("group_instance_id", "string", (3, 5), nullable=(3, 5)),
                F("reason", "string", (5, 5), nullable=(5, 5)),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 5)),
        F("error_code", "int16", (0, 5)),
        F(
            "members",
            "[]struct",
            (3, 5),
            fields=(
                F("member_id", "string", (3, 5)),
                F("group_instance_id", "string", (3, 5), nullable=(3, 5)),
                F("error_code", "int16", (3, 5)),
            ),
        ),
    ),
)


OFFSET_COMMIT = Api(
    8,
    "OffsetCommit",
    versions=(0, 9),
    flexible=8,
    request=(
        F("group_id", "string", (0, 9)),
        F("generation_id_or_member_epoch", "int32", (1, 9), default=-1),
        F("member_id", "string", (1, 9)),
        F("group_instance_id", "string", (7, 9), nullable=(7, 9)),
        F("retention_time_ms", "int64", (2, 4), default=-1),
        F(
            "topics",
            "[]struct",
            (0, 9),
            fields=(
                F("name", "string", (0, 9)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 9),
                    fields=(
                        F("partition_index", "int32", (0, 9)),
                        F("committed_offset", "int64", (0, 9)),
                        F("committed_leader_epoch", "int32", (6, 9), default=-1),
                        F("commit_timestamp", "int64", (1, 1), default=-1),
                        F("committed_metadata", "string", (0, 9), nullable=(0, 9)),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (3, 9)),
        F(
            "topics",
            "[]struct",
            (0, 9),
            fields=(
                F("name", "string", (0, 9)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 9),
                    fields=(
                        F("partition_index", "int32", (0, 9)),
                        F("error_code", "int16", (0, 9)),
                    ),
                ),
            ),
        ),
    ),
)


OFFSET_FETCH = Api(
    9,
    "OffsetFetch",
    versions=(0, 9),
    flexible=6,
    request=(
        F("group_id", "string", (0, 7)),
        F(
            "topics",
            "[]struct",
            (0, 7),
            nullable=(2, 7),
            fields=(
                F("name", "string", (0, 7)),
                F("partition_indexes", "[]int32", (0, 7)),
            ),
        ),
        F(
            "groups",
            "[]struct",
            (8, 9),
            fields=(
                F("group_id", "string", (8, 9)),
                F("member_id", "string", (9, 9), nullable=(9, 9)),
                F("member_epoch", "int32", (9, 9), default=-1),
                F(
                    "topics",
                    "[]struct",
                    (8, 9),
                    nullable=(8, 9),
                    fields=(
                        F("name", "string", (8, 9)),
                        F("partition_indexes", "[]int32", (8, 9)),
                    ),
                ),
            ),
        ),
        F("require_stable", "bool", (7, 9)),
    ),
    response=(
        F("throttle_time_ms", "int32", (3, 9)),
        F(
            "topics",
            "[]struct",
            (0, 7),
            fields=(
                F("name", "string", (0, 7)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 7),
                    fields=(
                        F("partition_index", "int32", (0, 7)),
                        F("committed_offset", "int64", (0, 7)),
                        F("committed_leader_epoch", "int32", (5, 7), default=-1),
                        F("metadata", "string", (0, 7), nullable=(0, 7)),
                        F("error_code", "int16", (0, 7)),
                    ),
                ),
            ),
        ),
        F("error_code", "int16", (2, 7)),
        F(
            "groups",
            "[]struct",
            (8, 9),
            fields=(
                F("group_id", "string", (8, 9)),
                F(
                    "topics",
                    "[]struct",
                    (8, 9),
                    fields=(
                        F("name", "string", (8, 9)),
                        F(
                            "partitions",
                            "[]struct",
                            (8, 9),
                            fields=(
                                F("partition_index", "int32", (8, 9)),
                                F("committed_offset", "int64", (8, 9)),
                                F("committed_leader_epoch", "int32", (8, 9), default=-1),
                                F("metadata", "string", (8, 9), nullable=(8, 9)),
                                F("error_code", "int16", (8, 9)),
                            ),
                        ),
                    ),
                ),
                F("error_code", "int16", (8, 9)),
            ),
        ),
    ),
)


LIST_GROUPS = Api(
    16,
    "ListGroups",
    versions=(0, 5),
    flexible=3,
    request=(
        F("states_filter", "[]string", (4, 5)),
        F("types_filter", "[]string", (5, 5)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 5)),
        F("error_code", "int16", (0, 5)),
        F(
            "groups",
            "[]struct",
            (0, 5),
            fields=(
                F("group_id", "string", (0, 5)),
                F("protocol_type", "string", (0, 5)),
                F("group_state", "string", (4, 5)),
                F("group_type", "string", (5, 5)),
            ),
        ),
    ),
)


DESCRIBE_GROUPS = Api(
    15,
    "DescribeGroups",
    versions=(0, 5),
    flexible=5,
    request=(
        F("groups", "[]string", (0, 5)),
        F("include_authorized_operations", "bool", (3, 5)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 5)),
        F(
            "groups",
            "[]struct",
            (0, 5),
            fields=(
                F("error_code", "int16", (0, 5)),
                F("group_id", "string", (0, 5)),
                F("group_state", "string", (0, 5)),
                F("protocol_type", "string", (0, 5)),
                F("protocol_data", "string", (0, 5)),
                F(
                    "members",
                    "[]struct",
                    (0, 5),
                    fields=(
                        F("member_id", "string", (0, 5)),
                        F("group_instance_id", "string", (4, 5), nullable=(4, 5)),
                        F("client_id", "string", (0, 5)),
                        F("client_host", "string", (0, 5)),
                        F("member_metadata", "bytes", (0, 5)),
                        F("member_assignment", "bytes", (0, 5)),
                    ),
                ),
                F("authorized_operations", "int32", (3, 5), default=-2147483648),
            ),
        ),
    ),
)


DELETE_GROUPS = Api(
    42,
    "DeleteGroups",
    versions=(0, 2),
    flexible=2,
    request=(F("groups_names", "[]string", (0, 2)),),
    response=(
        F("throttle_time_ms", "int32", (0, 2)),
        F(
            "results",
            "[]struct",
            (0, 2),
            fields=(
                F("group_id", "string", (0, 2)),
                F("error_code", "int16", (0, 2)),
            ),
        ),
    ),
)


OFFSET_DELETE = Api(
    47,
    "OffsetDelete",
    versions=(0, 0),
    flexible=None,
    request=(
        F("group_id", "string", (0, 0)),
        F(
            "topics",
            "[]struct",
            (0, 0),
            fields=(
                F("name", "string", (0, 0)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 0),
                    fields=(F("partition_index", "int32", (0, 0)),),
                ),
            ),
        ),
    ),
    response=(
        F("error_code", "int16", (0, 0)),
        F("throttle_time_ms", "int32", (0, 0)),
        F(
            "topics",
            "[]struct",
            (0, 0),
            fields=(
                F("name", "string", (0, 0)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 0),
                    fields=(
                        F("partition_index", "int32", (0, 0)),
                        F("error_code", "int16", (0, 0)),
                    ),
                ),
            ),
        ),
    ),
)
