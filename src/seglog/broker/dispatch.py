"""API key → handler, and the turning of one request frame into response chunks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from seglog.broker.forwarding import FORWARDED, forward, host_text
from seglog.broker.handlers import (
    admin,
    cluster,
    configs,
    consumer_groups,
    fetch,
    groups,
    metadata,
    produce,
    quotas,
    share_fetch,
    share_groups,
    share_offsets,
    transactions,
)
from seglog.broker.quotas import (
    ANONYMOUS,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from seglog.broker.security import access, sasl
from seglog.broker.security import handlers as security
from seglog.broker.security.access import operations
from seglog.broker.security.listener import ListenerSecurity
from seglog.broker.security.session import ANONYMOUS as ANONYMOUS_PRINCIPAL
from seglog.broker.security.session import Session
from seglog.broker.settings import Listener
from seglog.broker.state import BrokerState
from seglog.protocol import error_codes
from seglog.protocol.api_keys import BETWEEN_NODES, DESCRIPTIONS, ApiKey
from seglog.protocol.bodies.forwarding import EnvelopeRequest, EnvelopeResponse
from seglog.protocol.errors import DecodeError, UnsupportedVersionError
from seglog.protocol.headers import RequestHeader, decode_request, encode_response, peek_header

logger = logging.getLogger(__name__)

Handler = Callable[[BrokerState, RequestHeader, Any, Session], Awaitable[Any]]
"""A request's handler: the broker, the request's header and body, and its connection."""
"""Takes its API's request body and answers its response body (or None: no answer).

Bodies are dicts; a handler may declare them as its API's generated types
(:mod:`seglog.protocol.bodies`), hence ``Any`` for a table of every API.
"""

HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: metadata.api_versions,
    ApiKey.METADATA: metadata.metadata,
    ApiKey.DESCRIBE_CLUSTER: metadata.describe_cluster,
    ApiKey.PRODUCE: produce.produce,
    ApiKey.INIT_PRODUCER_ID: produce.init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.add_offsets_to_txn,
    ApiKey.END_TXN: transactions.end_txn,
    ApiKey.WRITE_TXN_MARKERS: transactions.write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: transactions.txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.list_transactions,
    ApiKey.FETCH: fetch.fetch,
    ApiKey.LIST_OFFSETS: fetch.list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: fetch.offset_for_leader_epoch,
    ApiKey.CREATE_TOPICS: admin.create_topics,
    ApiKey.DELETE_TOPICS: admin.delete_topics,
    ApiKey.CREATE_PARTITIONS: admin.create_partitions,
    ApiKey.DELETE_RECORDS: admin.delete_records,
    ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
    ApiKey.ALTER_CONFIGS: admin.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
    ApiKey.DESCRIBE_ACLS: security.describe_acls,
    ApiKey.CREATE_ACLS: security.create_acls,
    ApiKey.DELETE_ACLS: security.delete_acls,
    ApiKey.SASL_HANDSHAKE: security.sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: security.sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: security.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security.alter_user_scram_credentials,
    ApiKey.DESCRIBE_LOG_DIRS: cluster.describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: cluster.alter_replica_log_dirs,
    ApiKey.DESCRIBE_PRODUCERS: cluster.describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: cluster.describe_topic_partitions,
    ApiKey.ELECT_LEADERS: cluster.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: cluster.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: cluster.list_partition_reassignments,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas.describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: quotas.alter_client_quotas,
    ApiKey.FIND_COORDINATOR: groups.find_coordinator,
    ApiKey.JOIN_GROUP: groups.join_group,
    ApiKey.SYNC_GROUP: groups.sync_group,
    ApiKey.HEARTBEAT: groups.heartbeat,
    ApiKey.LEAVE_GROUP: groups.leave_group,
    ApiKey.OFFSET_COMMIT: groups.offset_commit,
    ApiKey.OFFSET_FETCH: groups.offset_fetch,
    ApiKey.LIST_GROUPS: groups.list_groups,
    ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
    ApiKey.DELETE_GROUPS: groups.delete_groups,
    ApiKey.OFFSET_DELETE: groups.offset_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.consumer_group_describe,
    ApiKey.SHARE_FETCH: share_fetch.share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_fetch.share_acknowledge,
    ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_groups.share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_offsets.describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_offsets.alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_offsets.delete_share_group_offsets,
}


_WAITING_APIS = frozenset({ApiKey.FETCH, ApiKey.SHARE_FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP})


def _api_name(api_key: int) -> str:
    """Kafka's name of an API (its request label on /metrics), the key itself if unknown."""
    api = DESCRIPTIONS.get(api_key)
    return api.name if api is not None else str(api_key)


