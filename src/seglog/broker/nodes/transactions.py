"""Transactions whose partitions other nodes lead: markers and KIP-890 checks over the channel.

The coordinator of a transactional id (the node leading its
``__transaction_state`` partition) writes the markers of the partitions it
leads itself and asks each other leader to write the rest, as Kafka's
coordinator sends WriteTxnMarkers: the leader appends the marker with the
same function the WriteTxnMarkers handler uses and fsyncs it before it
answers. A node that leads a partition, or the ``__consumer_offsets``
partition of a group, asks the id's coordinator whether the partition joined
the producer's open transaction before taking its transactional data.

Control requests served here (see :mod:`.channel`):

    markers  producer_id, producer_epoch, commit, coordinator_epoch, partitions
    verify   transactional_id, producer_id, producer_epoch, topic, partition
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.node_log_dir import NodeLogDir
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError

logger = logging.getLogger(__name__)

MARKER_TIMEOUT = 15.0
VERIFY_TIMEOUT = 5.0


class NodeTransactions:
    """The coordinator's view of partitions and ids that other nodes lead."""

    def __init__(self, cluster: Cluster, log_dir: NodeLogDir) -> None:
        self.cluster = cluster
        self.log_dir = log_dir

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
            request = {
                "op": "markers",
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "commit": commit,
                "coordinator_epoch": coordinator_epoch,
                "partitions": [list(tp) for tp in owned],
            }
            try:
                answer = self.log_dir.call_node(leader, request, MARKER_TIMEOUT)
                for topic, partition, error in answer["errors"]:
                    errors[(topic, partition)] = error
            except SeglogError as exc:
                logger.warning("node %d cannot take markers now: %s", leader, exc)
                errors.update(dict.fromkeys(owned, "NOT_LEADER_OR_FOLLOWER"))
        return errors

    def flush(self, partitions: list[tuple[str, int]]) -> None:
        """Have each partition's leader fsync its data; SeglogError if one cannot."""
        by_leader, _deleted = self._by_leader(partitions)  # a deleted topic keeps nothing
        for leader, owned in by_leader.items():
            request = {"op": "flush", "partitions": [list(tp) for tp in owned]}
            answer = self.log_dir.call_node(leader, request, MARKER_TIMEOUT)
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
        coordinator = self.log_dir.coordinator_of(transactional_id)
        if coordinator is None:
            return "COORDINATOR_NOT_AVAILABLE"
        request = {
            "op": "verify",
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "topic": topic,
            "partition": partition,
        }
        try:
            return str(self.log_dir.call_node(coordinator, request, VERIFY_TIMEOUT)["result"])
        except SeglogError as exc:
            logger.warning("cannot verify a partition with node %d: %s", coordinator, exc)
            return "COORDINATOR_NOT_AVAILABLE"


def install(state: BrokerState, log_dir: NodeLogDir, loop: asyncio.AbstractEventLoop) -> None:
    """Wire the transaction coordinator of a node to the other nodes, both ways."""
    assert state.cluster is not None
    coordinator = state.transactions
    coordinator.remote = NodeTransactions(state.cluster, log_dir)

    def markers(request: dict[str, Any]) -> dict[str, Any]:
        partitions = [(str(t), int(p)) for t, p in request["partitions"]]
        if not coordinator.loaded:
            errors = dict.fromkeys(partitions, "NOT_LEADER_OR_FOLLOWER")
        else:
            errors, committed = coordinator.write_markers(
                int(request["producer_id"]),
                int(request["producer_epoch"]),
                partitions,
                commit=bool(request["commit"]),
                coordinator_epoch=int(request["coordinator_epoch"]),
            )
            if committed:
                loop.call_soon_threadsafe(state.coordinator.apply_txn_offsets, committed)
            # Markers move last stable offsets: read_committed fetches may be waiting.
            asyncio.run_coroutine_threadsafe(state.notify_data(partitions), loop)
        return {"ok": True, "errors": [[t, p, e] for (t, p), e in errors.items()]}

    def verify(request: dict[str, Any]) -> dict[str, Any]:
        if not coordinator.loaded:
            return {"ok": True, "result": "COORDINATOR_LOAD_IN_PROGRESS"}
        error = coordinator.verify_partition(
            str(request["transactional_id"]),
            int(request["producer_id"]),
            int(request["producer_epoch"]),
            str(request["topic"]),
            int(request["partition"]),
        )
        return {"ok": True, "result": error}

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

    log_dir.handlers["markers"] = markers
    log_dir.handlers["flush"] = flush
    log_dir.handlers["verify"] = verify
