"""Blocking storage work leaves the event loop for the log directory's environment.

In-process: the Produce handler's ``flush.messages`` fsync and the Metadata
handler's auto-creation run on the threads of the environment the log
directory was opened with, never on the loop (nor on another pool).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from seglog.broker.handlers.metadata import auto_create
from seglog.broker.handlers.produce import produce
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.protocol import ApiKey
from seglog.protocol.headers import RequestHeader
from seglog.records.builder import SimpleRecord, build_batch
from seglog.storage import io
from seglog.storage.log_dir import LogDir, LogDirSettings

# The connection the handlers are called for (outside a real one).
CLIENT = Session(BrokerSettings().listeners[0], host="127.0.0.1")

HEADER = RequestHeader(ApiKey.PRODUCE, 9, 1, "test")


class ThreadRecording(io.Env):
    """The real file system, remembering the thread of every fsync and directory creation."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def fsync(self, target: io.FileTarget, *, name: object = None) -> None:
        self.threads.append(threading.current_thread().name)
        super().fsync(target, name=name)

    def mkdir(self, path: Path | str) -> None:
        self.threads.append(threading.current_thread().name)
        super().mkdir(path)


def test_flushes_and_creations_run_on_the_environments_threads(tmp_path: Path) -> None:
    env = ThreadRecording()
    settings = LogDirSettings(log_cleaner_enable=False)
    with LogDir.open(tmp_path, settings=settings, env=env) as log_dir:
        log_dir.create_topic("t", 1, {"flush.messages": "1"})
        records = build_batch([SimpleRecord(b"v", b"k", int(time.time() * 1000))])
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
        }

        async def main() -> None:
            state = BrokerState(BrokerSettings(), log_dir)
            env.threads.clear()
            response = await produce(state, HEADER, body, CLIENT)
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
            produced = list(env.threads)
            env.threads.clear()
            codes = await auto_create(state, "fresh")
            assert codes["fresh"] != 0  # LEADER_NOT_AVAILABLE, once, as Kafka
            created = list(env.threads)
            state.coordinator.shutdown()
            assert produced and created
            assert all(name.startswith("seglog-io") for name in produced + created), (
                produced,
                created,
            )

        asyncio.run(main())
        assert log_dir.has_topic("fresh")
    env.shutdown()
