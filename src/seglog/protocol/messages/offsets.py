"""ListOffsets (key 2) and OffsetForLeaderEpoch (key 23).

ListOffsets v0 returns a list of old-style offsets (max_num_offsets); v1
returns one offset and timestamp; v2 adds isolation_level; v4 leader epochs;
v6 is flexible; v7 allows MAX_TIMESTAMP (-3), v8 EARLIEST_LOCAL (-4) and v9
LATEST_TIERED (-5). OffsetForLeaderEpoch is described from v2 (current leader
epochs); v3 adds replica_id and v4 is flexible.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

LIST_OFFSETS = Api(
    2,
    "ListOffsets",
    "0-9",
    flexible=6,
    request=(
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
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
                        F("current_leader_epoch", "int32", "4+", default=-1, ignorable=True),
                        F("timestamp", "int64"),
                        F("max_num_offsets", "int32", "0", default=1),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+", ignorable=True),
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
                        F("old_style_offsets", "[]int64", "0"),
                        F("timestamp", "int64", "1+", default=-1),
                        F("offset", "int64", "1+", default=-1),
                        F("leader_epoch", "int32", "4+", default=-1),
                    ),
                ),
            ),
        ),
    ),
)

OFFSET_FOR_LEADER_EPOCH = Api(
    23,
    "OffsetForLeaderEpoch",
    "2-4",
    flexible=4,
    request=(
        F("replica_id", "int32", "3+", default=-2, ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("partition", "int32"),
                        F("current_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        F("leader_epoch", "int32"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+", ignorable=True),
        F(
            "topics",
            "[]struct",
            fields=(
                F("topic", "string"),
                F(
                    "partitions",
                    "[]struct",
                    fields=(
                        F("error_code", "int16"),
                        F("partition", "int32"),
                        F("leader_epoch", "int32", "1+", default=-1, ignorable=True),
                        F("end_offset", "int64", default=-1),
                    ),
                ),
            ),
        ),
    ),
)
