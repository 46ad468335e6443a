"""A full disk under the registry's writer: the change is refused, nothing answered is lost.

In process, over the faulty file system of the storage tests: the writer's
append to ``_schemas`` fails with ENOSPC; after a restart every schema answered
before is there, the refused one is not, and registering goes on.
"""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.schema_registry.store import RegistryStore
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.errors import SeglogError
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.storage.faulty_env import installed


def _body(name: str) -> dict[str, Any]:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": []})}


async def _open(root: Path) -> tuple[LogDir, RegistryStore]:
    log_dir = LogDir.open(root, settings=LogDirSettings(log_cleaner_enable=False))
    store = RegistryStore(BrokerState(BrokerSettings(), log_dir))
    await store.start()
    return log_dir, store


async def _register(store: RegistryStore, subject: str, name: str) -> int:
    args = {"subject": subject, "body": _body(name), "normalize": False}
    answer: dict[str, int] = await store.change("register", args)
    return answer["id"]


def test_a_full_disk_refuses_the_change_and_loses_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        with installed(tmp_path) as env:
            log_dir, store = await _open(tmp_path)
            try:
                assert await _register(store, "a-value", "A") == 1
                env.fail("pwritev", error=errno.ENOSPC, in_dir="_schemas-0")
                with pytest.raises(SeglogError) as refused:
                    await _register(store, "b-value", "B")
                assert refused.value.kafka_error == "KAFKA_STORAGE_ERROR", refused.value
            finally:
                await store.close()
                log_dir.close()
            env.clear_faults()
            log_dir, store = await _open(tmp_path)
            try:
                subjects = await store.read(lambda reads: reads.state.subjects())
                assert subjects == ["a-value"]
                assert await _register(store, "b-value", "B") == 2
            finally:
                await store.close()
                log_dir.close()

    asyncio.run(main())
