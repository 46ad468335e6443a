"""Topic administration sent by a node that is not the controller to the controller.

As Kafka's brokers forward administration to the controller (KIP-590), a
node wraps the client's CreateTopics, DeleteTopics or CreatePartitions whole
in an Envelope with the client's principal and address, and sends it on the
nodes' Kafka listener (:mod:`seglog.broker.nodes.peers`); the controller
authorizes and handles it with the ordinary handler, and the client gets the
controller's response unchanged. Nothing is checked or decided on the node
that forwards: one authorization path, one handler.

While the controller is restarting, the node waits for it (on the event
loop) up to the request's ``timeout_ms`` and sends again if it went away
mid-request (a request it carried out then answers what it did: "already
exists"); past the timeout every entry answers REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Sequence
from typing import Any

from seglog.broker.nodes.channel import ControllerTimeoutError, ControllerUnavailableError
from seglog.broker.nodes.cluster import Cluster
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.protocol.entries import failed
from seglog.protocol.headers import RequestHeader, encode_response

logger = logging.getLogger(__name__)

FORWARDED = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS})
"""The requests only the controller carries out."""

ANSWER_TIMEOUT = 60.0
"""How long a node waits for the controller's answer to one forwarded request."""
_RETRY_PAUSE = 0.05


def host_bytes(host: str) -> bytes:
    """A client address as Envelope carries it: 4 or 16 bytes (empty if not an IP)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def host_text(packed: bytes) -> str:
    """The client address an Envelope carries, as text ("" if there is none)."""
    try:
        return str(ipaddress.ip_address(packed)) if packed else ""
    except ValueError:
        return ""


def envelope(frame: bytes | memoryview, principal: str, host: str) -> dict[str, Any]:
    """An Envelope request's body carrying ``frame`` as sent by ``principal`` from ``host``."""
    return {
        "request_data": bytes(frame),
        "request_principal": principal.encode(),
        "client_host_address": host_bytes(host),
    }


async def send_enveloped(
    cluster: Cluster, node_id: int, frame: bytes | memoryview, principal: str, host: str
) -> bytes:
    """Have node ``node_id`` handle ``frame`` as ``principal`` from ``host``; its response frame.

    :class:`EnvelopeRefusedError` when the node answers the Envelope with an
    error; ControllerUnavailableError when it cannot be reached.
    """
    answer = await cluster.call(
        node_id, ApiKey.ENVELOPE, 0, envelope(frame, principal, host), ANSWER_TIMEOUT
    )
    data = answer.get("response_data")
    code = int(answer.get("error_code", 0))
    if code != 0 or data is None:
        raise EnvelopeRefusedError(error_codes.name_for(code) if code else "UNKNOWN_SERVER_ERROR")
    return bytes(data)


class EnvelopeRefusedError(Exception):
    """A node answered an Envelope with an error (its Kafka name is the message)."""

    @property
    def error(self) -> str:
        """Kafka's name of the error."""
        return str(self.args[0])


def _entries(api_key: int, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The response's list of entries and one identifying value set per requested entry."""
    if api_key == ApiKey.CREATE_TOPICS:
        return "topics", [{"name": t["name"]} for t in body.get("topics") or ()]
    if api_key == ApiKey.CREATE_PARTITIONS:
        return "results", [{"name": t["name"]} for t in body.get("topics") or ()]
    if body.get("topics") is not None:  # DeleteTopics v6+: names or ids
        return "responses", [
            {"name": t.get("name"), "topic_id": t["topic_id"]} for t in body["topics"]
        ]
    return "responses", [{"name": name} for name in body.get("topic_names") or ()]


def failed_response(
    header: RequestHeader, body: dict[str, Any], error: str, message: str
) -> Sequence[Any]:
    """The request answered with ``error`` for every entry, as the controller would fail it."""
    path, keys = _entries(header.api_key, body)
    code = error_codes.code_for(error)
    answer = {
        "throttle_time_ms": 0,
        path: [failed(header.api_key, path, code, error_message=message, **k) for k in keys],
    }
    return encode_response(header.api_key, header.api_version, header.correlation_id, answer)


async def forward(
    cluster: Cluster,
    frame: memoryview,
    header: RequestHeader,
    body: dict[str, Any],
    principal: str,
    host: str,
) -> Sequence[Any]:
    """Have the controller handle the request ``frame``; the response chunks to send back."""
    timeout = max(0, int(body.get("timeout_ms") or 0)) / 1000
    deadline = time.monotonic() + timeout
    while True:
        try:
            await cluster.await_controller(deadline - time.monotonic())
            data = await send_enveloped(cluster, cluster.controller_id, frame, principal, host)
        except ControllerTimeoutError as exc:
            return failed_response(header, body, "REQUEST_TIMED_OUT", str(exc))
        except ControllerUnavailableError as exc:
            if time.monotonic() >= deadline:
                message = (
                    f"the controller (node {cluster.controller_id}) did not answer within "
                    f"{timeout:g} s: {exc}"
                )
                return failed_response(header, body, "REQUEST_TIMED_OUT", message)
            await asyncio.sleep(_RETRY_PAUSE)
            continue
        except EnvelopeRefusedError as exc:
            logger.warning("the controller refused a forwarded request: %s", exc.error)
            return failed_response(header, body, exc.error, "the controller refused the request")
        return [data]
