"""The ``consumer`` embedded protocol's assignment (``ConsumerProtocolAssignment``), decoded.

A classic group's members carry their assignment as opaque bytes in
SyncGroup and DescribeGroups; for the ``consumer`` protocol type those bytes
are version:int16, then assigned partitions [topic:string partitions:[int32]],
then user data (ignored here).
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]] | None:
    """The ``(topic, partition)`` pairs of a consumer assignment; None if unreadable."""
    if not assignment:
        return []
    try:
        pos = 2  # the version: every version starts with the same partitions
        (topics,) = _INT32.unpack_from(assignment, pos)
        pos += 4
        out: list[tuple[str, int]] = []
        for _ in range(max(0, topics)):
            (size,) = _INT16.unpack_from(assignment, pos)
            pos += 2
            if size < 0 or pos + size > len(assignment):
                return None
            topic = assignment[pos : pos + size].decode()
            pos += size
            (count,) = _INT32.unpack_from(assignment, pos)
            pos += 4
            for _ in range(max(0, count)):
                (partition,) = _INT32.unpack_from(assignment, pos)
                pos += 4
                out.append((topic, partition))
        return out
    except (struct.error, UnicodeDecodeError):
        return None
