"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: SaslHandshake, SaslAuthenticate, KIP-368.

Theory of operation
-------------------
A connection of a SASL listener starts unauthenticated. Kafka's server-side
authenticator (``SaslServerAuthenticator``) is followed:

=================  ==========================  ================================
state              request                     outcome
=================  ==========================  ================================
HANDSHAKE          ApiVersions                 answered; HANDSHAKE
HANDSHAKE          SaslHandshake (mechanism)   enabled: AUTHENTICATE (v1) or
                                               RAW_TOKENS (v0); else
                                               UNSUPPORTED_SASL_MECHANISM, close
AUTHENTICATE       SaslAuthenticate            next token; when the mechanism
                                               completes: AUTHENTICATED
RAW_TOKENS         a frame (no Kafka header)   the raw answer token, same
AUTHENTICATED      anything                    served (authorized per request)
AUTHENTICATED      SaslHandshake               re-authentication (KIP-368):
                                               back to AUTHENTICATE
any                anything else               the connection is closed
=================  ==========================  ================================

A failed exchange is answered with SASL_AUTHENTICATION_FAILED and Kafka's
message ``connection.failed.authentication.delay.ms`` after it failed, and the
connection is then closed (Kafka's defence against password guessing, KIP-306).
v0 tokens carry no error: the connection just closes after the delay. Each
failure is counted, and logged at a bounded rate (:mod:`.failures`). Until a
connection has authenticated, no frame may be larger than
``sasl.server.max.receive.size`` (Kafka's bound on what a stranger can make
the broker hold), and a connection that has not authenticated
``sasl.server.authentication.timeout.ms`` after it was accepted is closed.

Re-authentication: with ``connections.max.reauth.ms`` > 0 the
SaslAuthenticate answer (v1+) carries ``session_lifetime_ms`` and the session
expires then; an expired session may only re-authenticate (SaslHandshake,
SaslAuthenticate), anything else closes the connection. A re-authentication
must keep the principal.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from seglog.broker.security.credentials import PlainUsers, ScramStore
from seglog.broker.security.failures import AuthenticationFailures
from seglog.broker.security.scram import MECHANISMS, ScramError, ScramServer
from seglog.broker.security.session import Session, listener_value
from seglog.config import BrokerConfig
from seglog.errors import InvalidConfigError
from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

PRE_AUTHENTICATION_APIS = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)
"""What an unauthenticated connection of a SASL listener may ask."""

_PLAIN_FAILED = "Authentication failed: Invalid username or password"


class AuthenticationFailed(Exception):
    """The client did not prove who it is; the message is what Kafka tells it."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        """What the log says: more than the client is told (why a SCRAM proof failed)."""


def failed(session: Session, exc: AuthenticationFailed, user: str | None) -> None:
    """Count and log a failed authentication; its answer waits Kafka's delay, then closes.

    Kafka holds the failure answer itself for
    ``connection.failed.authentication.delay.ms`` (KIP-306), so that a guesser
    waits for each verdict; the connection's own task sleeps, nothing else does.
    """
    config: SaslConfig = session.security.sasl
    session.exchange = None
    session.close_after = config.failed_delay_ms / 1000
    principal = None if user is None else f"User:{user}"
    config.failures.record(config.listener, principal, session.host, session.mechanism, exc.reason)


@dataclass
class SaslConfig:
    """A listener's SASL settings."""

    mechanisms: tuple[str, ...]
    reauth_ms: int
    failed_delay_ms: int
    max_receive_size: int
    """The largest frame accepted before authentication (``sasl.server.max.receive.size``)."""
    authentication_timeout_ms: int
    """How long a connection may take to authenticate before it is closed."""
    plain: PlainUsers
    scram: ScramStore
    failures: AuthenticationFailures
    """The broker's count and log of failed authentications."""
    listener: str = ""

    @classmethod
    def build(
        cls,
        config: BrokerConfig,
        listener: str,
        log_dir: Any,
        failures: AuthenticationFailures | None = None,
    ) -> SaslConfig:
        """Read the listener's SASL settings; InvalidConfigError for a mechanism not served."""
        mechanisms = tuple(
            m.strip().upper() for m in listener_value(config, listener, "sasl.enabled.mechanisms")
        )
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise InvalidConfigError(
                f"sasl.enabled.mechanisms of listener {listener}: "
                f"{', '.join(unsupported) or 'none'} not supported; seglog serves "
                f"{', '.join(SUPPORTED_MECHANISMS)}"
            )
        jaas = listener_value(config, listener, "sasl.jaas.config", "PLAIN")
        return cls(
            mechanisms=mechanisms,
            reauth_ms=int(listener_value(config, listener, "connections.max.reauth.ms")),
            failed_delay_ms=int(config["connection.failed.authentication.delay.ms"]),
            max_receive_size=int(listener_value(config, listener, "sasl.server.max.receive.size")),
            authentication_timeout_ms=int(
                listener_value(config, listener, "sasl.server.authentication.timeout.ms")
            ),
            plain=PlainUsers(None if jaas is None else str(jaas), config["sasl.plain.users.file"]),
            scram=ScramStore(log_dir),
            failures=AuthenticationFailures() if failures is None else failures,
            listener=listener,
        )


