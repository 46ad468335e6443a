"""One client connection: frames in, responses out, in order.

Theory of operation
-------------------
Requests of a connection are handled one at a time in arrival order, as a
Kafka broker does (it mutes a channel until its response is sent); pipelined
requests wait in :class:`Channel` or the socket buffer meanwhile.

``asyncio.start_server`` hands each connection over as a stream pair. The
first read goes through that ``StreamReader`` (so nothing it buffered is
lost); then the transport is given to :class:`Channel`, a
``BufferedProtocol``, and the streams are no longer used. The socket is then
read straight into :meth:`FrameBuffer.get_buffer
<seglog.protocol.framing.FrameBuffer.get_buffer>`, which for a large request
is the request's own memory: a 1 MiB Produce request is copied once, kernel
to frame, instead of four times (kernel → bytes → StreamReader buffer →
bytes → frame buffer), and each copy into fresh memory also costs page
faults.

:class:`Channel` is the one place that owns backpressure, both ways:

* reading pauses while complete requests waiting to be handled hold
  :data:`PAUSE_READING_BYTES` or more, and resumes when they drop below;
* reading also pauses while the requests of all connections hold
  ``queued.max.request.bytes`` (:mod:`seglog.broker.limits` keeps that sum
  and the connection and idle limits; a frame's memory grows only as its
  bytes arrive);
* a response waits while the transport's write buffer is above its high-water
  mark (``pause_writing``/``resume_writing``).

Responses: bytes chunks go to ``transport.write``. File regions (the records
of a Fetch) go out with ``os.sendfile`` straight on the socket while the
transport has nothing buffered and the socket takes them, so the record bytes
never enter Python; when the socket is full, ``loop.sendfile`` (which waits
for writability) sends the rest. A region keeps its segment's file open until
the send ends (it is released then, or when the connection is lost), so a
segment deleted under a slow reader is still read from its own inode; a file
found shorter than its region closes the connection rather than leave the
frame short.

End of stream: after EOF from the peer, the requests already received are
handled and answered (the peer may have shut down only its sending side),
then the connection closes. After a connection error, requests already
received are handled until the first response fails to go out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections import deque
from typing import Any

from seglog.broker.dispatch import CloseConnection, handle_frame
from seglog.broker.limits import Connections
from seglog.broker.security.listener import ListenerSecurity
from seglog.broker.security.session import Session
from seglog.broker.security.tls import peer_principal
from seglog.broker.state import BrokerState
from seglog.protocol.errors import FrameTooLargeError
from seglog.protocol.framing import FrameBuffer, frame
from seglog.storage.region import FileRegion, release_regions

logger = logging.getLogger(__name__)

# More than a StreamReader ever holds (2 x its 64 KiB limit + one 256 KiB read):
# the first read takes everything it buffered before the channel took over.
_FIRST_READ = 1 << 20

_COPY_CHUNK = 256 * 1024  # bytes of a file region read at a time when it cannot be sendfile'd

PAUSE_READING_BYTES = 1 << 20
"""Bytes of complete, unhandled requests at which reading from the peer pauses."""


class ShortRegionError(ConnectionError):
    """A file region ended early (its file was cut): the frame cannot be completed."""

    def __init__(self, region: FileRegion, missing: int) -> None:
        super().__init__(f"{region.path} ended {missing} bytes before the region's end")


class Channel(asyncio.BufferedProtocol):
    """A connection's transport as a queue of request frames and a response sink."""

    def __init__(
        self,
        transport: asyncio.Transport,
        frames: FrameBuffer,
        limits: Connections | None = None,
        *,
        tls: bool = False,
    ) -> None:
        self.transport = transport
        self.frames = frames
        self._limits = limits if limits is not None else Connections(queued_max_request_bytes=None)
        self._ready: deque[memoryview] = deque()
        self._ready_bytes = 0
        self._held = 0  # request bytes counted in the broker-wide total
        self._last_active = time.monotonic()
        self._frame_started: float | None = None
        self._peer_finished = False
        self._sending = False
        self._sendfile_task: asyncio.Task[int] | None = None
        self.busy = False
        """True while a request of this connection is handled or answered."""
        self._eof = False
        self._lost = False
        self._error: BaseException | None = None
        self._reading_paused = False
        self._writing_paused = False
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._wakeup: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = loop.create_future()
        #: Done at end of stream or when the connection is lost: the peer sends
        #: nothing more, so a waiting fetch answers at once (it may not be read).
        self.gone: asyncio.Future[None] = loop.create_future()
        sock = transport.get_extra_info("socket")
        self._tls = tls
        # Under TLS the socket carries ciphertext: file bytes must pass through
        # the TLS layer, so sendfile straight on the socket is never used.
        usable = sock is not None and hasattr(os, "sendfile") and not tls
        self._fd = sock.fileno() if usable else -1
        self._limits.register(self)

    # ------------------------------------------------------ protocol callbacks

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.frames.buffer_updated(nbytes)
        self._last_active = time.monotonic()
        self._collect()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        if not self.gone.done():
            self.gone.set_result(None)
        # Over plain TCP the peer may half-close and still read the answers due:
        # keep the transport open. TLS has no half-close (the peer's close_notify
        # ends the session both ways) and asyncio closes it whatever is returned,
        # warning when told to keep it: so keep it only without TLS.
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None and self._error is None:
            self._error = exc
        # What the peer sent and nobody will handle no longer counts.
        self._limits.unregister(self, self._held)
        self._held = 0
        self._wake()
        self._wake_writer()
        if not self.gone.done():
            self.gone.set_result(None)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    # ------------------------------------------------------------ requests in

    def receive(self, data: bytes, *, eof: bool) -> None:
        """Bytes read (and whether EOF was seen) before the channel took over."""
        self.frames.receive_data(data)
        self._eof = self._eof or eof
        if eof and not self.gone.done():
            self.gone.set_result(None)
        self._collect()

    def _collect(self) -> None:
        try:
            for request in self.frames.frames():
                self._ready.append(request)
                self._ready_bytes += request.nbytes
        except FrameTooLargeError as exc:
            self._error = exc
        if self.frames.partial:
            if self._frame_started is None:
                self._frame_started = self._last_active
        else:
            self._frame_started = None
        self._account()
        self.sync_reading()
        self._wake()

    def _account(self) -> None:
        """Report this connection's request bytes to the broker-wide total."""
        if self._lost:
            return
        held = self.frames.buffered + self._ready_bytes
        delta, self._held = held - self._held, held
        self._limits.change_request_bytes(delta)

    def sync_reading(self) -> None:
        """Read from the peer unless requests wait here, or the broker holds too many."""
        if self._lost:
            return
        pause = (
            self._error is not None
            or self._ready_bytes >= PAUSE_READING_BYTES
            or (self._limits.reading_paused and not self._peer_finished)
        )
        if pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not pause and self._reading_paused and not self._eof:
            self._reading_paused = False
            self.transport.resume_reading()

    # ------------------------------------------------------------------ limits

    def idle_since(self) -> float | None:
        """When bytes last arrived or a response was last sent; None while busy."""
        return None if self.busy else self._last_active

    def frame_started(self) -> float | None:
        """When the first bytes of the frame still arriving came, if one is."""
        return self._frame_started

    def close_idle(self, reason: str) -> None:
        """Close the connection at once (idle, stalled mid-frame, or not reading)."""
        logger.info("closing the connection from %s: %s", _peer(self.transport), reason)
        # A pending loop.sendfile must be stopped before the socket closes:
        # asyncio (3.11) would otherwise leave it waiting on a closed socket.
        task = self._sendfile_task
        if task is not None:
            task.cancel()
        self.transport.abort()

    def fileno(self) -> int:
        """The socket's descriptor, -1 once closed."""
        sock = self.transport.get_extra_info("socket")
        return -1 if sock is None or self._lost else int(sock.fileno())

    def peer_finished(self) -> None:
        """The peer has closed its side: read to the end even if reading is paused."""
        if not self._peer_finished:
            self._peer_finished = True
            self.sync_reading()

    def activity(self) -> None:
        """Note that the connection did something (a response went out)."""
        self._last_active = time.monotonic()

    def _wake(self) -> None:
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_request(self) -> memoryview | None:
        """The next request frame; None once the peer has finished sending.

        Requests received before an error come first; then the error is raised
        (:class:`FrameTooLargeError`, or the connection's own error).
        """
        while not self._ready:
            if self._error is not None:
                raise self._error
            if self._eof or self._lost:
                return None
            self._wakeup = self._loop.create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        request = self._ready.popleft()
        self._ready_bytes -= request.nbytes
        self._account()
        self.sync_reading()
        return request

    # --------------------------------------------------------- responses out

    async def send(self, chunks: list[Any]) -> None:
        """Write bytes chunks and send file regions, then wait while the buffer is full."""
        if self._lost:
            raise ConnectionResetError("the connection was lost")
        self._sending = True
        try:
            write = self.transport.write
            for chunk in chunks:
                if isinstance(chunk, FileRegion):
                    if chunk.length > 0 and self._tls:
                        await self._send_copied(chunk)
                    elif chunk.length > 0:
                        await self._sendfile(chunk)
                else:
                    write(chunk)
            while self._writing_paused:
                if self._lost:
                    raise ConnectionResetError("the connection was lost")
                self._drained = self._loop.create_future()
                try:
                    await self._drained
                finally:
                    self._drained = None
        finally:
            self._sending = False

    def send_progress(self) -> tuple[int, int] | None:
        """While a response goes out, a value that changes whenever it progresses; else None.

        The bytes the peer has acknowledged (TCP_INFO) and those still queued
        in the transport: a peer that stops reading freezes both, whether the
        response waits in the transport or in ``sendfile``.
        """
        if not self._sending or self._lost:
            return None
        return (_bytes_acked(self.transport), self.transport.get_write_buffer_size())

    async def _sendfile(self, region: FileRegion) -> None:
        if self._lost or self.transport.is_closing():
            # Also keeps os.sendfile off a descriptor number the closed socket freed.
            raise ConnectionResetError("the connection was lost")
        # The region holds its file open (see seglog.storage.region): region.fd
        # is the segment's inode even if the segment was closed or deleted since.
        position, remaining = region.position, region.length
        if self._fd >= 0 and not self.transport.get_write_buffer_size():
            # Nothing queued ahead of it: the region can go to the socket at once.
            sendfile = os.sendfile
            while remaining:
                try:
                    sent = sendfile(self._fd, region.fd, position, remaining)
                except BlockingIOError:
                    break
                if sent == 0:
                    raise ShortRegionError(region, remaining)
                position += sent
                remaining -= sent
            if not remaining:
                return
        with open(region.fd, "rb", closefd=False) as source:
            task = self._loop.create_task(
                self._loop.sendfile(self.transport, source, position, remaining, fallback=True)
            )
            self._sendfile_task = task
            try:
                sent = await task
            finally:
                self._sendfile_task = None
        if sent != remaining:
            raise ShortRegionError(region, remaining - sent)

    async def _send_copied(self, region: FileRegion) -> None:
        """Send a region through the transport (TLS): read in chunks, write each.

        Each chunk is a fresh ``bytes`` from ``os.pread``: asyncio's TLS
        transport may keep a reference to written data until the TLS layer
        takes it (during a handshake it waits in a backlog), so a buffer reused
        for the next read could change data not yet encrypted. The transport's
        buffer bounds what is held: the next chunk is read only once it drains.
        """
        position, remaining = region.position, region.length
        write = self.transport.write
        while remaining:
            if self._lost or self.transport.is_closing():
                raise ConnectionResetError("the connection was lost")
            data = os.pread(region.fd, min(remaining, _COPY_CHUNK), position)
            if not data:
                raise ShortRegionError(region, remaining)
            write(data)
            position += len(data)
            remaining -= len(data)
            while self._writing_paused and not self._lost:
                self._drained = self._loop.create_future()
                try:
                    await self._drained
                finally:
                    self._drained = None

    def _wake_writer(self) -> None:
        waiter = self._drained
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_TCP_INFO_BYTES_ACKED = struct.Struct("=Q")
_TCP_INFO_BYTES_ACKED_OFFSET = 120  # tcpi_bytes_acked in Linux's struct tcp_info


