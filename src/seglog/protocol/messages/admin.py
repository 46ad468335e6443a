"""Topic and config administration, cluster description, SASL handshake.

Declarative tables in seglog's own form (see ``seglog.protocol.schema``), written
from the message specifications of Apache Kafka (Apache-2.0). Field names are
snake_case; version ranges are inclusive.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

CREATE_TOPICS = Api(
    19,
    "CreateTopics",
    versions=(0, 7),
    flexible=5,
    request=(
        F(
            "topics",
            "[]struct",
            (0, 7),
            fields=(
                F("name", "string", (0, 7)),
                F("num_partitions", "int32", (0, 7)),
                F("replication_factor", "int16", (0, 7)),
                F(
                    "assignments",
                    "[]struct",
                    (0, 7),
                    fields=(
                        F("partition_index", "int32", (0, 7)),
                        F("broker_ids", "[]int32", (0, 7)),
                    ),
                ),
                F(
                    "configs",
                    "[]struct",
                    (0, 7),
                    fields=(
                        F("name", "string", (0, 7)),
                        F("value", "string", (0, 7), nullable=(0, 7)),
                    ),
                ),
            ),
        ),
        F("timeout_ms", "int32", (0, 7), default=60000),
        F("validate_only", "bool", (1, 7)),
    ),
    response=(
        F("throttle_time_ms", "int32", (2, 7)),
        F(
            "topics",
            "[]struct",
            (0, 7),
            fields=(
                F("name", "string", (0, 7)),
                F("topic_id", "uuid", (7, 7)),
                F("error_code", "int16", (0, 7)),
                F("error_message", "string", (1, 7), nullable=(0, 7)),
                F("topic_config_error_code", "int16", (5, 7), tag=0, tagged=(5, 7)),
                F("num_partitions", "int32", (5, 7), default=-1),
                F("replication_factor", "int16", (5, 7), default=-1),
                F(
                    "configs",
                    "[]struct",
                    (5, 7),
                    nullable=(5, 7),
                    fields=(
                        F("name", "string", (5, 7)),
                        F("value", "string", (5, 7), nullable=(5, 7)),
                        F("read_only", "bool", (5, 7)),
                        F("config_source", "int8", (5, 7), default=-1),
                        F("is_sensitive", "bool", (5, 7)),
                    ),
                ),
            ),
        ),
    ),
)


DELETE_TOPICS = Api(
    20,
    "DeleteTopics",
    versions=(0, 6),
    flexible=4,
    request=(
        F(
            "topics",
            "[]struct",
            (6, 6),
            fields=(
                F("name", "string", (6, 6), nullable=(6, 6)),
                F("topic_id", "uuid", (6, 6)),
            ),
        ),
        F("topic_names", "[]string", (0, 5)),
        F("timeout_ms", "int32", (0, 6)),
    ),
    response=(
        F("throttle_time_ms", "int32", (1, 6)),
        F(
            "responses",
            "[]struct",
            (0, 6),
            fields=(
                F("name", "string", (0, 6), nullable=(6, 6)),
                F("topic_id", "uuid", (6, 6)),
                F("error_code", "int16", (0, 6)),
                F("error_message", "string", (5, 6), nullable=(5, 6)),
            ),
        ),
    ),
)


CREATE_PARTITIONS = Api(
    37,
    "CreatePartitions",
    versions=(0, 3),
    flexible=2,
    request=(
        F(
            "topics",
            "[]struct",
            (0, 3),
            fields=(
                F("name", "string", (0, 3)),
                F("count", "int32", (0, 3)),
                F(
                    "assignments",
                    "[]struct",
                    (0, 3),
                    nullable=(0, 3),
                    fields=(F("broker_ids", "[]int32", (0, 3)),),
                ),
            ),
        ),
        F("timeout_ms", "int32", (0, 3)),
        F("validate_only", "bool", (0, 3)),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 3)),
        F(
            "results",
            "[]struct",
            (0, 3),
            fields=(
                F("name", "string", (0, 3)),
                F("error_code", "int16", (0, 3)),
                F("error_message", "string", (0, 3), nullable=(0, 3)),
            ),
        ),
    ),
)


DELETE_RECORDS = Api(
    21,
    "DeleteRecords",
    versions=(0, 2),
    flexible=2,
    request=(
        F(
            "topics",
            "[]struct",
            (0, 2),
            fields=(
                F("name", "string", (0, 2)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 2),
                    fields=(
                        F("partition_index", "int32", (0, 2)),
                        F("offset", "int64", (0, 2)),
                    ),
                ),
            ),
        ),
        F("timeout_ms", "int32", (0, 2)),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 2)),
        F(
            "topics",
            "[]struct",
            (0, 2),
            fields=(
                F("name", "string", (0, 2)),
                F(
                    "partitions",
                    "[]struct",
                    (0, 2),
                    fields=(
                        F("partition_index", "int32", (0, 2)),
                        F("low_watermark", "int64", (0, 2)),
                        F("error_code", "int16", (0, 2)),
                    ),
                ),
            ),
        ),
    ),
)


DESCRIBE_CONFIGS = Api(
    32,
    "DescribeConfigs",
    versions=(0, 4),
    flexible=4,
    request=(
        F(
            "resources",
            "[]struct",
            (0, 4),
            fields=(
                F("resource_type", "int8", (0, 4)),
                F("resource_name", "string", (0, 4)),
                F("configuration_keys", "[]string", (0, 4), nullable=(0, 4)),
            ),
        ),
        F("include_synonyms", "bool", (1, 4)),
        F("include_documentation", "bool", (3, 4)),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 4)),
        F(
            "results",
            "[]struct",
            (0, 4),
            fields=(
                F("error_code", "int16", (0, 4)),
                F("error_message", "string", (0, 4), nullable=(0, 4)),
                F("resource_type", "int8", (0, 4)),
                F("resource_name", "string", (0, 4)),
                F(
                    "configs",
                    "[]struct",
                    (0, 4),
                    fields=(
                        F("name", "string", (0, 4)),
                        F("value", "string", (0, 4), nullable=(0, 4)),
                        F("read_only", "bool", (0, 4)),
                        F("is_default", "bool", (0, 0)),
                        F("config_source", "int8", (1, 4), default=-1),
                        F("is_sensitive", "bool", (0, 4)),
                        F(
                            "synonyms",
                            "[]struct",
                            (1, 4),
                            fields=(
                                F("name", "string", (1, 4)),
                                F("value", "string", (1, 4), nullable=(0, 4)),
                                F("source", "int8", (1, 4)),
                            ),
                        ),
                        F("config_type", "int8", (3, 4)),
                        F("documentation", "string", (3, 4), nullable=(0, 4)),
                    ),
                ),
            ),
        ),
    ),
)


INCREMENTAL_ALTER_CONFIGS = Api(
    44,
    "IncrementalAlterConfigs",
    versions=(0, 1),
    flexible=1,
    request=(
        F(
            "resources",
            "[]struct",
            (0, 1),
            fields=(
                F("resource_type", "int8", (0, 1)),
                F("resource_name", "string", (0, 1)),
                F(
                    "configs",
                    "[]struct",
                    (0, 1),
                    fields=(
                        F("name", "string", (0, 1)),
                        F("config_operation", "int8", (0, 1)),
                        F("value", "string", (0, 1), nullable=(0, 1)),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool", (0, 1)),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 1)),
        F(
            "responses",
            "[]struct",
            (0, 1),
            fields=(
                F("error_code", "int16", (0, 1)),
                F("error_message", "string", (0, 1), nullable=(0, 1)),
                F("resource_type", "int8", (0, 1)),
                F("resource_name", "string", (0, 1)),
            ),
        ),
    ),
)


ALTER_CONFIGS = Api(
    33,
    "AlterConfigs",
    versions=(0, 2),
    flexible=2,
    request=(
        F(
            "resources",
            "[]struct",
            (0, 2),
            fields=(
                F("resource_type", "int8", (0, 2)),
                F("resource_name", "string", (0, 2)),
                F(
                    "configs",
                    "[]struct",
                    (0, 2),
                    fields=(
                        F("name", "string", (0, 2)),
                        F("value", "string", (0, 2), nullable=(0, 2)),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool", (0, 2)),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 2)),
        F(
            "responses",
            "[]struct",
            (0, 2),
            fields=(
                F("error_code", "int16", (0, 2)),
                F("error_message", "string", (0, 2), nullable=(0, 2)),
                F("resource_type", "int8", (0, 2)),
                F("resource_name", "string", (0, 2)),
            ),
        ),
    ),
)


DESCRIBE_CLUSTER = Api(
    60,
    "DescribeCluster",
    versions=(0, 1),
    flexible=0,
    request=(
        F("include_cluster_authorized_operations", "bool", (0, 1)),
        F("endpoint_type", "int8", (1, 1), default=1),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 1)),
        F("error_code", "int16", (0, 1)),
        F("error_message", "string", (0, 1), nullable=(0, 1)),
        F("endpoint_type", "int8", (1, 1), default=1),
        F("cluster_id", "string", (0, 1)),
        F("controller_id", "int32", (0, 1), default=-1),
        F(
            "brokers",
            "[]struct",
            (0, 1),
            fields=(
                F("broker_id", "int32", (0, 1)),
                F("host", "string", (0, 1)),
                F("port", "int32", (0, 1)),
                F("rack", "string", (0, 1), nullable=(0, 1)),
            ),
        ),
        F("cluster_authorized_operations", "int32", (0, 1), default=-2147483648),
    ),
)


DESCRIBE_LOG_DIRS = Api(
    35,
    "DescribeLogDirs",
    versions=(0, 4),
    flexible=2,
    request=(
        F(
            "topics",
            "[]struct",
            (0, 4),
            nullable=(0, 4),
            fields=(
                F("topic", "string", (0, 4)),
                F("partitions", "[]int32", (0, 4)),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", (0, 4)),
        F("error_code", "int16", (3, 4)),
        F(
            "results",
            "[]struct",
            (0, 4),
            fields=(
                F("error_code", "int16", (0, 4)),
                F("log_dir", "string", (0, 4)),
                F(
                    "topics",
                    "[]struct",
                    (0, 4),
                    fields=(
                        F("name", "string", (0, 4)),
                        F(
                            "partitions",
                            "[]struct",
                            (0, 4),
                            fields=(
                                F("partition_index", "int32", (0, 4)),
                                F("partition_size", "int64", (0, 4)),
                                F("offset_lag", "int64", (0, 4)),
                                F("is_future_key", "bool", (0, 4)),
                            ),
                        ),
                    ),
                ),
                F("total_bytes", "int64", (4, 4), default=-1),
                F("usable_bytes", "int64", (4, 4), default=-1),
            ),
        ),
    ),
)


SASL_HANDSHAKE = Api(
    17,
    "SaslHandshake",
    versions=(0, 1),
    flexible=None,
    request=(F("mechanism", "string", (0, 1)),),
    response=(
        F("error_code", "int16", (0, 1)),
        F("mechanisms", "[]string", (0, 1)),
    ),
)