class CloseConnection(Exception):
    """The request cannot be answered: the connection must be closed."""


async def handle_frame(
    state: BrokerState, frame: memoryview, session: Session | None = None
) -> list[Any] | None:
    """Decode, handle and encode one request; None when no response is due (acks=0).

    ``session`` is the connection's security state: on a SASL listener only
    ApiVersions and the SASL APIs are served before authentication (see
    :mod:`seglog.broker.security.sasl`), and with an authorizer every request
    is authorized first (:mod:`seglog.broker.security.access`). Raises
    :class:`CloseConnection` for a request that cannot be answered at all, as
    Kafka closes the connection then.
    """
    if session is None:
        # Outside a connection (tests, tools): as a client of the first listener.
        session = Session(state.settings.listeners[0])
    if session.raw_tokens:
        # After SaslHandshake v0 the client sends bare SASL tokens, not requests.
        try:
            return [sasl.raw_token(session, bytes(frame))]
        except sasl.AuthenticationFailed as exc:
            # No answer: the connection closes after Kafka's delay.
            sasl.failed(session, exc, session.exchange.user if session.exchange else None)
            return None
    began = time.perf_counter()
    try:
        request = decode_request(frame, supported=BETWEEN_NODES if session.between_nodes else None)
    except UnsupportedVersionError as exc:
        state.metrics.observe(_api_name(exc.api_key), exc.api_version, "UNSUPPORTED_VERSION", 0.0)
        if exc.api_key == ApiKey.API_VERSIONS:
            # Answer with v0 so that a client asking a newer version learns ours.
            body = metadata.api_versions_body(
                error_codes.code_for("UNSUPPORTED_VERSION"),
                share_groups=share_groups.share_groups_enabled(state),
            )
            return encode_response(ApiKey.API_VERSIONS, 0, exc.correlation_id, body)
        logger.warning("closing a connection: %s", exc)
        raise CloseConnection(str(exc)) from exc
    except DecodeError as exc:
        state.metrics.observe("unknown", -1, "INVALID_REQUEST", 0.0)
        try:
            head = peek_header(frame)
            what = f"api key {head.api_key} v{head.api_version} from {head.client_id}"
        except DecodeError:
            what = "an unreadable request"
        logger.warning("closing a connection after a malformed request (%s): %s", what, exc)
        logger.debug("malformed request bytes: %s", bytes(frame).hex())
        raise CloseConnection(str(exc)) from exc
    header = request.header
    refusal = sasl.admitted(session, header.api_key)
    if refusal is not None:
        logger.info("closing the connection from /%s: %s", session.host, refusal)
        raise CloseConnection(refusal)
    if header.api_key in FORWARDED and not state.cluster.is_controller:
        # The controller authorizes and handles it, as the client's principal.
        chunks = await forward(
            state.cluster,
            frame,
            header,
            request.body,
            session.principal,
            session.host,
        )
        state.metrics.observe(request.api.name, header.api_version, "NONE", 0.0)
        return list(chunks)
    handler = HANDLERS[header.api_key]
    authorizer = None if session.security is None else session.security.authorizer
    may: operations.May = operations.anyone
    if authorizer is None:
        response = await handler(state, header, request.body, session)
    else:
        # Authorization in one place: the plan of the API may refuse the request
        # whole, or remove what the principal may not touch and fix the answer.
        who = access.Access(
            authorizer,
            session.principal,
            session.host,
            state.log_dir.has_topic,
            lambda: list(state.log_dir.topics()),
        )
        may = who.allowed
        decision = access.check(who, header.api_key, header.api_version, request.body)
        if decision.close is not None:
            raise CloseConnection(decision.close)
        if decision.response is not None:
            if header.api_key == ApiKey.PRODUCE and request.body.get("acks") == 0:
                return None
            response = decision.response
        else:
            response = await handler(state, header, request.body, session)
            if response is not None:
                decision.fix(response)
    if response is not None:
        operations.fill(header.api_key, header.api_version, request.body, response, may)
    elapsed = time.perf_counter() - began
    state.metrics.observe(request.api.name, header.api_version, "NONE", elapsed)
    if header.api_key == ApiKey.FETCH:
        # Every fetch here is a consumer's: seglog's nodes do not replicate.
        state.metrics.observe_also_as("FetchConsumer", header.api_version, elapsed)
    if not state.quotas.active:
        if response is None:
            return None
        return encode_response(header.api_key, header.api_version, header.correlation_id, response)
    user = ANONYMOUS
    if session.principal.startswith("User:"):
        user = session.principal.removeprefix("User:")  # quotas by authenticated user
    return await _throttled(state, header, response, len(frame), elapsed, user)


