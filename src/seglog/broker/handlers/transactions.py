"""The transaction APIs: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn; and WriteTxnMarkers, a coordinator's
request to the leader of a transaction's partitions.

The coordinator's calls append to ``__transaction_state`` and data partitions
and fsync before they return, so each runs on the coordinator's own thread,
one at a time, as the other nodes' and the timers' do
(``state.transactions_runtime``); its answer is sent only once it is durable.
Offsets a commit makes visible are handed to the group coordinator on the
event loop, which owns the groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.coordinator.offset_store import CommittedOffset
from seglog.coordinator.txn_peers import Op
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader

logger = logging.getLogger(__name__)

R = TypeVar("R")


def _code(name: str) -> int:
    return error_codes.code_for(name)


async def load_transactions(state: BrokerState) -> None:
    """Load ``__transaction_state`` once the groups are loaded; finish interrupted commits."""
    while state.coordinator.loading:
        await asyncio.sleep(0.02)
    coordinator = state.transactions
    try:
        committed = await state.transactions_runtime.run_op(
            coordinator.load_op(), coordinator.peers
        )
    except Exception:
        logger.exception("cannot load __transaction_state; transactions will be refused")
        return
    state.coordinator.apply_txn_offsets(committed)
    await state.notify_data()
    state.transactions_timer = asyncio.get_running_loop().create_task(_timers(state))


async def _timers(state: BrokerState) -> None:
    """Abort timed-out transactions and expire idle ids, each at its interval, until stopped."""
    coordinator = state.transactions
    runtime = state.transactions_runtime
    loop = asyncio.get_running_loop()
    next_expiry = loop.time() + coordinator.expiration_interval_ms / 1000
    stop = state.transactions_stop
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), coordinator.abort_interval_ms / 1000)
        if stop.is_set():
            return
        expire = loop.time() >= next_expiry
        if expire:
            next_expiry = loop.time() + coordinator.expiration_interval_ms / 1000
        try:
            aborted = await runtime.run_op(coordinator.abort_timed_out_op(), coordinator.peers)
            if expire:
                await runtime.run(coordinator.expire_transactional_ids)
        except Exception:
            logger.exception("cannot abort timed-out transactions")
            continue
        while coordinator.late_commits:
            state.coordinator.apply_txn_offsets(coordinator.late_commits.pop(0))
        if aborted:
            await state.notify_data()


async def stop_transaction_timers(state: BrokerState) -> None:
    """Stop the timers, and wait for the operations in progress (before the log directory
    closes); the coordinator takes no more."""
    state.transactions_stop.set()
    if state.transactions_timer is not None:
        await state.transactions_timer
    await state.transactions_runtime.close()


async def _call(state: BrokerState, call: Callable[[], R]) -> R | None:
    """Run ``call`` on the coordinator's thread in its turn; None while loading."""
    if not state.transactions.loaded:
        return None
    result = await state.transactions_runtime.run(call)
    # Markers move last stable offsets: read_committed fetches may be waiting.
    await state.notify_data()
    return result


async def _call_op(state: BrokerState, op: Callable[[], Op[R]]) -> R | None:
    """Run the operation ``op()`` makes in the coordinator's turns; None while loading."""
    coordinator = state.transactions
    if not coordinator.loaded:
        return None
    result = await state.transactions_runtime.run_op(op(), coordinator.peers)
    await state.notify_data()
    return result


async def init_producer_id(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """InitProducerId for a transactional producer: its id and a new epoch."""
    coordinator = state.transactions
    result = await _call_op(
        state,
        lambda: coordinator.init_producer_id_op(
            body["transactional_id"],
            body["transaction_timeout_ms"],
            body.get("producer_id", -1),
            body.get("producer_epoch", -1),
        ),
    )
    if result is None:
        return {
            "throttle_time_ms": 0,
            "error_code": _code("COORDINATOR_LOAD_IN_PROGRESS"),
            "producer_id": -1,
            "producer_epoch": -1,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": _code(result.error),
        "producer_id": result.producer_id,
        "producer_epoch": result.producer_epoch,
    }


def _partition_results(
    topics: list[dict[str, Any]], errors: dict[tuple[str, int], str]
) -> list[dict[str, Any]]:
    return [
        {
            "name": topic["name"],
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": _code(errors[(topic["name"], p)])}
                for p in topic["partitions"]
            ],
        }
        for topic in topics
    ]


