"""The nodes' control channel: one JSON request and one JSON answer per connection.

Each node listens on an abstract Unix socket (:meth:`Cluster.channel_address`)
served by threads, never by the event loop: the controller calls a node back
(``refresh``) while that node's event loop may be waiting for the controller's
answer to the very request that caused the call.

Requests (``{"op": ...}``) and what they do on the node that receives them:

    refresh             re-read the topic list (new topics opened, deleted ones closed)
    release  topic      close this node's partitions of a topic being deleted
    admin    method, args, kwargs
                        (controller only) run a topic administration method of
                        the log directory, then have every live node refresh

Answers are ``{"ok": true, ...}`` or ``{"error": <seglog.errors class>, "message": ...}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

from seglog import errors
from seglog.errors import SeglogError

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControllerUnavailableError(SeglogError):
    """The controller (or another node) did not answer on the control channel."""

    kafka_error = "NOT_CONTROLLER"
    #: True when no connection was made: the request surely was not carried out.
    unreachable: bool = False


class ControllerTimeoutError(ControllerUnavailableError):
    """The controller was not back within the time a forwarded request may wait."""

    kafka_error = "REQUEST_TIMED_OUT"


def error_answer(exc: BaseException) -> dict[str, Any]:
    """The answer that carries ``exc`` back to the caller."""
    name = type(exc).__name__ if isinstance(exc, SeglogError) else "SeglogError"
    return {"error": name, "message": str(exc)}


def raise_for(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer``, or the error it carries raised again as the same seglog error class."""
    if "error" not in answer:
        return answer
    cls = getattr(errors, str(answer["error"]), None)
    if cls is None:
        cls = {
            "ControllerUnavailableError": ControllerUnavailableError,
            "ControllerTimeoutError": ControllerTimeoutError,
        }.get(str(answer["error"]))
    if not (isinstance(cls, type) and issubclass(cls, SeglogError)):
        cls = SeglogError
    raise cls(str(answer.get("message", "")))


class _RequestHandler(socketserver.StreamRequestHandler):
    server: ChannelServer

    def handle(self) -> None:
        line = self.rfile.readline()
        if not line:
            return
        try:
            request = json.loads(line)
            answer = self.server.handler(request)
        except Exception as exc:
            if not isinstance(exc, SeglogError):
                logger.exception("control request failed: %r", line[:200])
            answer = error_answer(exc)
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class ChannelServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A node's end of the control channel, served on daemon threads."""

    daemon_threads = True

    def __init__(self, address: str, handler: Handler) -> None:
        self.handler = handler
        if not address.startswith("\0"):
            # A socket file left by a node that died: this node holds its lock now.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
        super().__init__(address, _RequestHandler)

    def start(self) -> threading.Thread:
        """Serve on a background thread until :meth:`stop`."""
        thread = threading.Thread(target=self.serve_forever, name="seglog-control", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.shutdown()
        self.server_close()


async def reachable(address: str) -> bool:
    """Whether a node listens at ``address`` now (a connection is accepted), without blocking."""
    try:
        _, writer = await asyncio.open_unix_connection(address)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def call(address: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Send ``request`` to the node at ``address``; its answer (errors raised again).

    ControllerUnavailableError if the node cannot be reached (``unreachable``) or
    does not answer in time.
    """
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(address)
            except OSError as exc:
                unreachable = ControllerUnavailableError(
                    f"node unreachable on the control channel ({request.get('op')}): {exc}"
                )
                unreachable.unreachable = True
                raise unreachable from exc
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise ControllerUnavailableError(
            f"node unreachable on the control channel ({request.get('op')}): {exc}"
        ) from exc
    if not data:
        raise ControllerUnavailableError(f"node closed the control channel ({request.get('op')})")
    return raise_for(json.loads(data))
