"""Blocking storage work, run off the event loop on the storage environment's threads.

Creating, deleting or altering a topic, auto-creation, ``flush.messages``
fsyncs and a coordinator's loading all wait on the disk. The broker never
makes those calls on its event loop: it hands them to the log directory's
:class:`~seglog.storage.io.Env` (:meth:`~seglog.storage.io.Env.submit`), the
one bounded pool that file work runs on, and awaits the result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from seglog.storage import io

P = ParamSpec("P")
R = TypeVar("R")


async def run_blocking(env: io.Env, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` on ``env``'s threads (the log directory's), awaited."""
    return await asyncio.wrap_future(env.submit(fn, *args, **kwargs))
