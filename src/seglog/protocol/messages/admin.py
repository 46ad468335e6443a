"""Topic, partition, record and configuration administration, and cluster description.

CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeCluster and DescribeLogDirs,
each described from the oldest version Kafka 4 accepts.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

CREATE_TOPICS = Api(
    19,
    "CreateTopics",
    "2-7",
    flexible=5,
    request=(
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F("num_partitions", "int32"),
                F("replication_factor", "int16"),
                F(
                    "assignments",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("broker_ids", "[]int32"),
                    ),
                ),
                F(
                    "configs",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F("value", "string", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", "1+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F("topic_id", "uuid", "7+", ignorable=True),
                F("error_code", "int16"),
                F("error_message", "string", "1+", nullable="0+", ignorable=True),
                F("topic_config_error_code", "int16", "5+", tag=0, ignorable=True),
                F("num_partitions", "int32", "5+", default=-1, ignorable=True),
                F("replication_factor", "int16", "5+", default=-1, ignorable=True),
                F(
                    "configs",
                    "[]struct",
                    "5+",
                    nullable="5+",
                    ignorable=True,
                    fields=(
                        F("name", "string", "5+"),
                        F("value", "string", "5+", nullable="5+"),
                        F("read_only", "bool", "5+"),
                        F("config_source", "int8", "5+", default=-1, ignorable=True),
                        F("is_sensitive", "bool", "5+"),
                    ),
                ),
            ),
        ),
    ),
)

DELETE_TOPICS = Api(
    20,
    "DeleteTopics",
    "1-6",
    flexible=4,
    request=(
        F(
            "topics",
            "[]struct",
            "6+",
            fields=(
                F("name", "string", "6+", nullable="6+", default=None),
                F("topic_id", "uuid", "6+"),
            ),
        ),
        F("topic_names", "[]string", "0-5", ignorable=True),
        F("timeout_ms", "int32"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "responses",
            "[]struct",
            fields=(
                F("name", "string", nullable="6+"),
                F("topic_id", "uuid", "6+", ignorable=True),
                F("error_code", "int16"),
                F("error_message", "string", "5+", nullable="5+", default=None, ignorable=True),
            ),
        ),
    ),
)

CREATE_PARTITIONS = Api(
    37,
    "CreatePartitions",
    "0-3",
    flexible=2,
    request=(
        F(
            "topics",
            "[]struct",
            fields=(
                F("name", "string"),
                F("count", "int32"),
                F("assignments", "[]struct", nullable="0+", fields=(F("broker_ids", "[]int32"),)),
            ),
        ),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("name", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ),
        ),
    ),
)

DELETE_RECORDS = Api(
    21,
    "DeleteRecords",
    "0-2",
    flexible=2,
    request=(
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
                        F("offset", "int64"),
                    ),
                ),
            ),
        ),
        F("timeout_ms", "int32"),
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
                        F("low_watermark", "int64", failed=-1),
                        F("error_code", "int16"),
                    ),
                ),
            ),
        ),
    ),
)

DESCRIBE_CONFIGS = Api(
    32,
    "DescribeConfigs",
    "1-4",
    flexible=4,
    request=(
        F(
            "resources",
            "[]struct",
            fields=(
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("configuration_keys", "[]string", nullable="0+"),
            ),
        ),
        F("include_synonyms", "bool", "1+"),
        F("include_documentation", "bool", "3+"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F(
                    "configs",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F("value", "string", nullable="0+"),
                        F("read_only", "bool"),
                        F("config_source", "int8", "1+", default=-1, ignorable=True),
                        F("is_sensitive", "bool"),
                        F(
                            "synonyms",
                            "[]struct",
                            "1+",
                            ignorable=True,
                            fields=(
                                F("name", "string", "1+"),
                                F("value", "string", "1+", nullable="0+"),
                                F("source", "int8", "1+"),
                            ),
                        ),
                        F("config_type", "int8", "3+", ignorable=True),
                        F("documentation", "string", "3+", nullable="0+", ignorable=True),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_CONFIGS = Api(
    33,
    "AlterConfigs",
    "0-2",
    flexible=2,
    request=(
        F(
            "resources",
            "[]struct",
            fields=(
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F(
                    "configs",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F("value", "string", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "responses",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
            ),
        ),
    ),
)

INCREMENTAL_ALTER_CONFIGS = Api(
    44,
    "IncrementalAlterConfigs",
    "0-1",
    flexible=1,
    request=(
        F(
            "resources",
            "[]struct",
            fields=(
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F(
                    "configs",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F("config_operation", "int8"),
                        F("value", "string", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "responses",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
            ),
        ),
    ),
)

DESCRIBE_CLUSTER = Api(
    60,
    "DescribeCluster",
    "0-1",
    flexible=0,
    request=(
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=1),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F(
            "brokers",
            "[]struct",
            fields=(
                F("broker_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("rack", "string", nullable="0+", default=None),
            ),
        ),
        F("cluster_authorized_operations", "int32", default=-0x80000000),
    ),
)

DESCRIBE_LOG_DIRS = Api(
    35,
    "DescribeLogDirs",
    "1-4",
    flexible=2,
    request=(
        F(
            "topics",
            "[]struct",
            nullable="0+",
            fields=(
                F("topic", "string"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "3+", ignorable=True),
        F(
            "results",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("log_dir", "string"),
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
                                F("partition_size", "int64"),
                                F("offset_lag", "int64"),
                                F("is_future_key", "bool"),
                            ),
                        ),
                    ),
                ),
                F("total_bytes", "int64", "4+", default=-1, ignorable=True),
                F("usable_bytes", "int64", "4+", default=-1, ignorable=True),
            ),
        ),
    ),
)
