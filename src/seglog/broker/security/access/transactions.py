"""The plans of the producer and transaction APIs.

Kafka's rules: InitProducerId WRITE on the transactional id, or without one
IDEMPOTENT_WRITE on the cluster (or WRITE on some topic); WRITE on the
transactional id for every transaction request, WRITE on each topic added to
a transaction, READ on the group whose offsets join it; DESCRIBE on an id to
see it in DescribeTransactions/ListTransactions; WriteTxnMarkers and
AddPartitionsToTxn v4+ (between brokers) CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from typing import Any

from seglog.broker.security.access import shapes
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
from seglog.broker.security.authorizer import Operation
from seglog.protocol import entries, error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed


def _init_producer_id(access: Access, version: int, body: dict[str, Any]) -> Decision:
    txn = body.get("transactional_id")
    if txn is not None:
        if access.allowed(Operation.WRITE, TXN, txn):
            return Decision()
        return Decision(
            response=failed(
                ApiKey.INIT_PRODUCER_ID, "", TXN_FAILED, producer_id=-1, producer_epoch=-1
            )
        )
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, TOPIC
    ):
        return Decision()
    return Decision(
        response=failed(
            ApiKey.INIT_PRODUCER_ID, "", CLUSTER_FAILED, producer_id=-1, producer_epoch=-1
        )
    )


_NOT_ATTEMPTED = error_codes.code_for("OPERATION_NOT_ATTEMPTED")


def _txn_error(api_key: int, code: int) -> dict[str, Any]:
    return failed(api_key, "", code)


def _add_partitions_to_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if version >= 4:
        # Broker to broker in Kafka (KIP-890 verification): a cluster action.
        if access.cluster(Operation.CLUSTER_ACTION):
            return Decision()
        return Decision(response=failed(ApiKey.ADD_PARTITIONS_TO_TXN, "", CLUSTER_FAILED))
    topics = body.get("v3_and_below_topics") or []
    txn_ok = access.allowed(Operation.WRITE, TXN, body["v3_and_below_transactional_id"])
    denied = {t["name"] for t in topics if not access.allowed(Operation.WRITE, TOPIC, t["name"])}
    if txn_ok and not denied:
        return Decision()

    def code(name: str) -> int:
        if not txn_ok:
            return TXN_FAILED
        return TOPIC_FAILED if name in denied else _NOT_ATTEMPTED

    key = ApiKey.ADD_PARTITIONS_TO_TXN
    topic_path = "results_by_topic_v3_and_below"
    return Decision(
        response=entries.entry(
            key,
            "",
            results_by_topic_v3_and_below=[
                shapes.failed_partitions(
                    key,
                    topic_path,
                    "results_by_partition",
                    code(t["name"]),
                    t.get("partitions") or [],
                    name=t["name"],
                )
                for t in topics
            ],
        )
    )


def _add_offsets_to_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=_txn_error(ApiKey.ADD_OFFSETS_TO_TXN, TXN_FAILED))
    if not access.allowed(Operation.READ, GROUP, body["group_id"]):
        return Decision(response=_txn_error(ApiKey.ADD_OFFSETS_TO_TXN, GROUP_FAILED))
    return Decision()


def _end_txn(access: Access, version: int, body: dict[str, Any]) -> Decision:
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        return Decision(response=_txn_error(ApiKey.END_TXN, TXN_FAILED))
    return Decision()


def _write_txn_markers(access: Access, version: int, body: dict[str, Any]) -> Decision:
    # Broker to broker: CLUSTER_ACTION on the cluster, else every partition fails.
    if access.cluster(Operation.CLUSTER_ACTION):
        return Decision()
    key = ApiKey.WRITE_TXN_MARKERS
    return Decision(
        response=entries.entry(
            key,
            "",
            markers=[
                entries.entry(
                    key,
                    "markers",
                    producer_id=m["producer_id"],
                    topics=[
                        shapes.failed_partitions(
                            key,
                            "markers.topics",
                            "partitions",
                            CLUSTER_FAILED,
                            t.get("partition_indexes") or [],
                            name=t["name"],
                        )
                        for t in m.get("topics") or []
                    ],
                )
                for m in body.get("markers") or []
            ],
        )
    )


def _txn_offset_commit(access: Access, version: int, body: dict[str, Any]) -> Decision:
    code = None
    if not access.allowed(Operation.WRITE, TXN, body["transactional_id"]):
        code = TXN_FAILED
    elif not access.allowed(Operation.READ, GROUP, body["group_id"]):
        code = GROUP_FAILED
    if code is not None:
        return Decision(
            response=shapes.failed_topics(ApiKey.TXN_OFFSET_COMMIT, shapes.COMMON, body, code)
        )
    return shapes.partitioned(ApiKey.TXN_OFFSET_COMMIT, shapes.COMMON, Operation.READ)(
        access, version, body
    )


def _list_transactions(access: Access, version: int, body: dict[str, Any]) -> Decision:
    def hide(response: dict[str, Any]) -> None:
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
    ApiKey.DESCRIBE_TRANSACTIONS: shapes.named(
        "transactional_ids",
        str,
        lambda a, t: a.allowed(Operation.DESCRIBE, TXN, t),
        "transaction_states",
        lambda t: failed(
            ApiKey.DESCRIBE_TRANSACTIONS,
            "transaction_states",
            TXN_FAILED,
            transactional_id=t,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
        ),
    ),
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
}
"""API key → its plan, for the producer and transaction APIs."""
