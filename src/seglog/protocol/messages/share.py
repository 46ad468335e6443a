"""Share groups (KIP-932, queues): membership, fetching, acknowledging, offsets.

ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets
(91) and DeleteShareGroupOffsets (92), at the versions Kafka 4.2 serves. Version
0 of the first four was Kafka 4.0's early access and was removed in 4.1: v1 is
the first stable version (ShareFetch v1 adds ``max_records`` and
``batch_size`` and drops ``partition_max_bytes``; its response adds
``acquisition_lock_timeout_ms``). Every version is flexible.

An acknowledgement batch names a range of offsets and either one type for the
whole range or one type per offset: 0 gap, 1 accept, 2 release, 3 reject.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

_ACKNOWLEDGEMENT_BATCHES = F(
    "acknowledgement_batches",
    "[]struct",
    fields=(
        F("first_offset", "int64"),
        F("last_offset", "int64"),
        F("acknowledge_types", "[]int8"),
    ),
)

_CURRENT_LEADER = F(
    "current_leader",
    "struct",
    fields=(
        F("leader_id", "int32", default=-1),
        F("leader_epoch", "int32", default=-1),
    ),
)

_NODE_ENDPOINTS = F(
    "node_endpoints",
    "[]struct",
    fields=(
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable="0+", default=None),
    ),
)

SHARE_GROUP_HEARTBEAT = Api(
    76,
    "ShareGroupHeartbeat",
    "1",
    flexible=0,
    request=(
        F("group_id", "string"),
        F("member_id", "string"),
        F("member_epoch", "int32"),
        F("rack_id", "string", nullable="0+", default=None),
        F("subscribed_topic_names", "[]string", nullable="0+", default=None),
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

SHARE_GROUP_DESCRIBE = Api(
    77,
    "ShareGroupDescribe",
    "1",
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
                        F("rack_id", "string", nullable="0+", default=None),
                        F("member_epoch", "int32"),
                        F("client_id", "string"),
                        F("client_host", "string"),
                        F("subscribed_topic_names", "[]string"),
                        F(
                            "assignment",
                            "struct",
                            fields=(
                                F(
                                    "topic_partitions",
                                    "[]struct",
                                    fields=(
                                        F("topic_id", "uuid"),
                                        F("topic_name", "string"),
                                        F("partitions", "[]int32"),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
                F("authorized_operations", "int32", default=-(2**31)),
            ),
        ),
    ),
)

SHARE_FETCH = Api(
    78,
    "ShareFetch",
    "1",
    flexible=0,
    request=(
        F("group_id", "string", nullable="0+", default=None),
        F("member_id", "string", nullable="0+"),
        F("share_session_epoch", "int32"),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", default=0x7FFFFFFF),
        F("max_records", "int32"),
        F("batch_size", "int32"),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic_id", "uuid"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        _ACKNOWLEDGEMENT_BATCHES,
                    ),
                ),
            ),
        ),
        F(
            "forgotten_topics_data",
            "[]struct",
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
        F("acquisition_lock_timeout_ms", "int32"),
        F(
            "responses",
            "[]struct",
            fields=(
                F("topic_id", "uuid"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+", default=None),
                        F("acknowledge_error_code", "int16"),
                        F("acknowledge_error_message", "string", nullable="0+", default=None),
                        _CURRENT_LEADER,
                        F("records", "records"),
                        F(
                            "acquired_records",
                            "[]struct",
                            fields=(
                                F("first_offset", "int64"),
                                F("last_offset", "int64"),
                                F("delivery_count", "int16"),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        _NODE_ENDPOINTS,
    ),
)

SHARE_ACKNOWLEDGE = Api(
    79,
    "ShareAcknowledge",
    "1",
    flexible=0,
    request=(
        F("group_id", "string", nullable="0+", default=None),
        F("member_id", "string", nullable="0+"),
        F("share_session_epoch", "int32"),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic_id", "uuid"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        _ACKNOWLEDGEMENT_BATCHES,
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F(
            "responses",
            "[]struct",
            fields=(
                F("topic_id", "uuid"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+", default=None),
                        _CURRENT_LEADER,
                    ),
                ),
            ),
        ),
        _NODE_ENDPOINTS,
    ),
)

DESCRIBE_SHARE_GROUP_OFFSETS = Api(
    90,
    "DescribeShareGroupOffsets",
    "0",
    flexible=0,
    request=(
        F(
            "groups",
            "[]struct",
            fields=(
                F("group_id", "string"),
                F(
                    "topics",
                    "[]struct",
                    nullable="0+",
                    fields=(
                        F("topic_name", "string"),
                        F("partitions", "[]int32"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "groups",
            "[]struct",
            fields=(
                F("group_id", "string"),
                F(
                    "topics",
                    "[]struct",
                    fields=(
                        F("topic_name", "string"),
                        F("topic_id", "uuid"),
                        F(
                            "partitions",
                            "[]struct",
                            fields=(
                                F("partition_index", "int32"),
                                F("start_offset", "int64"),
                                F("leader_epoch", "int32"),
                                F("error_code", "int16"),
                                F("error_message", "string", nullable="0+", default=None),
                            ),
                        ),
                    ),
                ),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ),
        ),
    ),
)

ALTER_SHARE_GROUP_OFFSETS = Api(
    91,
    "AlterShareGroupOffsets",
    "0",
    flexible=0,
    request=(
        F("group_id", "string"),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic_name", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("start_offset", "int64"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F(
            "responses",
            "[]struct",
            fields=(
                F("topic_name", "string"),
                F("topic_id", "uuid"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)

DELETE_SHARE_GROUP_OFFSETS = Api(
    92,
    "DeleteShareGroupOffsets",
    "0",
    flexible=0,
    request=(
        F("group_id", "string"),
        F("topics", "[]struct", fields=(F("topic_name", "string"),)),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F(
            "responses",
            "[]struct",
            fields=(
                F("topic_name", "string"),
                F("topic_id", "uuid"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ),
        ),
    ),
)