NODES_LISTENER = Listener("NODES", "", 0)
"""The listener a request forwarded by another node is taken to have arrived on."""


async def _envelope(
    state: BrokerState, header: RequestHeader, body: EnvelopeRequest, peer: Session
) -> EnvelopeResponse:
    """Envelope: handle a client's request another node forwarded, as that client.

    The request is authorized with the client's principal and address, then
    handled as if the client had sent it here; the response goes back whole.
    """
    principal = body["request_principal"]
    session = Session(
        NODES_LISTENER,
        host=host_text(bytes(body["client_host_address"])),
        principal=ANONYMOUS_PRINCIPAL if principal is None else bytes(principal).decode(),
        security=ListenerSecurity(NODES_LISTENER, authorizer=state.authorizer),
    )
    try:
        chunks = await handle_frame(state, memoryview(body["request_data"]), session)
    except CloseConnection as exc:
        logger.warning("a forwarded request could not be answered: %s", exc)
        return {"response_data": None, "error_code": error_codes.code_for("INVALID_REQUEST")}
    if chunks is None:
        return {"response_data": None, "error_code": 0}
    if not all(isinstance(c, (bytes, bytearray, memoryview)) for c in chunks):
        # Records sent from files cannot travel in an envelope; only administration is forwarded.
        return {"response_data": None, "error_code": error_codes.code_for("INVALID_REQUEST")}
    return {"response_data": b"".join(bytes(c) for c in chunks), "error_code": 0}


HANDLERS[ApiKey.ENVELOPE] = _envelope


async def _throttled(
    state: BrokerState,
    header: RequestHeader,
    response: dict[str, Any] | None,
    request_size: int,
    elapsed: float,
    user: str = ANONYMOUS,
) -> list[Any] | None:
    """Charge the request to the client's quotas; answer late by the throttle time, if any.

    Every request counts against ``request_percentage`` (its handling time,
    but for the APIs that wait by design), a
    Produce against ``producer_byte_rate`` (its size), a Fetch against
    ``consumer_byte_rate`` (its answer's size). The throttle time is the
    largest of them; it is reported in ``throttle_time_ms`` and the answer
    (or, for acks=0, the connection's next request) waits that long.
    """
    quotas = state.quotas
    client_id = header.client_id or ""
    now_ms = int(time.time() * 1000)
    # Kafka charges the time a request thread spends; the APIs that wait by design
    # (a long-polling Fetch, a JoinGroup held for a rebalance) mostly wait here, so
    # their time is not charged.
    busy = 0.0 if header.api_key in _WAITING_APIS else elapsed
    throttle = quotas.record(REQUEST_PERCENTAGE, user, client_id, busy * 100, now_ms)
    if header.api_key == ApiKey.PRODUCE:
        throttle = max(
            throttle, quotas.record(PRODUCER_BYTE_RATE, user, client_id, request_size, now_ms)
        )
    chunks = None
    if response is not None:
        chunks = encode_response(
            header.api_key, header.api_version, header.correlation_id, response
        )
        if header.api_key == ApiKey.FETCH:
            size = sum(len(chunk) for chunk in chunks)
            throttle = max(
                throttle, quotas.record(CONSUMER_BYTE_RATE, user, client_id, size, now_ms)
            )
        if throttle > 0 and "throttle_time_ms" in response:
            response["throttle_time_ms"] = throttle
            chunks = encode_response(
                header.api_key, header.api_version, header.correlation_id, response
            )
    if throttle > 0:
        await asyncio.sleep(throttle / 1000)
    return chunks
