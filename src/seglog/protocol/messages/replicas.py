"""Replica placement and partition state: the cluster tools' APIs.

AlterReplicaLogDirs, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeProducers and DescribeTopicPartitions
(KIP-966), each described from the oldest version Kafka 4 accepts.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

ALTER_REPLICA_LOG_DIRS = Api(
    34,
    "AlterReplicaLogDirs",
    "1-2",
    flexible=2,
    request=(
        F(
            "dirs",
            "[]struct",
            fields=(
                F("path", "string"),
                F(
                    "topics",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F("partitions", "[]int32"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("topic_name", "string"),
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

ELECT_LEADERS = Api(
    43,
    "ElectLeaders",
    "0-2",
    flexible=2,
    request=(
        F("election_type", "int8", "1+"),
        F(
            "topic_partitions",
            "[]struct",
            nullable="0+",
            fields=(
                F("topic", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F("timeout_ms", "int32", default=60000),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "1+"),
        F(
            "replica_election_results",
            "[]struct",
            fields=(
                F("topic", "string"),
                F(
                    "partition_result",
                    "[]struct",
                    fields=(
                        F("partition_id", "int32"),
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    45,
    "AlterPartitionReassignments",
    "0",
    flexible=0,
    request=(
        F("timeout_ms", "int32", default=60000),
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
                        F("replicas", "[]int32", nullable="0+", default=None),
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
                F("name", "string"),
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

LIST_PARTITION_REASSIGNMENTS = Api(
    46,
    "ListPartitionReassignments",
    "0",
    flexible=0,
    request=(
        F("timeout_ms", "int32", default=60000),
        F(
            "topics",
            "[]struct",
            nullable="0+",
            default=None,
            fields=(
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
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
                        F("replicas", "[]int32"),
                        F("adding_replicas", "[]int32"),
                        F("removing_replicas", "[]int32"),
                    ),
                ),
            ),
        ),
    ),
)

DESCRIBE_PRODUCERS = Api(
    61,
    "DescribeProducers",
    "0",
    flexible=0,
    request=(
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
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
                        F("error_message", "string", nullable="0+", default=None),
                        F(
                            "active_producers",
                            "[]struct",
                            fields=(
                                F("producer_id", "int64"),
                                F("producer_epoch", "int32"),
                                F("last_sequence", "int32", default=-1),
                                F("last_timestamp", "int64", default=-1),
                                F("coordinator_epoch", "int32"),
                                F("current_txn_start_offset", "int64", default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

_CURSOR = (
    F("topic_name", "string"),
    F("partition_index", "int32"),
)

DESCRIBE_TOPIC_PARTITIONS = Api(
    75,
    "DescribeTopicPartitions",
    "0",
    flexible=0,
    request=(
        F("topics", "[]struct", fields=(F("name", "string"),)),
        F("response_partition_limit", "int32", default=2000),
        F("cursor", "struct", nullable="0+", default=None, fields=_CURSOR),
    ),
    response=(
        F("throttle_time_ms", "int32", ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("name", "string", nullable="0+"),
                F("topic_id", "uuid"),
                F("is_internal", "bool", default=False, ignorable=True),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("error_code", "int16"),
                        F("partition_index", "int32"),
                        F("leader_id", "int32", failed=-1),
                        F("leader_epoch", "int32", default=-1, ignorable=True),
                        F("replica_nodes", "[]int32"),
                        F("isr_nodes", "[]int32"),
                        F("eligible_leader_replicas", "[]int32", nullable="0+", default=None),
                        F("last_known_elr", "[]int32", nullable="0+", default=None),
                        F("offline_replicas", "[]int32", ignorable=True),
                    ),
                ),
                F("topic_authorized_operations", "int32", default=-0x80000000),
            ),
        ),
        F("next_cursor", "struct", nullable="0+", default=None, fields=_CURSOR),
    ),
)
