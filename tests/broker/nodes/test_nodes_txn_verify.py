"""A node verifying a transactional Produce with another node keeps serving its other clients.

A partition's leader asks the transactional id's coordinator whether the
partition joined the producer's transaction (KIP-890) before it takes the
batch. Here the coordinator is stopped (SIGSTOP), so that the question hangs:
another client of the leader must still be answered meanwhile.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import time
import uuid
from typing import Any

from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.records.builder import SimpleRecord, build_batch
from tests.broker.nodes.conftest import Cluster, Raw
from tests.broker.nodes.test_nodes_confluent import create, leaders
from tests.broker.nodes.test_nodes_transactions import coordinator


def _send(raw: Raw, api: ApiKey, version: int, body: dict[str, Any]) -> None:
    """Send a request without waiting for its answer."""
    raw.correlation += 1
    payload = encode_request(api, version, raw.correlation, "test", body)
    raw.sock.sendall(struct.pack(">i", len(payload)) + payload)


def _receive(raw: Raw, api: ApiKey, version: int) -> dict[str, Any]:
    (size,) = struct.unpack(">i", raw._exactly(4))
    _, answer = decode_response(api, version, memoryview(raw._exactly(size)))
    return answer


def test_a_produce_waiting_for_verification_does_not_hold_up_other_clients(
    make_cluster,  # type: ignore[no-untyped-def]
) -> None:
    cluster: Cluster = make_cluster(2)
    create(cluster, 1, "verify-t", 2)
    led_by = {node: p for p, node in leaders(cluster, 1, "verify-t").items()}
    # An id node 1 coordinates, writing to the partition node 2 leads.
    candidates = (f"verify-{i}" for i in range(500))
    transactional_id = next(t for t in candidates if coordinator(cluster, t) == 1)
    partition = led_by[2]

    to_coordinator = Raw(cluster.port(1))
    init = to_coordinator.call(
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": transactional_id, "transaction_timeout_ms": 60_000},
    )
    assert init["error_code"] == 0
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = to_coordinator.call(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": transactional_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "verify-t", "partitions": [partition]}],
        },
    )
    result = added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]
    assert result["partition_error_code"] == 0

    records = build_batch(
        [SimpleRecord(b"in-the-transaction", None, int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    producing = Raw(cluster.port(2))
    other = Raw(cluster.port(2))
    stopped = cluster.node_pid(1)
    os.kill(stopped, signal.SIGSTOP)
    try:
        _send(
            producing,
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": transactional_id,
                "acks": -1,
                "timeout_ms": 30_000,
                "topic_data": [
                    {
                        "name": "verify-t",
                        "partition_data": [{"index": partition, "records": records}],
                    }
                ],
            },
        )
        # Let node 2 read the Produce and ask node 1 (which cannot answer).
        time.sleep(0.5)
        versions = other.call(ApiKey.API_VERSIONS, 3, {})
        assert versions["error_code"] == 0
        metadata = other.call(
            ApiKey.METADATA,
            12,
            {
                "topics": [{"name": "verify-t", "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert metadata["topics"][0]["error_code"] == 0
        readable, _, _ = select.select([producing.sock], [], [], 0)
        assert not readable, "the Produce was answered before the other client was"
    finally:
        os.kill(stopped, signal.SIGCONT)
    answer = _receive(producing, ApiKey.PRODUCE, 9)
    partition_answer = answer["responses"][0]["partition_responses"][0]
    # Answered once node 1 is back (or, had the wait run out, with a retriable error).
    assert partition_answer["error_code"] in (0, 15), partition_answer