def _bytes_acked(transport: asyncio.BaseTransport) -> int:
    """Bytes of this connection the peer has acknowledged; -1 where unknown."""
    sock = transport.get_extra_info("socket")
    tcp_info = getattr(socket, "TCP_INFO", None)
    if sock is None or tcp_info is None:
        return -1
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 256)
    except OSError:
        return -1
    if len(info) < _TCP_INFO_BYTES_ACKED_OFFSET + 8:
        return -1
    return int(_TCP_INFO_BYTES_ACKED.unpack_from(info, _TCP_INFO_BYTES_ACKED_OFFSET)[0])


def _peer(transport: asyncio.BaseTransport) -> object:
    return transport.get_extra_info("peername")


def _close_unauthenticated(transport: asyncio.Transport, session: Session, peer: object) -> None:
    if not session.authenticated and not transport.is_closing():
        logger.info(
            "closing the connection from %s: not authenticated within "
            "sasl.server.authentication.timeout.ms",
            peer,
        )
        transport.abort()


def _close_silent(transport: asyncio.Transport, peer: object) -> None:
    logger.info("closing the connection from %s: it sent nothing (connections.max.idle.ms)", peer)
    transport.abort()


async def serve_connection(
    state: BrokerState,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connections: Connections | None = None,
    security: ListenerSecurity | None = None,
) -> None:
    """Serve one client of a listener until it disconnects, idles or sends nonsense."""
    peer = writer.get_extra_info("peername")
    if security is None:
        security = ListenerSecurity(state.settings.listeners[0])
    listener = security.listener
    ip = str(peer[0]) if isinstance(peer, tuple) and peer else ""
    transport = writer.transport
    assert isinstance(transport, asyncio.Transport)
    if connections is None:
        connections = Connections(queued_max_request_bytes=None)
    refused = connections.admit(ip)
    if refused is not None:
        logger.info("refusing the connection from %s: %s", peer, refused)
        transport.abort()
        return
    state.metrics.connections[listener.name] += 1
    state.metrics.connections_created[listener.name] += 1
    channel: Channel | None = None
    login_timer: asyncio.TimerHandle | None = None
    session = Session(listener, host=ip, authenticated=security.sasl is None, security=security)
    try:
        if security.principal_mapper is not None and listener.security_protocol == "SSL":
            # Mutual TLS: the certificate's subject is the principal (none: ANONYMOUS).
            principal = peer_principal(
                writer.get_extra_info("ssl_object"), security.principal_mapper
            )
            if principal is not None:
                session.principal = principal
                logger.debug("TLS client %s is %s", peer, principal)
        # Whatever the stream reader holds comes first; the channel takes over
        # after, in the same step: anything awaited in between (asyncio.wait_for
        # is such a thing) would let the stream reader take bytes the channel
        # then never sees. So the idle limit of this first read is a timer.
        idle = connections.idle_seconds
        timer = (
            None
            if idle is None
            else asyncio.get_running_loop().call_later(idle, _close_silent, transport, peer)
        )
        try:
            data = await reader.read(_FIRST_READ)
        finally:
            if timer is not None:
                timer.cancel()
        if not data:
            return
        frames = FrameBuffer(state.settings.socket_request_max_bytes)
        if security.sasl is not None:
            # Until the client has logged in it may not make the broker hold more
            # than this (Kafka's sasl.server.max.receive.size).
            frames = FrameBuffer(security.sasl.max_receive_size, "sasl.server.max.receive.size")
        channel = Channel(transport, frames, connections, tls=security.tls)
        if security.sasl is not None:
            login_timer = asyncio.get_running_loop().call_later(
                security.sasl.authentication_timeout_ms / 1000,
                _close_unauthenticated,
                transport,
                session,
                peer,
            )
        session.gone = channel.gone
        transport.set_protocol(channel)
        if not transport.is_reading():
            transport.resume_reading()  # the stream reader may have paused it
        channel.receive(data, eof=reader.at_eof())
        while (request := await channel.next_request()) is not None:
            channel.busy = True
            chunks = await handle_frame(state, request, session)
            if session.authenticated and frames.limit_name != "socket.request.max.bytes":
                frames.max_frame_size = state.settings.socket_request_max_bytes
                frames.limit_name = "socket.request.max.bytes"
            if session.close_after:
                # A failed authentication is answered after Kafka's delay (KIP-306):
                # a guesser waits for each verdict, and only this task sleeps.
                await asyncio.sleep(session.close_after)
            if chunks is not None:
                try:
                    await channel.send(frame(chunks))
                finally:
                    # Sent, or never to be: the regions' files may close now.
                    release_regions(chunks)
            channel.activity()
            channel.busy = False
            if session.close_after is not None:
                break
    except ShortRegionError as exc:
        # Part of the frame is on the wire and the rest cannot come: only
        # closing tells the client that what it got is not an answer.
        logger.warning("closing the connection from %s: %s", peer, exc)
        transport.abort()
    except FrameTooLargeError as exc:
        logger.warning("closing the connection from %s: %s", peer, exc)
    except CloseConnection:
        pass
    except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
        logger.info("connection from %s ended: %s", peer, exc)
    finally:
        if login_timer is not None:
            login_timer.cancel()
        state.metrics.connections[listener.name] -= 1
        connections.leave(ip)
        transport.close()
        with contextlib.suppress(ConnectionError, OSError):
            if channel is not None:
                await channel.closed
            else:
                await writer.wait_closed()
