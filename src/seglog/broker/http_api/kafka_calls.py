"""Kafka requests made by the API on behalf of its caller, handled by the broker's own handlers.

A route that needs what a Kafka client would ask (a group's members, its
committed offsets, the ACLs) builds that request and has the broker handle
it as the HTTP caller: the caller's principal and address in a session
carrying the broker's authorizer, through
:func:`~seglog.broker.dispatch.handle_frame`. Authorization, quotas and
request metrics are then exactly a Kafka client's; nothing is decided twice.
With ``--nodes`` a request meant for another node (a group's coordinator, a
partition's leader) goes there in an Envelope, as a node forwards
administration to the controller (:mod:`seglog.broker.forwarding`).
"""

from __future__ import annotations

import itertools
from typing import Any

from aiohttp import web

from seglog.broker.dispatch import CloseConnection, handle_frame
from seglog.broker.forwarding import EnvelopeRefusedError, send_enveloped
from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.routes import SECURITY, STATE
from seglog.broker.http_api.topic_access import caller
from seglog.broker.nodes.channel import ControllerUnavailableError
from seglog.broker.security.listener import ListenerSecurity
from seglog.broker.security.session import Session
from seglog.protocol.headers import decode_response, encode_request

CLIENT_ID = "seglog-console"
"""The client id the broker's logs, metrics and quotas see for the API's requests."""

_correlation = itertools.count(1)


async def ask(
    request: web.Request,
    api_key: int,
    version: int,
    body: dict[str, Any],
    *,
    node_id: int | None = None,
) -> dict[str, Any]:
    """A Kafka request handled as the HTTP caller; the decoded response body.

    Through :func:`~seglog.broker.dispatch.handle_frame` with a session of
    the caller's principal and address and the broker's authorizer; to
    another node (``node_id``) in an Envelope, handled there the same way.
    An empty dict when the request has no answer (a Produce with acks=0);
    503 ApiError when the other node cannot be reached or refuses the Envelope.
    """
    state = request.app[STATE]
    who = await caller(request)
    frame = encode_request(api_key, version, next(_correlation) & 0x7FFFFFFF, CLIENT_ID, body)
    if node_id is None or node_id == state.cluster.node_id:
        listener = state.settings.listeners[0]
        session = Session(
            listener,
            host=who.host,
            principal=who.principal,
            security=ListenerSecurity(listener, authorizer=request.app[SECURITY].authorizer),
        )
        try:
            chunks = await handle_frame(state, memoryview(frame), session)
        except CloseConnection as exc:
            raise ApiError(400, "INVALID_REQUEST", str(exc)) from exc
        if chunks is None:
            return {}
        data = b"".join(bytes(c) for c in chunks)
    else:
        try:
            data = await send_enveloped(state.cluster, node_id, frame, who.principal, who.host)
        except EnvelopeRefusedError as exc:
            raise ApiError(
                503, exc.error, f"node {node_id} did not handle the request: {exc.error}"
            ) from exc
        except ControllerUnavailableError as exc:
            raise ApiError(503, "COORDINATOR_NOT_AVAILABLE", f"node {node_id}: {exc}") from exc
    return decode_response(api_key, version, data)[1]
