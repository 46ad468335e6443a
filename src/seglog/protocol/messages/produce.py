"""Produce (key 0): record batches for partitions.

v3 adds the transactional id and requires record batches (magic 2); v9 is
the first flexible version; v10 adds tagged leader hints (current_leader,
node_endpoints) to the response. ``records`` stays a view of the request
frame: batches are neither copied nor parsed here.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

PRODUCE = Api(
    0,
    "Produce",
    "0-11",
    flexible=9,
    request=(
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F(
            "topic_data",
            "[]struct",
            fields=(
                F("name", "string"),
                F(
                    "partition_data",
                    "[]struct",
                    fields=(
                        F("index", "int32"),
                        F("records", "records", nullable="0+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F(
            "responses",
            "[]struct",
            fields=(
                F("name", "string"),
                F(
                    "partition_responses",
                    "[]struct",
                    fields=(
                        F("index", "int32"),
                        F("error_code", "int16"),
                        F("base_offset", "int64", failed=-1),
                        F("log_append_time_ms", "int64", "2+", default=-1, ignorable=True),
                        F("log_start_offset", "int64", "5+", default=-1, ignorable=True),
                        F(
                            "record_errors",
                            "[]struct",
                            "8+",
                            ignorable=True,
                            fields=(
                                F("batch_index", "int32", "8+"),
                                F(
                                    "batch_index_error_message",
                                    "string",
                                    "8+",
                                    nullable="8+",
                                    default=None,
                                ),
                            ),
                        ),
                        F(
                            "error_message",
                            "string",
                            "8+",
                            nullable="8+",
                            default=None,
                            ignorable=True,
                        ),
                        F(
                            "current_leader",
                            "struct",
                            "10+",
                            tag=0,
                            fields=(
                                F("leader_id", "int32", "10+", default=-1),
                                F("leader_epoch", "int32", "10+", default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        F("throttle_time_ms", "int32", "1+", ignorable=True),
        F(
            "node_endpoints",
            "[]struct",
            "10+",
            tag=0,
            fields=(
                F("node_id", "int32", "10+"),
                F("host", "string", "10+"),
                F("port", "int32", "10+"),
                F("rack", "string", "10+", nullable="10+", default=None),
            ),
        ),
    ),
)
