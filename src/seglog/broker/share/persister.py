"""Where a share-partition's state goes: the share coordinator, here or on another node.

Kafka's share-partition leader reads and writes its state through a
*persister* that sends Read/Write/Initialize/DeleteShareGroupState to the
share coordinator, the broker leading the ``__share_group_state`` partition
of the share-partition's key. :class:`LocalPersister` is that persister for a
broker alone (the store is here). Its calls are coroutines so that the
handlers are written once for a coordinator that may be elsewhere.
"""

from __future__ import annotations

from typing import Protocol

from seglog.broker.blocking import run_blocking
from seglog.share.state import PersistedState, SharePartitionKey, StateUpdate
from seglog.share.state_store import ShareStateStore
from seglog.storage import io


class Persister(Protocol):
    """The share coordinator's operations, as the share-partition leader uses them."""

    async def read(self, key: SharePartitionKey) -> PersistedState | None:
        """The state last written for ``key``, if any."""
        ...

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> PersistedState:
        """Give ``key`` a first state starting at ``start_offset``."""
        ...

    async def write(self, key: SharePartitionKey, update: StateUpdate) -> None:
        """Persist ``update`` (raises StorageError; nothing is kept then)."""
        ...

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget ``key``'s state."""
        ...

    async def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        """Every share-partition of ``group_id`` with state."""
        ...


class LocalPersister:
    """The share coordinator's store in this process.

    A write is fsynced (off the event loop) before it returns, as an offset
    commit is before it is answered: an answered acknowledgement survives a
    power cut, not only a crash.
    """

    def __init__(self, store: ShareStateStore, env: io.Env) -> None:
        self.store = store
        self._env = env

    async def read(self, key: SharePartitionKey) -> PersistedState | None:
        """The state last written for ``key``, if any."""
        return self.store.read(key)

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> PersistedState:
        """Give ``key`` a first state starting at ``start_offset``, fsynced."""
        state = self.store.initialize(key, start_offset)
        await run_blocking(self._env, self.store.flush, key)
        return state

    async def write(self, key: SharePartitionKey, update: StateUpdate) -> None:
        """Persist ``update`` and fsync it."""
        self.store.write(key, update)
        await run_blocking(self._env, self.store.flush, key)

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget ``key``'s state."""
        self.store.delete(key)

    async def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        """Every share-partition of ``group_id`` with state."""
        return self.store.keys_of(group_id)
