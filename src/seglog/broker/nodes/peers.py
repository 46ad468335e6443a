"""The nodes' Kafka listener: Kafka requests from one node to another, on a Unix socket.

Each node of a cluster sharing a log directory listens on an abstract Unix
socket of its own (:meth:`~seglog.broker.nodes.cluster.Cluster.peer_address`)
and serves there the same Kafka requests, through the same dispatch, as on
its client listeners, plus Envelope: a client's request forwarded by another
node (KIP-590). Only processes of the user running the broker may connect
(the peer's credentials are checked on Linux); a connection from another
user is closed unanswered.

:func:`call` is the other end: one request, one answer, awaited on the event
loop (never a blocking call there).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.protocol.errors import DecodeError
from seglog.protocol.framing import frame
from seglog.protocol.headers import decode_response, encode_request

logger = logging.getLogger(__name__)

FrameHandler = Callable[[memoryview], Awaitable[Sequence[Any] | None]]
"""Turns one request frame (no size prefix) into response chunks (None: no answer)."""

_SIZE = struct.Struct(">i")
_PEERCRED = struct.Struct("3i")  # pid, uid, gid
MAX_FRAME = 100 * 1024 * 1024
"""The largest request or response taken between nodes (``socket.request.max.bytes``)."""

_correlation = itertools.count(1)


def _same_user(sock: socket.socket | None) -> bool:
    """Whether the process at the other end runs as this process's user."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return True  # not Linux: the socket file in the temporary directory is the user's
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return False
    _pid, uid, _gid = _PEERCRED.unpack(raw)
    return bool(uid == os.getuid())


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame; None at a clean end of the stream."""
    try:
        head = await reader.readexactly(_SIZE.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise DecodeError("a frame's size prefix was cut short") from exc
        return None
    (size,) = _SIZE.unpack(head)
    if not 0 <= size <= MAX_FRAME:
        raise DecodeError(f"a frame of {size} bytes between nodes")
    return await reader.readexactly(size)


class PeerServer:
    """A node's Kafka listener for the other nodes; :meth:`start`, then :meth:`stop`."""

    def __init__(self, address: str, handle: FrameHandler) -> None:
        self.address = address
        self._handle = handle
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen (a socket file left by a node that died is replaced)."""
        if not self.address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
        self._server = await asyncio.start_unix_server(self._serve, path=self.address)

    async def stop(self) -> None:
        """Stop listening and drop the connections."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            if not _same_user(writer.get_extra_info("socket")):
                logger.warning("refused a connection on the nodes' listener from another user")
                return
            while (request := await _read_frame(reader)) is not None:
                chunks = await self._handle(memoryview(request))
                if chunks is not None:
                    for chunk in frame(list(chunks)):
                        if not isinstance(chunk, (bytes, bytearray, memoryview)):
                            # Records sent from files: not an answer given between nodes.
                            raise DecodeError("a response with records from files")
                        writer.write(chunk)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, DecodeError) as exc:
            logger.info("a node's connection ended: %s", exc)
        except Exception:
            # The dispatch answers what it can; what escapes it ends this connection only.
            logger.exception("a request from another node failed")
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()
            if task is not None:
                self._connections.discard(task)


async def call(
    address: str,
    api_key: int,
    api_version: int,
    body: Mapping[str, Any],
    timeout: float,
    *,
    client_id: str = "seglog-node",
) -> dict[str, Any]:
    """Send one request to the node at ``address`` and await its answer's body.

    ControllerUnavailableError (``unreachable`` when no connection was made,
    so the request surely was not carried out) if the node cannot be reached,
    closes the connection, or does not answer within ``timeout`` seconds.
    """
    correlation_id = next(_correlation) & 0x7FFFFFFF
    request = encode_request(api_key, api_version, correlation_id, client_id, body, framed=True)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(address), timeout)
    except (OSError, TimeoutError) as exc:
        unreachable = ControllerUnavailableError(f"node unreachable (api key {api_key}): {exc}")
        unreachable.unreachable = True
        raise unreachable from exc
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(_read_frame(reader), timeout)
        if answer is None:
            raise ControllerUnavailableError(f"node closed the connection (api key {api_key})")
        got, response = decode_response(api_key, api_version, answer)
        if got != correlation_id:
            raise ControllerUnavailableError(
                f"node answered correlation id {got}, not {correlation_id}"
            )
        return response
    except (OSError, TimeoutError, asyncio.IncompleteReadError, DecodeError) as exc:
        raise ControllerUnavailableError(
            f"no answer from the node (api key {api_key}): {exc}"
        ) from exc
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
