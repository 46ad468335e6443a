"""Produce and InitProducerId.

A Produce appends each partition's batch on the event loop, in the order the
requests arrive (a write to the page cache), so appends to one partition keep
their order. An append that reaches ``flush.messages`` leaves its fsync to
this handler, which runs it in a worker thread and answers only once it is
done: an acknowledged batch of a topic with ``flush.messages=1`` is on disk,
and the event loop never waits for an fsync. (A roll still creates the new
segment's files on the loop; the producer snapshot it writes is fsynced by
that same flush, or the next one.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from seglog.broker.blocking import run_blocking
from seglog.broker.handlers import transactions
from seglog.broker.handlers.metadata import auto_create
from seglog.broker.security.session import Session
from seglog.broker.state import BrokerState
from seglog.errors import InvalidRecordError, SeglogError, StorageError
from seglog.protocol import error_codes
from seglog.protocol.bodies import RequestRecords
from seglog.protocol.bodies.produce import (
    ProduceRequest,
    ProduceResponse,
    ProduceResponseResponses,
    ProduceResponseResponsesPartitionResponses,
    ProduceResponseResponsesPartitionResponsesRecordErrors,
)
from seglog.protocol.entries import failed_as
from seglog.protocol.headers import RequestHeader
from seglog.records import batch
from seglog.storage import filenames
from seglog.storage.log import Log

_REQUIRED_ACKS = (0, 1, -1)

_Partition = ProduceResponseResponsesPartitionResponses
"""A partition's answer."""


def _single_batch_error(records: RequestRecords) -> str | None:
    """Kafka's rule for Produce v3+: exactly one v2 batch per partition."""
    if batch.peek_magic(records, 0) != batch.CURRENT_MAGIC:
        return None  # a legacy message set: converted on append
    _, size = batch.peek_offset_and_size(records, 0)
    if size < len(records):
        return (
            "produce requests of version 3 and later may hold only one record batch per partition"
        )
    return None


# A partition's answer, and the log to flush before it is sent (None if none).
_Appended = tuple[_Partition, Log | None]


async def _unverified_transaction(
    state: BrokerState,
    transactional_id: str,
    topic: str,
    partition: int,
    records: RequestRecords | None,
) -> str | None:
    """Why a transactional batch may not go to this partition, or None if it may.

    The question goes to the id's coordinator (in its turn, or to the node
    that coordinates it), awaited: the event loop serves other clients
    meanwhile. As in Kafka, only a producer's first batch of a transaction in
    a partition is verified: once its transaction is open there at this
    epoch, the partition joined it (a marker closes it).
    """
    coordinator = state.transactions
    if (
        records is None
        or len(records) < batch.HEADER_SIZE
        or batch.peek_magic(records, 0) != batch.CURRENT_MAGIC
        or not coordinator.loaded
    ):
        return None
    # The header's fields only (the append checks the batch itself).
    header = batch.BatchHeader._make(batch.HEADER.unpack_from(records, 0))
    if not header.is_transactional:
        return None
    try:
        entry = state.log_dir.log(topic, partition).producer_state.producers.get(header.producer_id)
    except SeglogError:
        entry = None  # not here (yet): the coordinator is asked all the same
    if (
        entry is not None
        and entry.epoch == header.producer_epoch
        and entry.current_txn_first_offset >= 0
    ):
        return None
    error = await state.transactions_runtime.run_op(
        coordinator.verify_partition_op(
            transactional_id, header.producer_id, header.producer_epoch, topic, partition
        ),
        coordinator.peers,
    )
    return None if error == "NONE" else error


async def _verify_transaction(
    state: BrokerState, body: ProduceRequest
) -> dict[tuple[str, int], str]:
    """The partitions of a transactional Produce that may not take its batch, and why.

    All asked at once, before any partition is appended, so that the appends
    themselves still run in one go on the event loop.
    """
    transactional_id = body.get("transactional_id")
    if transactional_id is None:
        return {}
    asked = [
        (topic_data["name"], data["index"], data["records"])
        for topic_data in body["topic_data"]
        for data in topic_data["partition_data"]
    ]
    answers = await asyncio.gather(
        *(
            _unverified_transaction(state, transactional_id, topic, partition, records)
            for topic, partition, records in asked
        )
    )
    return {
        (topic, partition): error
        for (topic, partition, _), error in zip(asked, answers, strict=True)
        if error is not None
    }


