"""The plans of the producer and transaction APIs.

Kafka's rules: InitProducerId WRITE on the transactional id, or without one
IDEMPOTENT_WRITE on the cluster (or WRITE on some topic); WRITE on the
transactional id for every transaction request, WRITE on each topic added to
a transaction, READ on the group whose offsets join it; DESCRIBE on an id to
see it in DescribeTransactions/ListTransactions; WriteTxnMarkers and
AddPartitionsToTxn v4+ (between brokers) CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from seglog.broker.security.access.base import (
    CLUSTER_FAILED,
    GROUP,
    GROUP_FAILED,
    TOPIC,
    TOPIC_FAILED,
    TXN,
    TXN_FAILED,
    Access,
    Decision,
    Plan,
)
from seglog.broker.security.access.shapes import may, remove_denied
from seglog.broker.security.authorizer import Operation
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.bodies import producer as p
from seglog.protocol.entries import entry_as, failed_as


def _init_producer_id(
    access: Access, version: int, body: p.InitProducerIdRequest
) -> Decision[p.InitProducerIdResponse]:
    txn = body["transactional_id"]
    if txn is not None:
        if access.allowed(Operation.WRITE, TXN, txn):
            return Decision()
        return Decision(
            response=failed_as(
                p.InitProducerIdResponse, TXN_FAILED, producer_id=-1, producer_epoch=-1
            )
        )
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, TOPIC
    ):
        return Decision()
    return Decision(
        response=failed_as(
            p.InitProducerIdResponse, CLUSTER_FAILED, producer_id=-1, producer_epoch=-1
        )
    )


_NOT_ATTEMPTED = error_codes.code_for("OPERATION_NOT_ATTEMPTED")


def _add_partitions_to_txn(
    access: Access, version: int, body: p.AddPartitionsToTxnRequest
) -> Decision[p.AddPartitionsToTxnResponse]:
    if version >= 4:
        # Broker to broker in Kafka (KIP-890 verification): a cluster action.
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(response=failed_as(p.AddPartitionsToTxnResponse, CLUSTER_FAILED))
    topics = body.get("v3_and_below_topics") or []
    txn_ok = access.allowed(Operation.WRITE, TXN, body.get("v3_and_below_transactional_id", ""))
    denied = {t["name"] for t in topics if not access.allowed(Operation.WRITE, TOPIC, t["name"])}
    if txn_ok and not denied:
        return Decision()

    def code(name: str) -> int:
        if not txn_ok:
            return TXN_FAILED
        return TOPIC_FAILED if name in denied else _NOT_ATTEMPTED

    results = [
        p.AddPartitionsToTxnResponseResultsByTopicV3AndBelow(
            name=t["name"],
            results_by_partition=[
                failed_as(
                    p.AddPartitionsToTxnResponseResultsByTopicV3AndBelowResultsByPartition,
                    code(t["name"]),
                    partition_index=i,
                )
                for i in t["partitions"]
            ],
        )
        for t in topics
    ]
    return Decision(
        response=entry_as(p.AddPartitionsToTxnResponse, results_by_topic_v3_and_below=results)
    )


def _add_offsets_to_txn(
    access: Access, version: int, body: p.AddOffsetsToTxnRequest
) -> Decision[p.AddOffsetsToTxnResponse]:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=failed_as(p.AddOffsetsToTxnResponse, TXN_FAILED))
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=failed_as(p.AddOffsetsToTxnResponse, GROUP_FAILED))
    return Decision()


def _end_txn(access: Access, version: int, body: p.EndTxnRequest) -> Decision[p.EndTxnResponse]:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=failed_as(p.EndTxnResponse, TXN_FAILED))
    return Decision()


def _write_txn_markers(
    access: Access, version: int, body: p.WriteTxnMarkersRequest
) -> Decision[p.WriteTxnMarkersResponse]:
    # Broker to broker: CLUSTER_ACTION on the cluster, else every partition fails.
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    markers = [
        p.WriteTxnMarkersResponseMarkers(
            producer_id=m["producer_id"],
            topics=[
                p.WriteTxnMarkersResponseMarkersTopics(
                    name=t["name"],
                    partitions=[
                        failed_as(
                            p.WriteTxnMarkersResponseMarkersTopicsPartitions,
                            CLUSTER_FAILED,
                            partition_index=i,
                        )
                        for i in t["partition_indexes"]
                    ],
                )
                for t in m["topics"]
            ],
        )
        for m in body["markers"]
    ]
    return Decision(response=entry_as(p.WriteTxnMarkersResponse, markers=markers))


def _txn_offset_commit(
    access: Access, version: int, body: p.TxnOffsetCommitRequest
) -> Decision[p.TxnOffsetCommitResponse]:
    code = None
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        code = TXN_FAILED
    elif not access.allowed(Operation.READ, GROUP, body["group_id"]):
        code = GROUP_FAILED
    if code is not None:
        failed = _commit_failed(body["topics"], code)
        return Decision(response=entry_as(p.TxnOffsetCommitResponse, topics=failed))
    denied = remove_denied(body["topics"], lambda t: may(access, Operation.READ)(t["name"]))
    if not denied:
        return Decision()

    def fix(response: p.TxnOffsetCommitResponse) -> None:
        response.setdefault("topics", []).extend(_commit_failed(denied, TOPIC_FAILED))

    return Decision(fixes=[fix])


def _commit_failed(
    topics: list[p.TxnOffsetCommitRequestTopics], code: int
) -> list[p.TxnOffsetCommitResponseTopics]:
    return [
        p.TxnOffsetCommitResponseTopics(
            name=t["name"],
            partitions=[
                failed_as(
                    p.TxnOffsetCommitResponseTopicsPartitions,
                    code,
                    partition_index=part["partition_index"],
                )
                for part in t["partitions"]
            ],
        )
        for t in topics
    ]


def _describe_transactions(
    access: Access, version: int, body: p.DescribeTransactionsRequest
) -> Decision[p.DescribeTransactionsResponse]:
    denied = remove_denied(
        body["transactional_ids"], lambda i: access.allowed(Operation.DESCRIBE, TXN, i)
    )
    if not denied:
        return Decision()

    def fix(response: p.DescribeTransactionsResponse) -> None:
        response.setdefault("transaction_states", []).extend(
            failed_as(
                p.DescribeTransactionsResponseTransactionStates,
                TXN_FAILED,
                transactional_id=i,
                transaction_start_time_ms=-1,
                producer_id=-1,
                producer_epoch=-1,
            )
            for i in denied
        )

    return Decision(fixes=[fix])


def _list_transactions(
    access: Access, version: int, body: p.ListTransactionsRequest
) -> Decision[p.ListTransactionsResponse]:
    def hide(response: p.ListTransactionsResponse) -> None:
        response["transaction_states"] = [
            t
            for t in response.get("transaction_states") or []
            if access.allowed(Operation.DESCRIBE, TXN, t["transactional_id"])
        ]

    return Decision(fixes=[hide])


PLANS: dict[int, Plan] = {
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
}
"""API key → its plan, for the producer and transaction APIs."""
