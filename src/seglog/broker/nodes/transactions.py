"""Transactions whose partitions other nodes lead: markers and KIP-890 checks as Kafka requests.

The coordinator of a transactional id (the node leading its
``__transaction_state`` partition) writes the markers of the partitions it
leads itself and sends each other leader a WriteTxnMarkers request, as
Kafka's coordinator does; the leader's ordinary handler appends the markers
(the same function the coordinator uses) and fsyncs them before it answers.
A node that leads a partition, or the ``__consumer_offsets`` partition of a
group, asks the id's coordinator whether the partition joined the producer's
open transaction before taking its transactional data: an
AddPartitionsToTxn request with ``verify_only`` (KIP-890), answered by the
coordinator's ordinary handler. Both go over the nodes' Kafka listener
(:mod:`.peers`), and both are served, like a client's requests, in the
coordinator's turn. The requests this node's coordinator makes of the others
(:class:`NodeTransactions`, its peers) are made between the steps of its
operations, never while it holds its turn, so two coordinators never wait for
each other.

One control request remains (see :mod:`.channel`), for which Kafka has no
request:

    flush    partitions: fsync each partition's data (before a commit is decided)
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.control import NodeControl
from seglog.broker.state import BrokerState
from seglog.coordinator import txn_log
from seglog.coordinator.offset_store import partition_for
from seglog.errors import SeglogError
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.storage.log_dir import LogDir

logger = logging.getLogger(__name__)

MARKER_TIMEOUT = 15.0
#: Kafka's request.timeout.ms: the verification is awaited, so a hung coordinator
#: holds only the producer's own request (and connection), never the node.
VERIFY_TIMEOUT = 30.0


#: Verification errors as the leader answers them to the producer.
_VERIFY_ANSWERS = {
    "PRODUCER_FENCED": "INVALID_PRODUCER_EPOCH",
    "CONCURRENT_TRANSACTIONS": "INVALID_TXN_STATE",
}


class NodeTransactions:
    """The coordinator's peers: the partitions and ids that other nodes lead (blocking)."""

    def __init__(self, cluster: Cluster, log_dir: LogDir) -> None:
        self.cluster = cluster
        self.log_dir = log_dir

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The node coordinating ``transactional_id``, or None before its topic exists."""
        info = self.log_dir.topic(txn_log.TOPIC)
        if info is None:
            return None
        return self.cluster.leader(info, partition_for(transactional_id, info.partitions))

    def _call(
        self, node_id: int, api: ApiKey, version: int, body: Mapping[str, Any], timeout: float
    ) -> dict[str, Any]:
        """One Kafka request to node ``node_id``, awaited on a loop of this (worker) thread."""
        if not self.cluster.alive(node_id):
            raise ControllerUnavailableError(f"node {node_id} is down")
        return asyncio.run(self.cluster.call(node_id, api, version, body, timeout))

    def _leader(self, topic: str, partition: int) -> int | None:
        info = self.log_dir.topic(topic)
        return None if info is None else self.cluster.leader(info, partition)

    def _by_leader(
        self, partitions: list[tuple[str, int]]
    ) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[str, int]]]:
        """The partitions grouped by leader, and those of no known topic."""
        by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
        unknown = []
        for topic, partition in partitions:
            leader = self._leader(topic, partition)
            if leader is None:
                unknown.append((topic, partition))
            else:
                by_leader[leader].append((topic, partition))
        return by_leader, unknown

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        *,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[tuple[str, int], str]:
        """Have each partition's leader write the marker; an error name per partition."""
        by_leader, unknown = self._by_leader(partitions)
        errors = dict.fromkeys(unknown, "UNKNOWN_TOPIC_OR_PARTITION")
        for leader, owned in by_leader.items():
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in owned:
                by_topic[topic].append(partition)
            request = {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": commit,
                        "topics": [
                            {"name": t, "partition_indexes": p} for t, p in by_topic.items()
                        ],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            }
            try:
                answer = self._call(leader, ApiKey.WRITE_TXN_MARKERS, 1, request, MARKER_TIMEOUT)
            except SeglogError as exc:
                logger.warning("node %d cannot take markers now: %s", leader, exc)
                errors.update(dict.fromkeys(owned, "NOT_LEADER_OR_FOLLOWER"))
                continue
            for marker in answer["markers"]:
                for topic in marker["topics"]:
                    for result in topic["partitions"]:
                        errors[(topic["name"], result["partition_index"])] = error_codes.name_for(
                            result["error_code"]
                        )
        return errors

    def flush(self, partitions: list[tuple[str, int]]) -> None:
        """Have each partition's leader fsync its data; SeglogError if one cannot."""
        by_leader, _deleted = self._by_leader(partitions)  # a deleted topic keeps nothing
        for leader, owned in by_leader.items():
            request = {"op": "flush", "partitions": [list(tp) for tp in owned]}
            answer = self.cluster.control(leader, request, MARKER_TIMEOUT)
            # A partition deleted since it joined has nothing left to keep.
            failed = [
                f"{t}-{p}: {e}"
                for t, p, e in answer["errors"]
                if e not in ("NONE", "UNKNOWN_TOPIC_OR_PARTITION")
            ]
            if failed:
                raise SeglogError(f"node {leader} cannot fsync " + ", ".join(failed))

    def verify_partition(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> str:
        """Ask the id's coordinator whether the partition is in the open transaction."""
        coordinator = self.coordinator_of(transactional_id)
        if coordinator is None:
            return "COORDINATOR_NOT_AVAILABLE"
        request = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "verify_only": True,
                    "topics": [{"name": topic, "partitions": [partition]}],
                }
            ]
        }
        try:
            answer = self._call(
                coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 4, request, VERIFY_TIMEOUT
            )
        except SeglogError as exc:
            logger.warning("cannot verify a partition with node %d: %s", coordinator, exc)
            return "COORDINATOR_NOT_AVAILABLE"
        code = answer["error_code"]
        for result in answer["results_by_transaction"]:
            for topic_result in result["topic_results"]:
                for partition_result in topic_result["results_by_partition"]:
                    code = code or partition_result["partition_error_code"]
        error = error_codes.name_for(code)
        # What the partition's leader answers the producer (Kafka's names for a
        # batch the transaction does not hold).
        return _VERIFY_ANSWERS.get(error, error)

    def may_coordinate(self, producer_id: int) -> bool:
        """Any node may coordinate a producer id found in a partition (its id says not which)."""
        return True


def install(state: BrokerState, node: NodeControl, loop: asyncio.AbstractEventLoop) -> None:
    """Wire the transaction coordinator of a node to the other nodes, both ways.

    (``loop`` is not needed any more: what other nodes ask of the coordinator
    arrives as Kafka requests, on the loop already.)
    """
    if not node.cluster.shares_log_dir:
        return  # a cluster of one: the coordinator's peers are none (ClusterOfOne)
    log_dir = node.log_dir
    state.transactions.peers = NodeTransactions(node.cluster, log_dir)

    def flush(request: dict[str, Any]) -> dict[str, Any]:
        errors = []
        for topic, partition in request["partitions"]:
            error = "NONE"
            try:
                log_dir.log(str(topic), int(partition)).flush()
            except SeglogError as exc:
                error = exc.kafka_error
            except OSError:
                error = "KAFKA_STORAGE_ERROR"
            errors.append([topic, partition, error])
        return {"ok": True, "errors": errors}

    node.handlers["flush"] = flush
