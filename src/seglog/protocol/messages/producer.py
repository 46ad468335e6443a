"""Producer ids and transactions: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeTransactions (65) and ListTransactions (66).

InitProducerId v2 is the first flexible version; v3 lets a producer bump its
epoch by passing its current producer id and epoch. The transaction APIs are
flexible from v3; AddPartitionsToTxn v4 (broker to broker in Kafka) batches
several transactions and may only verify.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

INIT_PRODUCER_ID = Api(
    22,
    "InitProducerId",
    "0-5",
    flexible=2,
    request=(
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ),
    response=(
        F("throttle_time_ms", "int32", ignorable=True),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ),
)

ADD_PARTITIONS_TO_TXN = Api(
    24,
    "AddPartitionsToTxn",
    "0-4",
    flexible=3,
    request=(
        F(
            "transactions",
            "[]struct",
            "4+",
            fields=(
                F("transactional_id", "string", "4+"),
                F("producer_id", "int64", "4+"),
                F("producer_epoch", "int16", "4+"),
                F("verify_only", "bool", "4+", default=False),
                F(
                    "topics",
                    "[]struct",
                    "4+",
                    fields=(F("name", "string"), F("partitions", "[]int32")),
                ),
            ),
        ),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F(
            "v3_and_below_topics",
            "[]struct",
            "0-3",
            fields=(F("name", "string"), F("partitions", "[]int32")),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "4+", ignorable=True),
        F(
            "results_by_transaction",
            "[]struct",
            "4+",
            fields=(
                F("transactional_id", "string", "4+"),
                F(
                    "topic_results",
                    "[]struct",
                    "4+",
                    fields=(
                        F("name", "string"),
                        F(
                            "results_by_partition",
                            "[]struct",
                            fields=(
                                F("partition_index", "int32"),
                                F("partition_error_code", "int16"),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        F(
            "results_by_topic_v3_and_below",
            "[]struct",
            "0-3",
            fields=(
                F("name", "string"),
                F(
                    "results_by_partition",
                    "[]struct",
                    fields=(
                        F("partition_index", "int32"),
                        F("partition_error_code", "int16"),
                    ),
                ),
            ),
        ),
    ),
)
"""AddPartitionsToTxn (key 24): v4 batches transactions and adds KIP-890's verify_only."""

ADD_OFFSETS_TO_TXN = Api(
    25,
    "AddOffsetsToTxn",
    "0-4",
    flexible=3,
    request=(
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ),
)
"""AddOffsetsToTxn (key 25): a group's offsets join the transaction."""

END_TXN = Api(
    26,
    "EndTxn",
    "0-4",
    flexible=3,
    request=(
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ),
)
"""EndTxn (key 26): commit or abort (v5, transaction version 2, is not described)."""

WRITE_TXN_MARKERS = Api(
    27,
    "WriteTxnMarkers",
    "0-1",
    flexible=1,
    request=(
        F(
            "markers",
            "[]struct",
            fields=(
                F("producer_id", "int64"),
                F("producer_epoch", "int16"),
                F("transaction_result", "bool"),
                F(
                    "topics",
                    "[]struct",
                    fields=(F("name", "string"), F("partition_indexes", "[]int32")),
                ),
                F("coordinator_epoch", "int32"),
            ),
        ),
    ),
    response=(
        F(
            "markers",
            "[]struct",
            fields=(
                F("producer_id", "int64"),
                F(
                    "topics",
                    "[]struct",
                    fields=(
                        F("name", "string"),
                        F(
                            "partitions",
                            "[]struct",
                            fields=(F("partition_index", "int32"), F("error_code", "int16")),
                        ),
                    ),
                ),
            ),
        ),
    ),
)
"""WriteTxnMarkers (key 27): a coordinator asks a partition's leader to write markers
(``transaction_result`` false is ABORT, true COMMIT)."""

TXN_OFFSET_COMMIT = Api(
    28,
    "TxnOffsetCommit",
    "0-4",
    flexible=3,
    request=(
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
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
                        F("committed_offset", "int64"),
                        F("committed_leader_epoch", "int32", "2+", default=-1, ignorable=True),
                        F("committed_metadata", "string", nullable="0+"),
                    ),
                ),
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
                    fields=(F("partition_index", "int32"), F("error_code", "int16")),
                ),
            ),
        ),
    ),
)
"""TxnOffsetCommit (key 28): a consumer group's offsets committed in a transaction."""

DESCRIBE_TRANSACTIONS = Api(
    65,
    "DescribeTransactions",
    "0",
    flexible=0,
    request=(F("transactional_ids", "[]string"),),
    response=(
        F("throttle_time_ms", "int32"),
        F(
            "transaction_states",
            "[]struct",
            fields=(
                F("error_code", "int16"),
                F("transactional_id", "string"),
                F("transaction_state", "string"),
                F("transaction_timeout_ms", "int32"),
                F("transaction_start_time_ms", "int64"),
                F("producer_id", "int64"),
                F("producer_epoch", "int16"),
                F(
                    "topics",
                    "[]struct",
                    fields=(F("topic", "string"), F("partitions", "[]int32")),
                ),
            ),
        ),
    ),
)
"""DescribeTransactions (key 65, KIP-664): the coordinator's view of transactional ids."""

LIST_TRANSACTIONS = Api(
    66,
    "ListTransactions",
    "0-1",
    flexible=0,
    request=(
        F("state_filters", "[]string"),
        F("producer_id_filters", "[]int64"),
        F("duration_filter", "int64", "1+", default=-1),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", "[]string"),
        F(
            "transaction_states",
            "[]struct",
            fields=(
                F("transactional_id", "string"),
                F("producer_id", "int64"),
                F("transaction_state", "string"),
            ),
        ),
    ),
)
"""ListTransactions (key 66, KIP-664; v1 adds the duration filter of KIP-994)."""
