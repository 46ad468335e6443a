"""Metadata (key 3): brokers, topics, partitions and their leaders.

Request ``topics``: in v0 an empty list means every topic; from v1 null means
every topic and an empty list none. v4 adds allow_auto_topic_creation, v9 is
the first flexible version, v10 adds topic ids, v11 drops the cluster
authorized operations (now DescribeCluster).
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

METADATA = Api(
    3,
    "Metadata",
    "0-12",
    flexible=9,
    request=(
        F(
            "topics",
            "[]struct",
            nullable="1+",
            fields=(
                F("topic_id", "uuid", "10+", ignorable=True),
                F("name", "string", nullable="10+"),
            ),
        ),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+", ignorable=True),
        F(
            "brokers",
            "[]struct",
            fields=(
                F("node_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("rack", "string", "1+", nullable="1+", default=None, ignorable=True),
            ),
        ),
        F("cluster_id", "string", "2+", nullable="2+", default=None, ignorable=True),
        F("controller_id", "int32", "1+", default=-1, ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("name", "string", nullable="12+"),
                F("topic_id", "uuid", "10+", ignorable=True),
                F("is_internal", "bool", "1+", ignorable=True),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("error_code", "int16"),
                        F("partition_index", "int32"),
                        F("leader_id", "int32", failed=-1),
                        F("leader_epoch", "int32", "7+", default=-1, ignorable=True),
                        F("replica_nodes", "[]int32"),
                        F("isr_nodes", "[]int32"),
                        F("offline_replicas", "[]int32", "5+", ignorable=True),
                    ),
                ),
                F("topic_authorized_operations", "int32", "8+", default=-0x80000000),
            ),
        ),
        F("cluster_authorized_operations", "int32", "8-10", default=-0x80000000),
    ),
)
