"""Size-prefixed frames: ``size int32`` then ``size`` bytes, in both directions.

:class:`FrameBuffer` is fed whatever the socket delivered and hands back
complete frames as memoryviews. A size above the limit (or negative) is
reported once as :class:`FrameTooLargeError`; the connection is then useless,
since the stream cannot be resynchronised.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

from seglog.protocol.errors import FrameTooLargeError

_SIZE = struct.Struct(">i")


class FrameBuffer:
    """Reassembles frames from a byte stream."""

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._failed = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the peer."""
        self._buf += data

    def frames(self) -> Iterator[memoryview]:
        """Every complete frame received so far, in order."""
        if self._failed:
            return
        buf = self._buf
        pos = 0
        try:
            while len(buf) - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self.max_frame_size:
                    self._failed = True
                    raise FrameTooLargeError(
                        f"frame of {size} bytes is over the limit of {self.max_frame_size} "
                        "(socket.request.max.bytes)"
                    )
                if len(buf) - pos - 4 < size:
                    break
                # A copy per frame: the buffer is compacted below, and handlers may keep
                # views of a request (its records) after this generator moves on.
                yield memoryview(bytes(buf[pos + 4 : pos + 4 + size]))
                pos += 4 + size
        finally:
            if pos:
                del buf[:pos]

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)


def frame(chunks: Sequence[Any]) -> list[Any]:
    """Prefix ``chunks`` (bytes and external objects with a length) with their total size."""
    total = sum(len(c) for c in chunks)
    if chunks and isinstance(chunks[0], (bytes, bytearray)):
        return [_SIZE.pack(total) + bytes(chunks[0]), *chunks[1:]]
    return [_SIZE.pack(total), *chunks]
