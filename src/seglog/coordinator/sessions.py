"""Member sessions of the KIP-848 and share group protocols: one timer per member.

A member of either protocol is alive while it heartbeats: each heartbeat
pushes its deadline ``session timeout`` ahead. Rather than cancel and re-arm a
timer on every heartbeat, one timer per member is armed for the timeout and,
when it fires, re-armed for what is left if the deadline moved meanwhile; only
a member whose deadline has passed is expired. Shared by
:mod:`seglog.coordinator.consumer_group_manager` and
:mod:`seglog.coordinator.share_group_manager`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from seglog.coordinator.requests import Cancellable
from seglog.coordinator.runtime import CoordinatorRuntime


class SessionMember(Protocol):
    """What a member needs for its session: its deadline and its timer."""

    heartbeat_deadline_ms: int
    session_timer: Cancellable | None


def touch_session(
    runtime: CoordinatorRuntime,
    member: SessionMember,
    timeout_ms: int,
    *,
    alive: Callable[[], bool],
    expire: Callable[[], None],
) -> None:
    """A heartbeat of ``member``: its deadline moves ``timeout_ms`` ahead.

    ``alive()`` tells whether the member is still in its group when the timer
    fires (a member that left is not expired again); ``expire()`` removes it.
    """
    member.heartbeat_deadline_ms = runtime.now_ms() + timeout_ms

    def fire() -> None:
        member.session_timer = None
        if not alive():
            return
        remaining = member.heartbeat_deadline_ms - runtime.now_ms()
        if remaining > 0:
            member.session_timer = runtime.schedule(remaining, fire)
            return
        expire()

    if member.session_timer is None:
        member.session_timer = runtime.schedule(timeout_ms, fire)


__all__ = ["SessionMember", "touch_session"]
