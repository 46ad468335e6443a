"""The registry's state in a broker: read from ``_schemas``, changed by one writer.

As in Confluent's registry, every change goes through one writer and every
instance reads the topic to know the state. The writer is whichever node
leads ``_schemas``' one partition (the broker itself when alone): a change
asked of another node is sent to it over the nodes' control channel
(:data:`OP`). The writer runs changes one at a time on a thread of its own
(:class:`~seglog.broker.coordinator_runtime.CoordinatorRuntime`): it catches
up with the topic, checks the change against the state, appends and fsyncs
its records, and reads them back; only then is the change answered. The
state changes only by records read from the topic, so a record written by
anyone else (``seglog mirror`` copying a registry in) is taken in too.

The topic is read as a read_committed consumer reads it (as
:func:`seglog.schemas.log_dir.read_registry` reads a log directory): records
of an aborted transaction are never taken in, and an open one holds back
everything after it until it ends. The writer appends only once it has read
the whole log: an id or version chosen while records it cannot see yet sit
in the log could be one they already hold. So a transaction left open in
``_schemas`` holds changes back (:data:`UNDECIDED_WAIT`, then 50002) until
it commits or the transaction coordinator aborts it.

A read catches up first: the writer from its own log, any other node by
asking the leader for the records it has not seen (a
:mod:`~seglog.broker.http_api.partition_query` question), so that a schema
registered through one node is known to every node as soon as it is answered.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from seglog.broker.coordinator_runtime import CoordinatorRuntime
from seglog.broker.http_api import partition_facts, partition_query
from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.state import BrokerState
from seglog.errors import RecordTooLargeError, StorageError
from seglog.schemas.log_records import SCHEMAS_TOPIC
from seglog.schemas.registry import RegistryError, RegistryReads, RegistryWrites
from seglog.schemas.registry_state import RegistryState
from seglog.schemas.schema_log import SchemaLog
from seglog.storage import checkpoints

__all__ = ["OP", "RegistryStore"]

logger = logging.getLogger(__name__)

OP = "schema_registry"
"""The control-channel op by which a node hands a change to the writer."""
PAGE = 1000
"""Records read from ``_schemas`` per question."""
FORWARD_TIMEOUT = 60.0
UNDECIDED_WAIT = 5.0
"""How long a change waits for an open transaction in ``_schemas`` to end (seconds)."""
UNDECIDED_POLL = 0.05

T = TypeVar("T")


@dataclass(frozen=True)
class RegistryFigures:
    """What ``/metrics`` tells of the registry."""

    versions: dict[tuple[str, bool], int]
    """Versions by (schema type, soft-deleted)."""
    subjects: int
    writer: bool


class RegistryStore:
    """One broker's view of the registry, and the writer's changes if it is the writer."""

    def __init__(self, state: BrokerState) -> None:
        self._broker = state
        self._log = SchemaLog(state.log_dir, state.topic_admin)
        self._state = RegistryState()
        self._next_offset = 0
        self._high_watermark = 0
        self._topic_id: uuid.UUID | None = None
        """The id of the ``_schemas`` the state is folded from."""
        self._runtime = CoordinatorRuntime("schema-registry")
        # Readers on the event loop and the writer's thread take turns at the state.
        self._lock = threading.Lock()

    async def start(self) -> None:
        """Create ``_schemas`` if needed, and check it, as Confluent's registry does when it
        starts (InvalidConfigError for a topic that would lose schemas)."""
        await asyncio.to_thread(self._log.ensure_topic)
        await asyncio.to_thread(self._log.check_topic)

    async def close(self) -> None:
        """Stop the writer's thread (after the change under way)."""
        await self._runtime.close()

    # ---------------------------------------------------------------- roles

    def _info(self) -> Any:
        return self._broker.log_dir.topic(SCHEMAS_TOPIC)

    def is_writer(self) -> bool:
        """Whether this broker leads ``_schemas`` (and so makes every change)."""
        info = self._info()
        return info is not None and self._broker.log_dir.serves_partition(SCHEMAS_TOPIC, 0)

    def writer_id(self) -> int:
        """The node that makes the changes."""
        info = self._info()
        if info is None:
            raise RegistryError(500, 50001, f"the topic {SCHEMAS_TOPIC} does not exist")
        return self._broker.cluster.leader(info, 0)

    def figures(self) -> RegistryFigures:
        """Counts of the state as last read, for ``/metrics`` (any thread)."""
        versions: dict[tuple[str, bool], int] = {}
        with self._lock:
            for stored in self._state.all_schemas(deleted=True):
                key = (stored.schema_type, stored.deleted)
                versions[key] = versions.get(key, 0) + 1
            subjects = len(self._state.subjects())
        return RegistryFigures(versions, subjects, self.is_writer())

    # ---------------------------------------------------------------- reads

    async def read(self, question: Callable[[RegistryReads], T]) -> T:
        """``question`` answered from the state, caught up with the topic first."""
        if self.is_writer():
            return await self._runtime.run(lambda: self._read_local(question))
        await self._catch_up_remote()
        with self._lock:
            return question(RegistryReads(self._state))

    def _read_local(self, question: Callable[[RegistryReads], T]) -> T:
        self._catch_up_local()
        with self._lock:
            return question(RegistryReads(self._state))

    def _follow_topic(self, info: Any) -> None:
        """Start over from an empty state when ``_schemas`` is not the topic folded so far.

        Deleted (and perhaps made again) under a running broker, the topic the state was
        folded from is gone: answering from it, or skipping the new topic's first records
        as offsets already read, would serve what no restart could see.
        """
        topic_id = None if info is None else info.topic_id
        if topic_id == self._topic_id:
            return
        if self._topic_id is not None:
            logger.warning("%s was deleted: the registry starts over", SCHEMAS_TOPIC)
        self._start_over(topic_id)

    def _start_over(self, topic_id: uuid.UUID | None) -> None:
        with self._lock:
            self._topic_id = topic_id
            self._state = RegistryState()
            self._next_offset = self._high_watermark = 0

    def _cleaned_past(self) -> bool:
        """Whether the cleaner has compacted records this state has not read yet.

        The state is read lazily, at requests, so it may lag far behind the log: a
        registry nobody asked for a day while records came in (``seglog mirror``
        copying a registry in, another node's writes). Compaction of records not
        read yet is harmless, except for a tombstone removed past
        ``delete.retention.ms``: the version it deleted, read before, would stay.
        Tombstones go only where the cleaner has been (below the first dirty offset
        of ``cleaner-offset-checkpoint``), so a state read past that point misses
        none; else it is read again from the start.
        """
        if self._next_offset == 0:
            return False
        path = self._broker.log_dir.path / checkpoints.CLEANER_OFFSET_CHECKPOINT
        try:
            first_dirty = checkpoints.read_offset_checkpoint(path, env=self._broker.log_dir.env)
        except StorageError:
            return False  # the cleaner starts over from the log's start: nothing removed
        return first_dirty.get((SCHEMAS_TOPIC, 0), 0) > self._next_offset

    def _read_again_if_cleaned(self, info: Any) -> None:
        if self._cleaned_past():
            logger.info(
                "%s was compacted past offset %d, where the registry had read it to: "
                "reading it again from its start",
                SCHEMAS_TOPIC,
                self._next_offset,
            )
            self._start_over(info.topic_id)

    def _catch_up_local(self) -> None:
        """Fold in the records of the local ``_schemas`` not seen yet (writer's thread)."""
        info = self._info()
        self._follow_topic(info)
        if info is None:
            return
        if self._broker.log_dir.log(SCHEMAS_TOPIC, 0).high_watermark <= self._next_offset:
            return  # nothing new: most requests
        self._read_again_if_cleaned(info)
        while True:
            page = partition_query.answer_local(
                self._broker.log_dir,
                partition_facts.RECORDS,
                [(SCHEMAS_TOPIC, 0)],
                _page_args(self._next_offset),
            )[0]
            if not self._fold(page):
                return

    async def _catch_up_remote(self) -> None:
        info = self._info()
        self._follow_topic(info)
        if info is None:
            return
        self._read_again_if_cleaned(info)
        while True:
            try:
                page = (
                    await partition_query.ask(
                        self._broker.log_dir,
                        self._broker.cluster,
                        info,
                        [0],
                        partition_facts.RECORDS,
                        _page_args(self._next_offset),
                    )
                )[0]
            except ControllerUnavailableError as exc:
                raise RegistryError(
                    500,
                    50004,
                    f"the registry's writer (node {self.writer_id()}) is not available: {exc}",
                ) from exc
            if not self._fold(page):
                return

    def _fold(self, page: dict[str, Any]) -> bool:
        """Apply a page of records; whether there may be more."""
        with self._lock:
            for record in page["records"]:
                if record["offset"] < self._next_offset:
                    continue
                self._state.apply(
                    _bytes(record["key"], record["key_encoding"]),
                    _bytes(record["value"], record["value_encoding"]),
                )
            moved = page["next_offset"] > self._next_offset
            self._next_offset = max(self._next_offset, page["next_offset"])
            self._high_watermark = int(page["high_watermark"])
        return moved and self._next_offset < self._high_watermark

    # ---------------------------------------------------------------- changes

    async def change(self, operation: str, args: dict[str, Any]) -> Any:
        """Carry out ``RegistryWrites.<operation>(**args)``: here if this broker is the
        writer, else on the writer; its answer (RegistryError as the writer refused)."""
        if self._info() is None:
            await self.start()
        if self.is_writer():
            return await self._runtime.run(lambda: self._change_local(operation, args))
        writer = self.writer_id()
        request = {"op": OP, "operation": operation, "args": args}
        try:
            answer = await asyncio.to_thread(
                self._broker.cluster.control, writer, request, FORWARD_TIMEOUT
            )
        except ControllerUnavailableError as exc:
            raise RegistryError(
                500,
                50003,
                f"Error while forwarding the request to the writer (node {writer}): {exc}",
            ) from exc
        if "registry_error" in answer:
            error = answer["registry_error"]
            raise RegistryError(
                int(error["status"]), int(error["error_code"]), str(error["message"])
            )
        return answer["answer"]

    def serve_forwarded(self, request: dict[str, Any]) -> dict[str, Any]:
        """The writer's side of :data:`OP` (on a control-channel thread)."""
        operation, args = str(request["operation"]), dict(request["args"])
        future = self._runtime.submit(lambda: self._change_local(operation, args))
        try:
            return {"ok": True, "answer": future.result(timeout=FORWARD_TIMEOUT)}
        except RegistryError as exc:
            return {
                "ok": True,
                "registry_error": {
                    "status": exc.status,
                    "error_code": exc.error_code,
                    "message": exc.message,
                },
            }

    def _catch_up_whole_log(self) -> None:
        """Catch up to the log's end, past any open transaction once it ends (writer's thread).

        RegistryError 50002 when one is still open after :data:`UNDECIDED_WAIT`.
        """
        deadline = time.monotonic() + UNDECIDED_WAIT
        self._catch_up_local()
        while self._next_offset < self._high_watermark:
            if time.monotonic() >= deadline:
                raise RegistryError(
                    500,
                    50002,
                    f"{SCHEMAS_TOPIC} holds an open transaction from offset "
                    f"{self._next_offset}: no change is made until it ends",
                )
            time.sleep(UNDECIDED_POLL)
            self._catch_up_local()

    def _change_local(self, operation: str, args: dict[str, Any]) -> Any:
        if not self.is_writer():
            raise RegistryError(500, 50004, "this node is no longer the registry's writer")
        self._catch_up_whole_log()
        with self._lock:
            answer, records = getattr(RegistryWrites(self._state), operation)(**args)
        if records:
            try:
                self._log.append(records)
            except RecordTooLargeError as exc:
                # A _schemas made with Kafka's default max.message.bytes (by another
                # registry, or mirrored from one) refuses large schemas: nothing was written.
                raise RegistryError(
                    500, 50001, f"Error while writing to {SCHEMAS_TOPIC}: {exc}"
                ) from exc
            self._catch_up_local()
        return answer


def _page_args(offset: int) -> dict[str, Any]:
    return {"offset": offset, "limit": PAGE, "read_committed": True}


def _bytes(text: str | None, encoding: str) -> bytes | None:
    if text is None:
        return None
    if encoding == "base64":
        return base64.b64decode(text)
    return text.encode()
