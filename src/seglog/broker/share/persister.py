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

    A write is in ``__share_group_state``'s file when it returns, so an
    answered acknowledgement survives kill -9. It is fsynced as every log is,
    by the flush policy (``log.flush.interval.messages`` / ``.ms``), as Kafka's
    share coordinator leaves it to its log: an fsync per acknowledgement
    halved a share consumer's throughput (docs/performance.md). A first state
    (:meth:`initialize`, once per share-partition) is fsynced at once.
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
        """Persist ``update`` (in the file; fsynced by the flush policy)."""
        self.store.write(key, update)

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget ``key``'s state."""
        self.store.delete(key)

    async def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        """Every share-partition of ``group_id`` with state."""
        return self.store.keys_of(group_id)