class _Plain:
    """RFC 4616: one message, ``authzid NUL authcid NUL password``."""

    def __init__(self, users: PlainUsers) -> None:
        self._users = users
        self.user: str | None = None
        self.complete = False

    def respond(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed(_PLAIN_FAILED) from exc
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        self.user = user  # named in the log if the check fails
        if not self._users.check(user, password):
            raise AuthenticationFailed(_PLAIN_FAILED)
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.complete = True
        return b""


class _Scram:
    def __init__(self, mechanism: str, store: ScramStore) -> None:
        self._server = ScramServer(mechanism, store.lookup)
        self._mechanism = mechanism

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def user(self) -> str | None:
        return self._server.user

    def respond(self, token: bytes) -> bytes:
        try:
            return self._server.respond(token)
        except ScramError as exc:
            raise AuthenticationFailed(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self._mechanism}",
                reason=str(exc),
            ) from exc


def _exchange(config: SaslConfig, mechanism: str) -> _Plain | _Scram:
    if mechanism == "PLAIN":
        return _Plain(config.plain)
    assert mechanism in MECHANISMS
    return _Scram(mechanism, config.scram)


def handshake(session: Session, version: int, mechanism: str) -> dict[str, Any]:
    """SaslHandshake: pick the mechanism (or refuse it and close after the answer)."""
    config: SaslConfig = session.security.sasl
    if mechanism not in config.mechanisms:
        session.close_after = 0.0
        return {
            "error_code": error_codes.code_for("UNSUPPORTED_SASL_MECHANISM"),
            "mechanisms": list(config.mechanisms),
        }
    session.exchange = _exchange(config, mechanism)
    session.mechanism = mechanism
    session.raw_tokens = version == 0
    return {"error_code": 0, "mechanisms": list(config.mechanisms)}


def authenticate(session: Session, token: bytes) -> dict[str, Any]:
    """SaslAuthenticate: one step of the exchange; failure closes after Kafka's delay."""
    config: SaslConfig = session.security.sasl
    exchange = session.exchange
    if exchange is None:
        session.close_after = 0.0
        return _failed("ILLEGAL_SASL_STATE", "SaslAuthenticate before a successful SaslHandshake")
    try:
        answer = exchange.respond(token)
    except AuthenticationFailed as exc:
        failed(session, exc, exchange.user)
        return _failed("SASL_AUTHENTICATION_FAILED", str(exc))
    lifetime = 0
    if exchange.complete:
        principal = f"User:{exchange.user}"
        if session.authenticated and session.principal != principal:
            refused = AuthenticationFailed(
                "Cannot change principals during re-authentication from "
                f"{session.principal}: {principal}"
            )
            failed(session, refused, exchange.user)
            return _failed("SASL_AUTHENTICATION_FAILED", str(refused))
        session.principal = principal
        session.authenticated = True
        session.exchange = None
        if config.reauth_ms > 0:
            lifetime = config.reauth_ms
            session.expires_at = time.monotonic() + lifetime / 1000
    return {
        "error_code": 0,
        "error_message": None,
        "auth_bytes": answer,
        "session_lifetime_ms": lifetime,
    }


def raw_token(session: Session, token: bytes) -> bytes:
    """A SASL token after SaslHandshake v0 (no Kafka header); AuthenticationFailed closes."""
    exchange = session.exchange
    assert exchange is not None
    answer: bytes = exchange.respond(token)
    if exchange.complete:
        session.principal = f"User:{exchange.user}"
        session.authenticated = True
        session.exchange = None
        session.raw_tokens = False
    return answer


def _failed(error: str, message: str) -> dict[str, Any]:
    return {
        "error_code": error_codes.code_for(error),
        "error_message": message,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


def admitted(session: Session, api_key: int) -> str | None:
    """Why ``api_key`` may not be handled on this connection now; None if it may."""
    if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        # On a listener without SASL these are answered ILLEGAL_SASL_STATE (as
        # Kafka does), so that a misconfigured client fails at once.
        return None
    if not session.authenticated:
        if api_key == ApiKey.API_VERSIONS and session.exchange is None:
            return None
        return f"unexpected request (api key {api_key}) before SASL authentication"
    if session.expired():
        return "the SASL session expired (connections.max.reauth.ms) without re-authentication"
    return None
