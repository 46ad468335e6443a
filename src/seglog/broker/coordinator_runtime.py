"""A coordinator's one owner: its operations run as events, one at a time, on its own thread.

Kafka 4 runs every operation of a coordinator shard as an event, one after
the other (its ``CoordinatorRuntime``). The transaction coordinator has the
same contract (its methods never overlap), and requests for it come from
three places: clients and other nodes (Kafka requests, handled on the event
loop) and its timers. All of them go through one :class:`CoordinatorRuntime`:
a single thread that takes the operations in the order they arrive.

Operations that need other nodes (:data:`~seglog.coordinator.txn_peers.Op`)
are run step by step by :meth:`~CoordinatorRuntime.run_op`: each step on the
coordinator's thread, each peer request in between on a worker thread, off
the coordinator (which serves others meanwhile) and off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

from seglog.coordinator.txn_peers import Op, Peers, Step, advance

R = TypeVar("R")


class CoordinatorRuntime:
    """The single thread a coordinator's operations run on, in arrival order."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        #: Operations driven by :meth:`run_op` (their callers may give up; they may not).
        self._ops: set[asyncio.Task[Any]] = set()

    async def run(self, fn: Callable[[], R]) -> R:
        """``fn()`` on the coordinator's thread when its turn comes, awaited (event loop)."""
        return await asyncio.wrap_future(self._executor.submit(fn))

    def submit(self, fn: Callable[[], R]) -> Future[R]:
        """``fn()`` on the coordinator's thread when its turn comes, from any other thread."""
        return self._executor.submit(fn)

    async def run_op(self, op: Op[R], peers: Peers) -> R:
        """Run ``op`` to its end: its steps in turn, its peer requests off the coordinator.

        Once started it runs to its end even if the caller is cancelled (a
        client gone): an operation left half done would leave its id busy.
        """
        task = asyncio.ensure_future(self._drive(op, peers))
        self._ops.add(task)
        task.add_done_callback(self._ops.discard)
        return await asyncio.shield(task)

    async def _drive(self, op: Op[R], peers: Peers) -> R:
        step: Step[R] = await self.run(functools.partial(advance, op))
        while step.request is not None:
            try:
                answer = await asyncio.to_thread(step.request.send, peers)
            except Exception as exc:  # handed to the operation, which decides
                step = await self.run(functools.partial(advance, op, error=exc))
            else:
                step = await self.run(functools.partial(advance, op, answer))
        return cast(R, step.result)

    async def close(self) -> None:
        """Wait for the operations in progress, then stop the thread (new calls are refused)."""
        if self._ops:
            await asyncio.gather(*self._ops, return_exceptions=True)
        await asyncio.to_thread(self._executor.shutdown, wait=True)


__all__ = ["CoordinatorRuntime"]
