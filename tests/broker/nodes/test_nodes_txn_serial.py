"""A node's transaction coordinator runs one operation at a time, whoever asks.

Markers another node sends and the requests of this node's clients reach the
same coordinator; its contract is that its operations never overlap.
In-process, with one node's real log directory, control channel, Kafka
listener for the other nodes and handlers: a client's EndTxn is held inside
its fsync while markers for the same producer arrive from a peer (sent as
every node sends them, by its ``NodeTransactions``), and the coordinator's
state must not change until the EndTxn is over.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from seglog.broker.dispatch import NODES_LISTENER, handle_frame
from seglog.broker.handlers import transactions
from seglog.broker.handlers.groups import load_groups
from seglog.broker.nodes import transactions as node_transactions
from seglog.broker.nodes.cluster import Cluster
from seglog.broker.nodes.control import NodeControl
from seglog.broker.nodes.peers import PeerServer
from seglog.broker.nodes.topic_admin import node_topic_admin
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.coordinator.offset_store import TOPIC as OFFSETS_TOPIC
from seglog.protocol import ApiKey
from seglog.protocol.headers import RequestHeader
from seglog.storage import io
from seglog.storage.dir_checkpoints import MergedCheckpoints
from seglog.storage.log_dir import LogDir, LogDirSettings


class HeldFsync(io.Env):
    """The real file system; once armed, the next fsync waits until released."""

    def __init__(self) -> None:
        self.armed = False
        self.holding = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def fsync(self, target: io.FileTarget, *, name: object = None) -> None:
        with self._lock:
            hold, self.armed = self.armed, False
        if hold:
            self.holding.set()
            self.release.wait(120)
        super().fsync(target, name=name)


def _header(api: ApiKey, version: int) -> RequestHeader:
    return RequestHeader(api, version, 1, "test")


def _open_node(path: Path, env: io.Env) -> NodeControl:
    """Node 1 of a cluster of one sharing ``path``, as ``seglog serve --nodes`` opens it."""
    cluster = Cluster(base_id=1, count=1, index=0, log_dir=path)
    log_dir = LogDir.open(
        path,
        settings=LogDirSettings(log_cleaner_enable=False),
        env=env,
        owns=cluster.serves,
        checkpoint_policy=MergedCheckpoints(True),
        lock_file=cluster.lock_file,
        writes_topics=True,
    )
    return NodeControl(cluster, log_dir, node_topic_admin(log_dir, cluster))


def test_peer_markers_wait_for_the_coordinators_operation_in_progress(tmp_path: Path) -> None:
    env = HeldFsync()
    node = _open_node(tmp_path / "data", env)
    cluster, log_dir = node.cluster, node.log_dir
    node.start()

    async def main() -> None:
        state = BrokerState(
            BrokerSettings(log_dir=tmp_path / "data"), log_dir, cluster, topic_admin=node.topics
        )
        node_transactions.install(state, node, asyncio.get_running_loop())
        session = Session(NODES_LISTENER, between_nodes=True)

        async def handle(frame: memoryview) -> list[Any] | None:
            return await handle_frame(state, frame, session)

        listener = PeerServer(cluster.peer_address(1), handle)
        await listener.start()
        try:
            await load_groups(state)
            await exercise(state)
        finally:
            env.release.set()
            await transactions.stop_transaction_timers(state)
            await listener.stop()

    async def exercise(state: BrokerState) -> None:
        client = Session(state.settings.listeners[0], host="127.0.0.1")
        node.topics.create_topic("t", 1)
        init = await transactions.init_producer_id(
            state,
            _header(ApiKey.INIT_PRODUCER_ID, 4),
            {"transactional_id": "x", "transaction_timeout_ms": 60_000},
        )
        assert init["error_code"] == 0
        pid, epoch = init["producer_id"], init["producer_epoch"]
        ids = {"transactional_id": "x", "producer_id": pid, "producer_epoch": epoch}
        added = await transactions.add_partitions_to_txn(
            state,
            _header(ApiKey.ADD_PARTITIONS_TO_TXN, 3),
            {
                "v3_and_below_transactional_id": "x",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
            },
            client,
        )
        assert (
            added["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                "partition_error_code"
            ]
            == 0
        )
        offsets_added = await transactions.add_offsets_to_txn(
            state, _header(ApiKey.ADD_OFFSETS_TO_TXN, 3), {**ids, "group_id": "g"}, client
        )
        assert offsets_added["error_code"] == 0
        committed = await transactions.txn_offset_commit(
            state,
            _header(ApiKey.TXN_OFFSET_COMMIT, 3),
            {
                **ids,
                "group_id": "g",
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 7,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
            client,
        )
        assert committed["topics"][0]["partitions"][0]["error_code"] == 0
        coordinator = state.transactions
        assert set(coordinator.txns["x"].pending_offsets) == {"g"}
        offsets_partition = state.coordinator.store.partition_for("g")

        # The client's EndTxn is held in its first fsync, inside the coordinator.
        env.armed = True
        end = asyncio.ensure_future(
            transactions.end_txn(
                state, _header(ApiKey.END_TXN, 3), {**ids, "committed": True}, client
            )
        )
        assert await asyncio.to_thread(env.holding.wait, 60)

        # Meanwhile a peer sends the markers of the same producer.
        answer: dict[Any, str] = {}
        answered = threading.Event()
        sent_by = node_transactions.NodeTransactions(cluster, log_dir)

        def peer() -> None:
            answer.update(
                sent_by.write_markers(
                    pid,
                    epoch,
                    [(OFFSETS_TOPIC, offsets_partition)],
                    commit=True,
                    coordinator_epoch=0,
                )
            )
            answered.set()

        sender = threading.Thread(target=peer, daemon=True)
        sender.start()
        # The peer's markers may not be carried out while the EndTxn is: give
        # them time to be (they would be at once), then look at the state.
        answered_during_end = await asyncio.to_thread(answered.wait, 3)
        pending_during_end = {g: dict(o) for g, o in coordinator.txns["x"].pending_offsets.items()}
        env.release.set()

        ended = await end
        assert ended["error_code"] == 0
        assert await asyncio.to_thread(answered.wait, 120)
        sender.join()
        assert not answered_during_end, "the peer's markers ran during the client's EndTxn"
        assert set(pending_during_end) == {"g"}, "the EndTxn's offsets changed under it"
        assert answer == {(OFFSETS_TOPIC, offsets_partition): "NONE"}
        assert coordinator.txns["x"].state.kafka_name == "CompleteCommit"
        assert coordinator.txns["x"].pending_offsets == {}

    try:
        asyncio.run(main())
    finally:
        asyncio.run(node.stop())
        log_dir.close()