async def add_partitions_to_txn(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AddPartitionsToTxn: v0-3 for one producer, v4 for several (and KIP-890 verification)."""
    coordinator = state.transactions
    if header.api_version <= 3:
        transactions = [
            {
                "transactional_id": body["v3_and_below_transactional_id"],
                "producer_id": body["v3_and_below_producer_id"],
                "producer_epoch": body["v3_and_below_producer_epoch"],
                "verify_only": False,
                "topics": body["v3_and_below_topics"],
            }
        ]
    else:
        transactions = body["transactions"]
    results = []
    for txn in transactions:
        wanted = [(t["name"], p) for t in txn["topics"] for p in t["partitions"]]
        errors = await _call(
            state,
            functools.partial(
                coordinator.add_partitions,
                txn["transactional_id"],
                txn["producer_id"],
                txn["producer_epoch"],
                wanted,
                verify_only=txn.get("verify_only", False),
            ),
        )
        if errors is None:
            errors = dict.fromkeys(wanted, "COORDINATOR_LOAD_IN_PROGRESS")
        results.append(
            {
                "transactional_id": txn["transactional_id"],
                "topic_results": _partition_results(txn["topics"], errors),
            }
        )
    if header.api_version <= 3:
        return {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": results[0]["topic_results"],
        }
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


async def add_offsets_to_txn(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
    coordinator = state.transactions
    error = await _call(
        state,
        lambda: coordinator.add_offsets(
            body["transactional_id"], body["producer_id"], body["producer_epoch"], body["group_id"]
        ),
    )
    return {"throttle_time_ms": 0, "error_code": _code(error or "COORDINATOR_LOAD_IN_PROGRESS")}


async def txn_offset_commit(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """TxnOffsetCommit: offsets stored in the transaction, visible once it commits."""
    coordinator = state.transactions
    now = coordinator.now_ms()
    offsets: dict[tuple[str, int], CommittedOffset] = {}
    for topic in body["topics"]:
        for p in topic["partitions"]:
            offsets[(topic["name"], p["partition_index"])] = CommittedOffset(
                p["committed_offset"],
                p.get("committed_metadata") or "",
                now,
                p.get("committed_leader_epoch", -1),
                None,
            )
    # The member checks read the groups, which live on the event loop.
    group_error = state.coordinator.validate_txn_offset_commit(
        body["group_id"],
        body.get("generation_id", -1),
        body.get("member_id", ""),
        body.get("group_instance_id"),
    )
    errors = await _call_op(
        state,
        lambda: coordinator.commit_offsets_op(
            body["transactional_id"],
            body["group_id"],
            body["producer_id"],
            body["producer_epoch"],
            offsets,
            group_error=group_error or "NONE",
        ),
    )
    if errors is None:
        errors = dict.fromkeys(offsets, "COORDINATOR_LOAD_IN_PROGRESS")
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": _code(errors[(topic["name"], p["partition_index"])]),
                    }
                    for p in topic["partitions"]
                ],
            }
            for topic in body["topics"]
        ],
    }


async def end_txn(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """EndTxn: markers written and fsynced, the outcome stored, then the answer."""
    coordinator = state.transactions
    result = await _call_op(
        state,
        lambda: coordinator.end_txn_op(
            body["transactional_id"],
            body["producer_id"],
            body["producer_epoch"],
            body["committed"],
        ),
    )
    if result is None:
        return {"throttle_time_ms": 0, "error_code": _code("COORDINATOR_LOAD_IN_PROGRESS")}
    if result.committed_offsets:
        state.coordinator.apply_txn_offsets(result.committed_offsets)
    return {"throttle_time_ms": 0, "error_code": _code(result.error)}


#: How long WriteTxnMarkers waits for the coordinator's state to load before it
#: answers NOT_LEADER_OR_FOLLOWER (retriable: the sender tries again).
_LOAD_WAIT_SECONDS = 5.0


async def write_txn_markers(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """WriteTxnMarkers: each marker appended to its partitions and fsynced, then the answer.

    Partitions are written by the same function as the coordinator's own
    markers, in the coordinator's turn, so that a marker and an EndTxn of the
    same producer never interleave; a marker in ``__consumer_offsets`` settles the
    producer's offsets held there, and a commit's are handed to the groups.
    """
    coordinator = state.transactions
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _LOAD_WAIT_SECONDS
    while not coordinator.loaded and loop.time() < deadline:
        await asyncio.sleep(0.02)
    results = []
    for marker in body["markers"]:
        wanted = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        outcome = await _call(
            state,
            functools.partial(
                coordinator.markers.write_markers,
                marker["producer_id"],
                marker["producer_epoch"],
                list(dict.fromkeys(wanted)),
                commit=marker["transaction_result"],
                coordinator_epoch=marker["coordinator_epoch"],
            ),
        )
        if outcome is None:
            errors = dict.fromkeys(wanted, "NOT_LEADER_OR_FOLLOWER")
        else:
            errors, committed = outcome
            if committed:
                state.coordinator.apply_txn_offsets(committed)
        results.append(
            {
                "producer_id": marker["producer_id"],
                "topics": [
                    {
                        "name": topic["name"],
                        "partitions": [
                            {
                                "partition_index": p,
                                "error_code": _code(errors[(topic["name"], p)]),
                            }
                            for p in topic["partition_indexes"]
                        ],
                    }
                    for topic in marker["topics"]
                ],
            }
        )
    return {"markers": results}


async def describe_transactions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """DescribeTransactions: each id's state, producer and partitions."""
    coordinator = state.transactions
    wanted: list[str] = body["transactional_ids"]
    found = (
        await state.transactions_runtime.run(lambda: [coordinator.describe(t) for t in wanted])
        if coordinator.loaded
        else [None] * len(wanted)
    )
    described = []
    for tid, meta in zip(wanted, found, strict=True):
        if meta is None:
            error = (
                "TRANSACTIONAL_ID_NOT_FOUND"
                if coordinator.loaded
                else ("COORDINATOR_LOAD_IN_PROGRESS")
            )
            described.append(
                {
                    "error_code": _code(error),
                    "transactional_id": tid,
                    "transaction_state": "",
                    "transaction_timeout_ms": 0,
                    "transaction_start_time_ms": -1,
                    "producer_id": -1,
                    "producer_epoch": -1,
                    "topics": [],
                }
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        described.append(
            {
                "error_code": 0,
                "transactional_id": tid,
                "transaction_state": meta.state.kafka_name,
                "transaction_timeout_ms": meta.timeout_ms,
                "transaction_start_time_ms": meta.start_ms,
                "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()],
            }
        )
    return {"throttle_time_ms": 0, "transaction_states": described}


async def list_transactions(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """ListTransactions: ids filtered by state, producer id and (v1) duration."""
    coordinator = state.transactions
    if not coordinator.loaded:
        return {
            "throttle_time_ms": 0,
            "error_code": _code("COORDINATOR_LOAD_IN_PROGRESS"),
            "unknown_state_filters": [],
            "transaction_states": [],
        }
    found, unknown = await state.transactions_runtime.run(
        lambda: coordinator.list_transactions(
            body["state_filters"], body["producer_id_filters"], body.get("duration_filter", -1)
        )
    )
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": meta.transactional_id,
                "producer_id": meta.producer_id,
                "transaction_state": meta.state.kafka_name,
            }
            for meta in sorted(found, key=lambda m: m.transactional_id)
        ],
    }
