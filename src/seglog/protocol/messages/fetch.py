"""Fetch (key 1): read record batches from partitions.

Described from v4 (the oldest version Kafka 4 accepts): v4 adds
isolation_level, last_stable_offset and aborted transactions; v5 log start
offsets; v7 fetch sessions and forgotten topics; v9 current leader epochs;
v11 rack_id and preferred_read_replica; v12 is the first flexible version
(diverging epoch, current leader and snapshot id become tagged fields); v13
names topics by id instead of name; v15 moves replica_id into the tagged
replica_state; v16 adds node_endpoints; v17 replica_directory_id.

In a response, ``records`` may be a view, bytes, or any sized object (such as a
``FileRegion``) that the encoder leaves as a hole for ``sendfile``; see
:mod:`seglog.protocol.schema`.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

FETCH = Api(
    1,
    "Fetch",
    "4-17",
    flexible=12,
    request=(
        F("cluster_id", "string", "12+", nullable="12+", tag=0, default=None, ignorable=True),
        F("replica_id", "int32", "0-14", default=-1),
        F(
            "replica_state",
            "struct",
            "15+",
            tag=1,
            fields=(
                F("replica_id", "int32", "15+", default=-1),
                F("replica_epoch", "int64", "15+", default=-1),
            ),
        ),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", "3+", default=0x7FFFFFFF, ignorable=True),
        F("isolation_level", "int8", "4+", ignorable=True),
        F("session_id", "int32", "7+", ignorable=True),
        F("session_epoch", "int32", "7+", default=-1, ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic", "string", "0-12", ignorable=True),
                F("topic_id", "uuid", "13+", ignorable=True),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition", "int32"),
                        F("current_leader_epoch", "int32", "9+", default=-1, ignorable=True),
                        F("fetch_offset", "int64"),
                        F("last_fetched_epoch", "int32", "12+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        F("partition_max_bytes", "int32"),
                        F("replica_directory_id", "uuid", "17+", tag=0, ignorable=True),
                    ),
                ),
            ),
        ),
        F(
            "forgotten_topics_data",
            "[]struct",
            "7+",
            fields=(
                F("topic", "string", "7-12", ignorable=True),
                F("topic_id", "uuid", "13+", ignorable=True),
                F("partitions", "[]int32", "7+"),
            ),
        ),
        F("rack_id", "string", "11+", ignorable=True),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F("error_code", "int16", "7+", ignorable=True),
        F("session_id", "int32", "7+"),
        F(
            "responses",
            "[]struct",
            fields=(
                F("topic", "string", "0-12", ignorable=True),
                F("topic_id", "uuid", "13+", ignorable=True),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("high_watermark", "int64", failed=-1),
                        F("last_stable_offset", "int64", "4+", default=-1, ignorable=True),
                        F("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        F(
                            "diverging_epoch",
                            "struct",
                            "12+",
                            tag=0,
                            fields=(
                                F("epoch", "int32", "12+", default=-1),
                                F("end_offset", "int64", "12+", default=-1),
                            ),
                        ),
                        F(
                            "current_leader",
                            "struct",
                            "12+",
                            tag=1,
                            fields=(
                                F("leader_id", "int32", "12+", default=-1),
                                F("leader_epoch", "int32", "12+", default=-1),
                            ),
                        ),
                        F(
                            "snapshot_id",
                            "struct",
                            "12+",
                            tag=2,
                            fields=(
                                F("end_offset", "int64", default=-1),
                                F("epoch", "int32", default=-1),
                            ),
                        ),
                        F(
                            "aborted_transactions",
                            "[]struct",
                            "4+",
                            nullable="4+",
                            ignorable=True,
                            fields=(
                                F("producer_id", "int64", "4+"),
                                F("first_offset", "int64", "4+"),
                            ),
                        ),
                        F("preferred_read_replica", "int32", "11+", default=-1),
                        F("records", "records", nullable="0+"),
                    ),
                ),
            ),
        ),
        F(
            "node_endpoints",
            "[]struct",
            "16+",
            tag=0,
            fields=(
                F("node_id", "int32", "16+"),
                F("host", "string", "16+"),
                F("port", "int32", "16+"),
                F("rack", "string", "16+", nullable="16+", default=None),
            ),
        ),
    ),
)
