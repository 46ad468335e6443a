"""Settings every node keeps in the shared log directory: ACLs and client quotas.

Alone, a broker changes its in-memory copy and saves the file. One node of
several changes it under the directory's ``.admin.lock`` (held across
processes) after re-reading the file, so that two nodes changing it at once
never lose each other's change, then has every other live node re-read it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from seglog.broker.state import BrokerState
from seglog.storage.log_dir import LogDir

T = TypeVar("T")

ADMIN_LOCK_FILE = ".admin.lock"


@contextlib.contextmanager
def _admin_lock(log_dir: LogDir) -> Iterator[None]:
    env = log_dir.env
    fd = env.open(log_dir.path / ADMIN_LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        while not env.lock(fd):
            time.sleep(0.002)
        try:
            yield
        finally:
            env.unlock(fd)
    finally:
        env.close(fd)


def change_shared(state: BrokerState, reload: Callable[[], None], change: Callable[[], T]) -> T:
    """Run ``change`` (blocking) on a setting kept in the log directory; see the module."""
    with _admin_lock(state.log_dir):
        reload()
        result = change()
    state.cluster.broadcast({"op": "reload"})
    return result
