"""``flush.messages``: the fsync runs in a worker thread and the answer waits for it.

These tests call the Produce handler in-process over a real log directory,
with a disk made slow through the storage layer's I/O seam, so that what the
event loop does while the disk works can be observed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.handlers.produce import produce
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.protocol import ApiKey, error_codes
from seglog.protocol.headers import RequestHeader
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import io
from seglog.storage.log_dir import LogDir, LogDirSettings

# The connection the handlers are called for (outside a real one).
CLIENT = Session(BrokerSettings().listeners[0], host="127.0.0.1")

HEADER = RequestHeader(ApiKey.PRODUCE, 9, 1, "test")


class ScriptedDisk(io.Env):
    """The real file system, with its fsyncs held, failed or counted on demand.

    Given to the log directory as its environment.
    ``hold`` keeps every fsync waiting until ``release`` is set and records the
    thread each ran in; ``fail`` makes every file fsync raise EIO; ``calls``
    counts the fsyncs of files and directories.
    """

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.fail = False
        self.calls = 0
        self.threads: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.done = 0

    def _before_sync(self) -> None:
        self.calls += 1
        if self.hold:
            self.threads.append(threading.get_ident())
            self.started.set()
            assert self.release.wait(10), "the test never released the disk"

    def fsync(self, target: io.FileTarget, *, name: object = None) -> None:
        self._before_sync()
        if self.fail:
            raise io.storage_error("fsync", name or target, OSError(5, "Input/output error"))
        super().fsync(target, name=name)
        if self.hold:
            self.done += 1

    def fsync_dir(self, path: Path | str) -> None:
        self._before_sync()
        super().fsync_dir(path)
        if self.hold:
            self.done += 1


@pytest.fixture
def disk() -> Iterator[ScriptedDisk]:
    env = ScriptedDisk()
    yield env
    env.shutdown()


@pytest.fixture
def log_dir(tmp_path: Path, disk: ScriptedDisk) -> Iterator[LogDir]:
    settings = LogDirSettings(log_cleaner_enable=False)
    with LogDir.open(tmp_path, settings=settings, env=disk) as opened:
        yield opened
        disk.fail = disk.hold = False  # the directory closes over a working disk


def _body(topic: str, records: bytes, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def _batch(value: bytes, timestamp: int) -> bytes:
    return build_batch([SimpleRecord(value, b"k", timestamp)])


async def _produce_with_slow_disk(
    state: BrokerState, disk: ScriptedDisk, topic: str, records: bytes
) -> dict[str, Any]:
    """Produce while the disk is held; check what the loop does meanwhile."""
    log = state.log_dir.log(topic, 0)
    hw_before = log.high_watermark
    task = asyncio.create_task(produce(state, HEADER, _body(topic, records), CLIENT))
    loop_thread = threading.get_ident()
    # The loop keeps running while the fsync waits for the disk...
    ticks = 0
    deadline = time.monotonic() + 60
    while not disk.started.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        ticks += 1
    assert disk.started.is_set(), "no fsync was made"
    for _ in range(5):
        await asyncio.sleep(0.01)
        ticks += 1
    # ... the producer has no answer yet, and consumers do not see the batch.
    assert not task.done()
    assert log.high_watermark == hw_before
    assert ticks >= 5
    disk.release.set()
    response = await task
    assert disk.done > 0 and disk.done == len(disk.threads)
    assert loop_thread not in disk.threads, "an fsync ran on the event loop"
    result: dict[str, Any] = response["responses"][0]["partition_responses"][0]
    return result


def test_flush_messages_fsyncs_off_the_loop_before_the_answer(
    log_dir: LogDir, disk: ScriptedDisk
) -> None:
    log_dir.create_topic("t", 1, {"flush.messages": "1", "segment.ms": "1"})
    now = int(time.time() * 1000)

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        first = await produce(state, HEADER, _body("t", _batch(b"first", now - 1000)), CLIENT)
        assert first["responses"][0]["partition_responses"][0]["error_code"] == 0
        log = log_dir.log("t", 0)
        assert log.recovery_point == 1 and log.high_watermark == 1
        # The second batch is 100 ms younger: it rolls a segment (segment.ms=1),
        # whose producer snapshot is fsynced in the same worker thread.
        disk.hold = True
        result = await _produce_with_slow_disk(state, disk, "t", _batch(b"second", now - 900))
        assert result["error_code"] == 0 and result["base_offset"] == 1
        assert len(log.segments) == 2
        assert log.recovery_point == 2 and log.high_watermark == 2
        state.coordinator.shutdown()

    asyncio.run(main())


def test_without_flush_messages_a_produce_makes_no_fsync(
    log_dir: LogDir, disk: ScriptedDisk
) -> None:
    log_dir.create_topic("t", 1, {"segment.ms": "1"})
    now = int(time.time() * 1000)
    disk.calls = 0

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        for i in range(3):  # each batch rolls a segment and snapshots the producer state
            response = await produce(
                state, HEADER, _body("t", _batch(b"v", now - 1000 + i * 100)), CLIENT
            )
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
        state.coordinator.shutdown()

    asyncio.run(main())
    assert len(log_dir.log("t", 0).segments) == 3
    assert disk.calls == 0
    # The snapshots taken at the rolls are fsynced by the next flush.
    log_dir.log("t", 0).flush()
    assert disk.calls >= 3  # two snapshots and the active segment's .log at least


def test_a_failed_fsync_is_not_acknowledged(log_dir: LogDir, disk: ScriptedDisk) -> None:
    log_dir.create_topic("t", 1, {"flush.messages": "1"})
    now = int(time.time() * 1000)
    disk.fail = True

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        response = await produce(state, HEADER, _body("t", _batch(b"v", now)), CLIENT)
        result = response["responses"][0]["partition_responses"][0]
        assert result["error_code"] != 0 and result["base_offset"] == -1
        assert "Input/output error" in result["error_message"]
        # Not durable, so not visible to consumers either.
        assert log_dir.log("t", 0).high_watermark == 0
        state.coordinator.shutdown()

    asyncio.run(main())


def test_a_retry_after_a_failed_fsync_is_refused_until_a_restart(
    log_dir: LogDir, disk: ScriptedDisk
) -> None:
    """After a failed fsync the kernel may have dropped the batch's pages for good, so
    a later fsync that succeeds proves nothing: the partition is offline (Kafka's
    failed log directory) and the producer's retry is refused, not acknowledged."""
    log_dir.create_topic("t", 1, {"flush.messages": "1"})
    records = build_batch(
        [SimpleRecord(b"v", b"k", int(time.time() * 1000))],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    storage_error = error_codes.code_for("KAFKA_STORAGE_ERROR")

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        disk.fail = True
        failed = await produce(state, HEADER, _body("t", records), CLIENT)
        assert failed["responses"][0]["partition_responses"][0]["error_code"] == storage_error
        disk.fail = False
        # The producer retries the same batch: refused, the disk looking well again or not.
        retried = await produce(state, HEADER, _body("t", records), CLIENT)
        result = retried["responses"][0]["partition_responses"][0]
        assert result["error_code"] == storage_error and result["base_offset"] == -1
        assert "offline" in result["error_message"]
        log = log_dir.log("t", 0)
        assert log.recovery_point == 0 and log.high_watermark == 0
        state.coordinator.shutdown()

    asyncio.run(main())
