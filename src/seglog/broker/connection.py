"""One client connection: frames in, responses out, in order.

Requests of a connection are handled one at a time in arrival order, as a
Kafka broker does (it mutes a channel until its response is sent); pipelined
requests wait in the socket buffer meanwhile. Response chunks that are file
regions go out with ``sendfile``: the record bytes never enter Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from seglog.broker.dispatch import CloseConnection, handle_frame
from seglog.broker.state import BrokerState
from seglog.protocol.errors import FrameTooLargeError
from seglog.protocol.framing import FrameBuffer, frame
from seglog.storage.region import FileRegion

logger = logging.getLogger(__name__)

_READ_SIZE = 256 * 1024


async def send_chunks(writer: asyncio.StreamWriter, chunks: list[Any]) -> None:
    """Write bytes chunks directly and file regions with sendfile."""
    loop = asyncio.get_running_loop()
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            if chunk.length == 0:
                continue
            with open(chunk.fd, "rb", closefd=False) as source:
                await loop.sendfile(
                    writer.transport, source, chunk.position, chunk.length, fallback=True
                )
        else:
            writer.write(chunk)
    await writer.drain()


async def serve_connection(
    state: BrokerState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve one client until it disconnects or sends something unanswerable."""
    peer = writer.get_extra_info("peername")
    buffer = FrameBuffer(state.settings.socket_request_max_bytes)
    state.metrics.connections += 1
    try:
        while True:
            data = await reader.read(_READ_SIZE)
            if not data:
                break
            buffer.receive_data(data)
            for request in buffer.frames():
                chunks = await handle_frame(state, request)
                if chunks is not None:
                    await send_chunks(writer, frame(chunks))
    except FrameTooLargeError as exc:
        logger.warning("closing the connection from %s: %s", peer, exc)
    except CloseConnection:
        pass
    except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
        logger.info("connection from %s ended: %s", peer, exc)
    finally:
        state.metrics.connections -= 1
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
