"""Handlers of the security APIs: SASL, SCRAM credentials (KIP-554)."""

from __future__ import annotations

from typing import Any

from seglog.broker.security import sasl
from seglog.broker.security.session import SESSION
from seglog.broker.state import BrokerState
from seglog.protocol import error_codes
from seglog.protocol.headers import RequestHeader


async def sasl_handshake(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """SaslHandshake: choose the mechanism of the exchange to come."""
    session = SESSION.get()
    if session is None or session.security is None or session.security.sasl is None:
        # Not a SASL listener: as Kafka answers a handshake that reaches its API layer.
        return {"error_code": error_codes.code_for("ILLEGAL_SASL_STATE"), "mechanisms": []}
    return sasl.handshake(session, header.api_version, str(body["mechanism"]))


async def sasl_authenticate(
    state: BrokerState, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """SaslAuthenticate: one token of the exchange."""
    session = SESSION.get()
    if session is None or session.security is None or session.security.sasl is None:
        return {
            "error_code": error_codes.code_for("ILLEGAL_SASL_STATE"),
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }
    return sasl.authenticate(session, bytes(body["auth_bytes"]))
