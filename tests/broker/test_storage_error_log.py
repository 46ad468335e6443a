"""Storage errors answered KAFKA_STORAGE_ERROR are logged with their cause, once a minute.

The Produce and Fetch handlers run in-process over a log directory on the
faulty file system of the storage tests; the log records are captured.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.handlers.fetch import fetch
from seglog.broker.handlers.produce import produce
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.broker.storage_errors import StorageErrorLog
from seglog.protocol import ApiKey, error_codes
from seglog.protocol.headers import RequestHeader
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.faulty_env import FaultyEnv, installed

# The connection the handlers are called for (outside a real one).
CLIENT = Session(BrokerSettings().listeners[0], host="127.0.0.1")

PRODUCE = RequestHeader(ApiKey.PRODUCE, 9, 1, "test")
FETCH = RequestHeader(ApiKey.FETCH, 12, 2, "test")
STORAGE_ERROR = error_codes.code_for("KAFKA_STORAGE_ERROR")
LOGGER = "seglog.broker.storage_errors"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env(tmp_path: Path) -> Iterator[FaultyEnv]:
    with installed(tmp_path) as faulty:
        yield faulty


@pytest.fixture
def log_dir(tmp_path: Path, env: FaultyEnv) -> Iterator[LogDir]:
    opened = LogDir.open(tmp_path, settings=LogDirSettings(log_cleaner_enable=False))
    opened.create_topic("t", 2)
    yield opened
    env.clear_faults()
    opened.close()


def _produce_body(partition: int, value: bytes) -> dict[str, Any]:
    records = build_batch([SimpleRecord(value, None, int(time.time() * 1000))])
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": partition, "records": records}]}],
    }


def _fetch_body(partition: int) -> dict[str, Any]:
    return {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
    }


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]


def test_produce_storage_errors_are_logged_once_a_minute_per_partition(
    log_dir: LogDir, env: FaultyEnv, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        state.storage_errors = StorageErrorLog(clock=clock)

        async def answer(partition: int) -> int:
            response = await produce(state, PRODUCE, _produce_body(partition, b"v"), CLIENT)
            code: int = response["responses"][0]["partition_responses"][0]["error_code"]
            return code

        env.fail("pwritev", error=errno.EIO, in_dir="t-0")
        assert await answer(0) == STORAGE_ERROR
        for _ in range(5):  # offline now: refused again and again
            assert await answer(0) == STORAGE_ERROR
        (first,) = _errors(caplog)
        assert "partition 0 of topic t" in first.getMessage()
        assert "Input/output error" in first.getMessage()
        assert first.exc_info is not None  # the traceback of the cause
        # Another partition's error is its own line.
        env.fail("pwritev", error=errno.ENOSPC, in_dir="t-1")
        assert await answer(1) == STORAGE_ERROR
        assert len(_errors(caplog)) == 2
        # A minute later the partition's next error is logged, with the count left out.
        clock.now += 60
        assert await answer(0) == STORAGE_ERROR
        errors = _errors(caplog)
        assert len(errors) == 3
        assert "5 more storage error(s)" in errors[-1].getMessage()
        assert "offline" in errors[-1].getMessage()
        state.coordinator.shutdown()

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        asyncio.run(main())


def test_a_failed_flush_of_a_produce_is_logged(
    tmp_path: Path, env: FaultyEnv, caplog: pytest.LogCaptureFixture
) -> None:
    log_dir = LogDir.open(tmp_path, settings=LogDirSettings(log_cleaner_enable=False))
    log_dir.create_topic("t", 2, {"flush.messages": "1"})

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        env.fail("fsync", error=errno.EIO, named="*.log")
        response = await produce(state, PRODUCE, _produce_body(0, b"v"), CLIENT)
        assert response["responses"][0]["partition_responses"][0]["error_code"] == STORAGE_ERROR
        (record,) = _errors(caplog)
        assert "a flush of partition 0 of topic t" in record.getMessage()
        assert "fsync" in record.getMessage() and record.exc_info is not None
        state.coordinator.shutdown()

    try:
        with caplog.at_level(logging.ERROR, logger=LOGGER):
            asyncio.run(main())
    finally:
        log_dir.close()


def test_fetch_storage_errors_are_logged_once_a_minute(
    log_dir: LogDir, env: FaultyEnv, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()

    async def main() -> None:
        state = BrokerState(BrokerSettings(), log_dir)
        state.storage_errors = StorageErrorLog(clock=clock)
        for value in (b"a", b"b"):
            await produce(state, PRODUCE, _produce_body(0, value), CLIENT)
        env.fail("pread", error=errno.EIO, named="*.log", times=1000)
        for _ in range(3):
            response = await fetch(state, FETCH, _fetch_body(0), CLIENT)
            assert response["responses"][0]["partitions"][0]["error_code"] == STORAGE_ERROR
        (record,) = _errors(caplog)
        assert "a read of partition 0 of topic t" in record.getMessage()
        assert "Input/output error" in record.getMessage() and record.exc_info is not None
        clock.now += 61
        await fetch(state, FETCH, _fetch_body(0), CLIENT)
        assert len(_errors(caplog)) == 2
        state.coordinator.shutdown()

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        asyncio.run(main())
