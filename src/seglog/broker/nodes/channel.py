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

import json
import logging
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
        cls = (
            ControllerUnavailableError if answer["error"] == "ControllerUnavailableError" else None
        )
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


def call(address: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Send ``request`` to the node at ``address``; its answer (errors raised again).

    ControllerUnavailableError if the node cannot be reached or does not answer in time.
    """
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
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
