"""Size-prefixed frames: ``size int32`` then ``size`` bytes, in both directions.

Theory of operation
-------------------
:class:`FrameBuffer` is fed whatever the socket delivered
(:meth:`~FrameBuffer.receive_data`) and hands back complete frames, without
their prefix, as memoryviews (:meth:`~FrameBuffer.next_frame`,
:meth:`~FrameBuffer.frames`). Each frame owns its memory: handlers may keep
views into it (a request's records) for as long as they like. When the
buffer holds exactly one complete frame — the usual case for a large
Produce request — that buffer is handed over whole, without a copy; frames
that share the buffer with others are copied out once.

A size above ``max_frame_size`` (Kafka's ``socket.request.max.bytes``) or a
negative size is reported once, as :class:`FrameTooLargeError`, before any of
the body is buffered; the stream cannot be resynchronised afterwards, so the
buffer then stays empty and yields nothing more.

:func:`frame` does the reverse for outgoing chunks (see :mod:`.schema`): it
puts the int32 total size in front.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from seglog.protocol.errors import FrameTooLargeError
from seglog.protocol.schema import Chunk

_SIZE = struct.Struct(">i")
_MERGE_LIMIT = 16 * 1024


class FrameBuffer:
    """Reassembles size-prefixed frames from a byte stream."""

    __slots__ = ("_buf", "_failed", "_start", "max_frame_size")

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._start = 0  # bytes of _buf already handed out
        self._failed = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the peer (ignored once the stream has failed)."""
        if not self._failed:
            self._buf += data

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None until more data arrives.

        Raises :class:`FrameTooLargeError` (once) for a size over the limit.
        """
        if self._failed:
            return None
        buf = self._buf
        start = self._start
        if len(buf) - start < _SIZE.size:
            self._compact()
            return None
        (size,) = _SIZE.unpack_from(buf, start)
        if size < 0 or size > self.max_frame_size:
            self._failed = True
            self._buf = bytearray()
            self._start = 0
            raise FrameTooLargeError(
                f"a frame of {size} bytes is over the limit of {self.max_frame_size} "
                "(socket.request.max.bytes)",
                size,
                self.max_frame_size,
            )
        end = start + _SIZE.size + size
        if end > len(buf):
            self._compact()
            return None
        if start == 0 and end == len(buf):
            # The buffer is exactly this frame: hand it over instead of copying it.
            self._buf = bytearray()
            return memoryview(buf)[_SIZE.size :]
        frame = memoryview(buf[start + _SIZE.size : end])
        self._start = end
        return frame

    def frames(self) -> Iterator[memoryview]:
        """Every complete frame received so far, in order."""
        while (frame := self.next_frame()) is not None:
            yield frame

    __iter__ = frames

    def _compact(self) -> None:
        if self._start:
            del self._buf[: self._start]
            self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as part of a frame."""
        return len(self._buf) - self._start

    @property
    def failed(self) -> bool:
        """True after a :class:`FrameTooLargeError`: the stream is unusable."""
        return self._failed


def frame(chunks: Sequence[Chunk]) -> list[Chunk]:
    """``chunks`` behind an int32 prefix holding their total length.

    A small bytes-like first chunk (a header and body) is merged with the
    prefix so that the common response is a single write.
    """
    total = sum(map(len, chunks))
    prefix = _SIZE.pack(total)
    if chunks:
        first = chunks[0]
        if isinstance(first, (bytes, bytearray, memoryview)) and len(first) <= _MERGE_LIMIT:
            return [prefix + bytes(first), *chunks[1:]]
    return [prefix, *chunks]


__all__ = ["FrameBuffer", "frame"]
