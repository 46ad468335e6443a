"""Share sessions: which partitions a share consumer fetches from this broker, and its epoch.

A ShareFetch at epoch 0 opens a session for (group, member), replacing any
earlier one; later requests must carry the session's epoch, which each
request moves on by one (wrapping to 1 after the largest int32), and may add
partitions or forget them; epoch -1 closes it. The errors are Kafka's:
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, and
SHARE_SESSION_LIMIT_REACHED past ``group.share.max.share.sessions``.

A session belongs to the connection that opened it: when that connection
ends, the session goes and its member's acquired records are released, as
Kafka's share session cache does on a client's disconnection.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]
"""A partition as ShareFetch names it: (topic id, partition index)."""


class ShareSessionError(Exception):
    """A share session request refused; ``error`` is Kafka's error name."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


def next_epoch(epoch: int) -> int:
    """The epoch that follows ``epoch`` (Kafka's ``ShareRequestMetadata.nextEpoch``)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    """One member's share session on this broker."""

    group_id: str
    member_id: str
    epoch: int
    connection: object
    #: The session's partitions, in the order they were added (fetched round robin).
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)


class ShareSessions:
    """Every share session of this broker, by (group, member)."""

    def __init__(
        self,
        max_sessions: Callable[[], int],
        on_closed: Callable[[ShareSession], None],
    ) -> None:
        self._max_sessions = max_sessions
        self._on_closed = on_closed
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        """The session of ``member_id`` in ``group_id``, if it has one."""
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        """Every open session."""
        return list(self._sessions.values())

    def open(
        self,
        group_id: str,
        member_id: str,
        partitions: Iterable[TopicIdPartition],
        connection: object,
    ) -> ShareSession:
        """A new session at epoch 0 → its next epoch 1; an earlier one of the member is closed."""
        key = (group_id, member_id)
        earlier = self._sessions.pop(key, None)
        if earlier is not None:
            self._on_closed(earlier)
        if len(self._sessions) >= self._max_sessions():
            raise ShareSessionError(
                "SHARE_SESSION_LIMIT_REACHED",
                f"the broker already has {len(self._sessions)} share sessions "
                "(group.share.max.share.sessions)",
            )
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection)
        session.partitions.update(dict.fromkeys(partitions))
        self._sessions[key] = session
        return session

    def continue_(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request at ``epoch`` continues; its epoch moves on by one."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(
                "SHARE_SESSION_NOT_FOUND",
                f"no share session for member {member_id} of group {group_id}",
            )
        if session.epoch != epoch:
            raise ShareSessionError(
                "INVALID_SHARE_SESSION_EPOCH",
                f"the share session's epoch is {session.epoch}, not {epoch}",
            )
        session.epoch = next_epoch(session.epoch)
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession:
        """Close the member's session (epoch -1); SHARE_SESSION_NOT_FOUND if it has none."""
        session = self._sessions.pop((group_id, member_id), None)
        if session is None:
            raise ShareSessionError(
                "SHARE_SESSION_NOT_FOUND",
                f"no share session for member {member_id} of group {group_id}",
            )
        self._on_closed(session)
        return session

    def connection_closed(self, connection: object) -> None:
        """The connection ``connection`` ended: close the sessions it opened."""
        for key, session in list(self._sessions.items()):
            if session.connection is connection:
                del self._sessions[key]
                self._on_closed(session)

    def forget_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Drop ``partitions`` from every session (their topic was deleted)."""
        gone = set(partitions)
        for session in self._sessions.values():
            for key in gone & session.partitions.keys():
                del session.partitions[key]