def _append(
    state: BrokerState,
    topic: str,
    partition: int,
    records: RequestRecords | None,
    version: int,
    transactional_id: str | None = None,
    refused: str | None = None,
) -> _Appended:
    result = _Partition(
        index=partition,
        error_code=0,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
        error_message=None,
    )
    if records is None or len(records) == 0:
        result["error_code"] = error_codes.code_for("INVALID_RECORD")
        result["error_message"] = "the produce request holds no records"
        return result, None
    if version >= 3 and len(records) >= batch.HEADER_SIZE:
        message = _single_batch_error(records)
        if message is not None:
            result["error_code"] = error_codes.code_for("INVALID_RECORD")
            result["error_message"] = message
            return result, None
    if transactional_id is not None and refused is not None:
        result["error_code"] = error_codes.code_for(refused)
        result["error_message"] = (
            f"{topic}-{partition} is not part of the open transaction of {transactional_id}"
        )
        return result, None
    try:
        log = state.log_dir.log(topic, partition)
        info = log.append(records, defer_flush=True)
    except InvalidRecordError as exc:
        # KIP-467: the records that broke a rule, so that a producer fails
        # exactly those and retries the rest of the batch (v8+ carries them).
        result["error_code"] = error_codes.code_for_exception(exc)
        result["error_message"] = str(exc)
        result["record_errors"] = [
            ProduceResponseResponsesPartitionResponsesRecordErrors(
                batch_index=index, batch_index_error_message=message
            )
            for index, message in exc.record_errors
        ]
        return result, None
    except SeglogError as exc:
        if isinstance(exc, StorageError):
            state.storage_errors.report("an append to", topic, partition, exc)
        result["error_code"] = error_codes.code_for_exception(exc)
        result["error_message"] = str(exc)
        return result, None
    if not info.duplicate:  # a retry that wrote nothing moves nothing in
        state.metrics.produced(topic, info.record_count, info.size)
    result["base_offset"] = info.first_offset
    result["log_append_time_ms"] = info.log_append_time
    result["log_start_offset"] = info.log_start_offset
    # A retry of a batch whose first append was written but not yet fsynced (its
    # flush still running) is acknowledged only once it is. (After a failed fsync
    # the partition is offline and the retry never gets this far.)
    unsynced_duplicate = (
        info.duplicate
        and log.recovery_point <= info.last_offset
        and log.unflushed_messages >= log.config.flush_messages
    )
    return result, (log if info.flush_needed or unsynced_duplicate else None)


async def _flush(state: BrokerState, log: Log, result: _Partition) -> None:
    """fsync ``log`` up to the batch ``result`` answers for, on its environment's threads."""
    try:
        # Up to the log end: one fsync covers this batch and any appended since.
        await run_blocking(log.env, log.flush)
    except SeglogError as exc:
        if isinstance(exc, StorageError):
            state.storage_errors.report("a flush of", log.topic, log.partition, exc)
        # Written but not known to be durable: the producer must not take it as acknowledged.
        result["error_code"] = error_codes.code_for_exception(exc)
        result["error_message"] = str(exc)
        result["base_offset"] = -1
        result["log_append_time_ms"] = -1


async def produce(
    state: BrokerState, header: RequestHeader, body: ProduceRequest, session: Session
) -> ProduceResponse | None:
    """Produce: validate and append each partition's batches; None for acks=0."""
    acks = body["acks"]
    responses: list[ProduceResponseResponses] = []
    flushes = []
    refusals = await _verify_transaction(state, body)
    # Partitions an append went to (or failed on, taking it offline, say): their
    # waiting fetches are checked once the appends are done.
    touched: list[tuple[str, int]] = []
    for topic_data in body["topic_data"]:
        name = topic_data["name"]
        known = state.log_dir.has_topic(name)
        # Auto-creation refuses internal topics: an absent one is unknown, as in Kafka.
        error = 0 if known else (await auto_create(state, name))[name]
        # A client's record in an internal topic could make its coordinator misread
        # its state, so a Produce to one is refused whoever sends it (Kafka lets the
        # client id "__admin_client" through; seglog has no tool that needs that door).
        internal = filenames.is_internal(name)
        partitions: list[_Partition] = []
        for partition_data in topic_data["partition_data"]:
            index = partition_data["index"]
            if acks not in _REQUIRED_ACKS:
                code = error_codes.code_for("INVALID_REQUIRED_ACKS")
                partitions.append(failed_as(_Partition, code, index=index))
            elif internal and not error:
                # Kafka's ReplicaManager.appendToLocalLog with internalTopicsAllowed=false.
                # Kafka leaves the message out of the answer; it is given here to say why.
                code = error_codes.code_for("INVALID_TOPIC_EXCEPTION")
                message = f"Cannot append to internal topic {name}"
                partitions.append(failed_as(_Partition, code, index=index, error_message=message))
            elif error and not state.log_dir.has_topic(name):
                partitions.append(failed_as(_Partition, error, index=index))
            else:
                result, log = _append(
                    state,
                    name,
                    index,
                    partition_data["records"],
                    header.api_version,
                    body.get("transactional_id"),
                    refusals.get((name, index)),
                )
                partitions.append(result)
                touched.append((name, index))
                if log is not None:
                    flushes.append(_flush(state, log, result))
        responses.append(ProduceResponseResponses(name=name, partition_responses=partitions))
    if flushes:
        await asyncio.gather(*flushes)
    if touched:
        await state.notify_data(touched)
    if acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


async def init_producer_id(
    state: BrokerState, header: RequestHeader, body: dict[str, Any], session: Session
) -> dict[str, Any]:
    """InitProducerId: idempotent producers here, transactional ones by the coordinator."""
    if body.get("transactional_id") is not None:
        return await transactions.init_producer_id(state, header, body)
    producer_id = body.get("producer_id", -1)
    epoch = body.get("producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < 32766:
        # A producer bumping its epoch after an error keeps its id.
        await asyncio.sleep(0)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "producer_id": producer_id,
            "producer_epoch": epoch + 1,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": state.next_producer_id(),
        "producer_epoch": 0,
    }
