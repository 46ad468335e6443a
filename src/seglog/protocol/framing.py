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

For a reader that can write into memory it is given (asyncio's
``BufferedProtocol``), :meth:`~FrameBuffer.get_buffer` and
:meth:`~FrameBuffer.buffer_updated` replace ``receive_data``. Small frames
then arrive in a scratch area and are appended as above; but once the
buffer knows a frame's size and more than :data:`DIRECT_MIN` bytes of it
are missing, it allocates the frame's own memory, moves the part it holds
there, and ``get_buffer`` hands out the missing part: the socket writes a
large Produce request where the handler will read it, with no copy in
between. ``receive_data`` keeps working in that state (it fills the frame
first). State, per call of ``next_frame``::

    appending   incomplete frame, > DIRECT_MIN missing  -> in place
    appending   size over the limit                     -> failed (terminal)
    in place    frame complete                          -> appending, frame out

The announced size is only a claim: the frame's memory grows with the bytes
that actually arrive. It starts at :data:`GROW_MIN` bytes (or twice what has
arrived), and each time it is full it grows :data:`GROW_FACTOR`-fold, up to
the announced size; so a peer that announces 100 MiB and sends 64 KiB costs
about :data:`GROW_MIN`, never 100 MiB, and a frame that does arrive in full
is copied at most once more, a fraction of its size. Frames of up to
:data:`GROW_MIN` bytes are allocated at once.

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
SCRATCH_SIZE = 64 * 1024
"""Bytes one :meth:`FrameBuffer.get_buffer` offers while no frame is received in place."""
DIRECT_MIN = 32 * 1024
"""A frame with more bytes than this still missing is received in its own memory."""
GROW_MIN = 256 * 1024
"""The first allocation of a frame received in place (never more than the frame)."""
GROW_FACTOR = 4
"""How much a frame's memory grows each time the bytes received fill it."""


class FrameBuffer:
    """Reassembles size-prefixed frames from a byte stream."""

    __slots__ = (
        "_body",
        "_buf",
        "_failed",
        "_filled",
        "_scratch",
        "_size",
        "_start",
        "limit_name",
        "max_frame_size",
    )

    def __init__(self, max_frame_size: int, limit_name: str = "socket.request.max.bytes") -> None:
        self.max_frame_size = max_frame_size
        self.limit_name = limit_name
        """The setting that sets ``max_frame_size``, named when a frame is over it."""
        self._buf = bytearray()
        self._start = 0  # bytes of _buf already handed out
        self._failed = False
        self._body: bytearray | None = None  # the frame received in place, if any
        self._filled = 0  # bytes of _body received
        self._size = 0  # the size of the frame received in place (_body may be shorter)
        self._scratch: bytearray | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the peer (ignored once the stream has failed)."""
        if self._failed:
            return
        body = self._body
        if body is not None:
            view = memoryview(data).cast("B")
            take = min(len(view), self._size - self._filled)
            body = self._room(take)
            body[self._filled : self._filled + take] = view[:take]
            self._filled += take
            if take == len(view):
                return
            data = view[take:]  # the frame is complete: the rest is what follows it
        self._buf += data

    def _room(self, more: int) -> bytearray:
        """The in-place body, grown to hold ``more`` bytes after those received."""
        body = self._body
        assert body is not None
        need = self._filled + more
        if need <= len(body):
            return body
        capacity = len(body)
        while capacity < need:
            capacity *= GROW_FACTOR
        grown = bytearray(min(capacity, self._size))
        grown[: self._filled] = memoryview(body)[: self._filled]
        self._body = grown
        return grown

    def get_buffer(self) -> memoryview:
        """Where the next bytes read from the peer should be written.

        The missing part of the frame received in place, else a scratch area of
        :data:`SCRATCH_SIZE` bytes. Report how many bytes were written with
        :meth:`buffer_updated` before calling anything else.
        """
        body = self._body
        if body is not None:
            if self._filled == len(body):
                body = self._room(1)
            return memoryview(body)[self._filled :]
        if self._scratch is None:
            self._scratch = bytearray(SCRATCH_SIZE)
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` bytes were written at the start of the last :meth:`get_buffer`."""
        if self._body is not None:
            self._filled += nbytes
        elif self._scratch is not None and not self._failed:
            self._buf += memoryview(self._scratch)[:nbytes]

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None until more data arrives.

        Raises :class:`FrameTooLargeError` (once) for a size over the limit.
        """
        if self._failed:
            return None
        body = self._body
        if body is not None:
            if self._filled < self._size:
                return None
            self._body = None
            self._filled = self._size = 0
            return memoryview(body)
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
                f"({self.limit_name})",
                size,
                self.max_frame_size,
            )
        end = start + _SIZE.size + size
        if end > len(buf):
            if end - len(buf) > DIRECT_MIN:
                # Receive the rest in the frame's own memory; all of buf is its start.
                have = len(buf) - start - _SIZE.size
                body = bytearray(min(size, max(GROW_MIN, 2 * have)))
                body[:have] = memoryview(buf)[start + _SIZE.size :]
                self._body = body
                self._size = size
                self._filled = have
                self._buf = bytearray()
                self._start = 0
                return None
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
        return len(self._buf) - self._start + self._filled

    @property
    def partial(self) -> bool:
        """True while part of a frame has arrived and the rest has not."""
        return self.buffered > 0

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
