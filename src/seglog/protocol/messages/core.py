"""Produce, fetch, metadata, offsets and producer ids, by version.

Declarative tables in seglog's own form (see ``seglog.protocol.schema``), written
from the message specifications of Apache Kafka (Apache-2.0). Field names are
snake_case; version ranges are inclusive.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

API_VERSIONS = Api(
    18,
    "ApiVersions",
    versions=(0, 4),
    flexible=3,
    request=(
        F("client_software_name", "string", (3, 4)),
        F("client_software_version", "string", (3, 4)),
    ),
    response=(
        F("error_code", "int16", (0, 4)),
        F(
            "api_keys",
            "[]struct",
            (0, 4),
            fields=(
                F("api_key", "int16", (0, 4)),
                F("min_version", "int16", (0, 4)),
                F("max_version", "int16", (0, 4)),
            ),
        ),
        F("throttle_time_ms", "int32", (1, 4)),
        F(
            "supported_features",
            "[]struct",
            (3, 4),
            tag=0,
            tagged=(3, 4),
            fields=(
                F("name", "string", (3, 4)),
                F("min_version", "int16", (3, 4)),
                F("max_version", "int16", (3, 4)),
            ),
        ),
        F("finalized_features_epoch", "int64", (3, 4), tag=1, tagged=(3, 4), default=-1),
        F(
            "finalized_features",
            "[]struct",
            (3, 4),
            tag=2,
            tagged=(3, 4),
            fields=(
                F("name", "string", (3, 4)),
                F("max_version_level", "int16", (3, 4)),
                F("min_version_level", "int16", (3, 4)),
            ),
        ),
        F("zk_migration_ready", "bool", (3, 4), tag=3, tagged=(3, 4)),
    ),
)


METADATA = Api(
    3,
    "Metadata",
    versions=(0, 12),
    flexible=9,
    request=(
        F(
            "topics",
            "[]struct",
            (0, 12),
            nullable=(1, 12),
            fields=(
                F("topic_id", "uuid", (10, 12)),
                F("name", "string", (0, 12), nullable=(10, 12)),
            ),
        ),
        F("allow_auto_topic_creation", "bool", (4, 12), default=True),
        F("include_cluster_authorized_operations", "bool", (8, 10)),
        F("include_topic_authorized_operations", "bool", (8, 12)),
    ),
    response=(
        F("throttle_time_ms", "int32", (3, 12)),
        F(
            "brokers",
            "[]struct",
            (0, 12),
            fields=(
                F("node_id", "int32", (0, 12)),
                F("host", "string", (0, 12)),
                F("port", "int32", (0, 12)),
                F("rack", "string", (1, 12), nullable=(1, 12)),
            ),
        ),
        F("cluster_id", "string", (2, 12), nullable=(2, 12)),
        F("controller_id", "int32", (1, 12), default=-1),
        F(
            "topics",
            "[]struct",
            (0, 12),
            fields=(
                F("error_code", "int16", (0, 12)),
                F("name", "string", (0, 12), nullable=(12, 12)),
                F("topic_id", "uuid", (10, 12)),
                F("is_internal", "bool", (1, 12)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 12),
                    fields=(
                        F("error_code", "int16", (0, 12)),
                        F("partition_index", "int32", (0, 12)),
                        F("leader_id", "int32", (0, 12)),
                        F("leader_epoch", "int32", (7, 12), default=-1),
                        F("replica_nodes", "[]int32", (0, 12)),
                        F("isr_nodes", "[]int32", (0, 12)),
                        F("offline_replicas", "[]int32", (5, 12)),
                    ),
                ),
                F("topic_authorized_operations", "int32", (8, 12), default=-2147483648),
            ),
        ),
        F("cluster_authorized_operations", "int32", (8, 10), default=-2147483648),
    ),
)


PRODUCE = Api(
    0,
    "Produce",
    versions=(0, 11),
    flexible=9,
    request=(
        F("transactional_id", "string", (3, 11), nullable=(3, 11)),
        F("acks", "int16", (0, 11)),
        F("timeout_ms", "int32", (0, 11)),
        F(
            "topic_data",
            "[]struct",
            (0, 11),
            fields=(
                F("name", "string", (0, 11)),
                F(
                    "partition_data",
                    "[]struct",
                    (0, 11),
                    fields=(
                        F("index", "int32", (0, 11)),
                        F("records", "records", (0, 11), nullable=(0, 11)),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F(
            "responses",
            "[]struct",
            (0, 11),
            fields=(
                F("name", "string", (0, 11)),
                F(
                    "partition_responses",
                    "[]struct",
                    (0, 11),
                    fields=(
                        F("index", "int32", (0, 11)),
                        F("error_code", "int16", (0, 11)),
                        F("base_offset", "int64", (0, 11)),
                        F("log_append_time_ms", "int64", (2, 11), default=-1),
                        F("log_start_offset", "int64", (5, 11), default=-1),
                        F(
                            "record_errors",
                            "[]struct",
                            (8, 11),
                            fields=(
                                F("batch_index", "int32", (8, 11)),
                                F("batch_index_error_message", "string", (8, 11), nullable=(8, 11)),
                            ),
                        ),
                        F("error_message", "string", (8, 11), nullable=(8, 11)),
                        F(
                            "current_leader",
                            "struct",
                            (10, 11),
                            tag=0,
                            tagged=(10, 11),
                            fields=(
                                F("leader_id", "int32", (10, 11), default=-1),
                                F("leader_epoch", "int32", (10, 11), default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        F("throttle_time_ms", "int32", (1, 11)),
        F(
            "node_endpoints",
            "[]struct",
            (10, 11),
            tag=0,
            tagged=(10, 11),
            fields=(
                F("node_id", "int32", (10, 11)),
                F("host", "string", (10, 11)),
                F("port", "int32", (10, 11)),
                F("rack", "string", (10, 11), nullable=(10, 11)),
            ),
        ),
    ),
)


FETCH = Api(
    1,
    "Fetch",
    versions=(0, 17),
    flexible=12,
    request=(
        F("cluster_id", "string", (12, 17), nullable=(12, 17), tag=0, tagged=(12, 17)),
        F("replica_id", "int32", (0, 14), default=-1),
        F(
            "replica_state",
            "struct",
            (15, 17),
            tag=1,
            tagged=(15, 17),
            fields=(
                F("replica_id", "int32", (15, 17), default=-1),
                F("replica_epoch", "int64", (15, 17), default=-1),
            ),
        ),
        F("max_wait_ms", "int32", (0, 17)),
        F("min_bytes", "int32", (0, 17)),
        F("max_bytes", "int32", (3, 17), default=2147483647),
        F("isolation_level", "int8", (4, 17)),
        F("session_id", "int32", (7, 17)),
        F("session_epoch", "int32", (7, 17), default=-1),
        F(
            "topics",
            "[]struct",
            (0, 17),
            fields=(
                F("topic", "string", (0, 12)),
                F("topic_id", "uuid", (13, 17)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 17),
                    fields=(
                        F("partition", "int32", (0, 17)),
                        F("current_leader_epoch", "int32", (9, 17), default=-1),
                        F("fetch_offset", "int64", (0, 17)),
                        F("last_fetched_epoch", "int32", (12, 17), default=-1),
                        F("log_start_offset", "int64", (5, 17), default=-1),
                        F("partition_max_bytes", "int32", (0, 17)),
                        F("replica_directory_id", "uuid", (17, 17), tag=0, tagged=(17, 17)),
                    ),
                ),
            ),
        ),
        F(
            "forgotten_topics_data",
            "[]struct",
            (7, 17),
            fields=(
                F("topic", "string", (7, 12)),
                F("topic_id", "uuid", (13, 17)),
                F("partitions", "[]int32", (7, 17)),
            ),
        ),
        F("rack_id", "string", (11, 17)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 17)),
        F("error_code", "int16", (7, 17)),
        F("session_id", "int32", (7, 17)),
        F(
            "responses",
            "[]struct",
            (0, 17),
            fields=(
                F("topic", "string", (0, 12)),
                F("topic_id", "uuid", (13, 17)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 17),
                    fields=(
                        F("partition_index", "int32", (0, 17)),
                        F("error_code", "int16", (0, 17)),
                        F("high_watermark", "int64", (0, 17)),
                        F("last_stable_offset", "int64", (4, 17), default=-1),
                        F("log_start_offset", "int64", (5, 17), default=-1),
                        F(
                            "diverging_epoch",
                            "struct",
                            (12, 17),
                            tag=0,
                            tagged=(12, 17),
                            fields=(
                                F("epoch", "int32", (12, 17), default=-1),
                                F("end_offset", "int64", (12, 17), default=-1),
                            ),
                        ),
                        F(
                            "current_leader",
                            "struct",
                            (12, 17),
                            tag=1,
                            tagged=(12, 17),
                            fields=(
                                F("leader_id", "int32", (12, 17), default=-1),
                                F("leader_epoch", "int32", (12, 17), default=-1),
                            ),
                        ),
                        F(
                            "snapshot_id",
                            "struct",
                            (12, 17),
                            tag=2,
                            tagged=(12, 17),
                            fields=(
                                F("end_offset", "int64", (0, 17), default=-1),
                                F("epoch", "int32", (0, 17), default=-1),
                            ),
                        ),
                        F(
                            "aborted_transactions",
                            "[]struct",
                            (4, 17),
                            nullable=(4, 17),
                            fields=(
                                F("producer_id", "int64", (4, 17)),
                                F("first_offset", "int64", (4, 17)),
                            ),
                        ),
                        F("preferred_read_replica", "int32", (11, 17), default=-1),
                        F("records", "records", (0, 17), nullable=(0, 17)),
                    ),
                ),
            ),
        ),
        F(
            "node_endpoints",
            "[]struct",
            (16, 17),
            tag=0,
            tagged=(16, 17),
            fields=(
                F("node_id", "int32", (16, 17)),
                F("host", "string", (16, 17)),
                F("port", "int32", (16, 17)),
                F("rack", "string", (16, 17), nullable=(16, 17)),
            ),
        ),
    ),
)


LIST_OFFSETS = Api(
    2,
    "ListOffsets",
    versions=(0, 9),
    flexible=6,
    request=(
        F("replica_id", "int32", (0, 9)),
        F("isolation_level", "int8", (2, 9)),
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
                        F("current_leader_epoch", "int32", (4, 9), default=-1),
                        F("timestamp", "int64", (0, 9)),
                        F("max_num_offsets", "int32", (0, 0), default=1),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (2, 9)),
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
                        F("old_style_offsets", "[]int64", (0, 0)),
                        F("timestamp", "int64", (1, 9), default=-1),
                        F("offset", "int64", (1, 9), default=-1),
                        F("leader_epoch", "int32", (4, 9), default=-1),
                    ),
                ),
            ),
        ),
    ),
)


INIT_PRODUCER_ID = Api(
    22,
    "InitProducerId",
    versions=(0, 5),
    flexible=2,
    request=(
        F("transactional_id", "string", (0, 5), nullable=(0, 5)),
        F("transaction_timeout_ms", "int32", (0, 5)),
        F("producer_id", "int64", (3, 5), default=-1),
        F("producer_epoch", "int16", (3, 5), default=-1),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 5)),
        F("error_code", "int16", (0, 5)),
        F("producer_id", "int64", (0, 5), default=-1),
        F("producer_epoch", "int16", (0, 5)),
    ),
)


OFFSET_FOR_LEADER_EPOCH = Api(
    23,
    "OffsetForLeaderEpoch",
    versions=(0, 4),
    flexible=4,
    request=(
        F("replica_id", "int32", (3, 4), default=-2),
        F(
            "topics",
            "[]struct",
            (0, 4),
            fields=(
                F("topic", "string", (0, 4)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 4),
                    fields=(
                        F("partition", "int32", (0, 4)),
                        F("current_leader_epoch", "int32", (2, 4), default=-1),
                        F("leader_epoch", "int32", (0, 4)),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (2, 4)),
        F(
            "topics",
            "[]struct",
            (0, 4),
            fields=(
                F("topic", "string", (0, 4)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 4),
                    fields=(
                        F("error_code", "int16", (0, 4)),
                        F("partition", "int32", (0, 4)),
                        F("leader_epoch", "int32", (1, 4), default=-1),
                        F("end_offset", "int64", (0, 4), default=-1),
                    ),
                ),
            ),
        ),
    ),
)
