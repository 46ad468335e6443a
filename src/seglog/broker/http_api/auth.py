"""Who is asking, and whether they may: HTTP Basic against the broker's SASL users, then ACLs.

A broker with a SASL listener has users (PLAIN's from ``sasl.jaas.config`` and
``sasl.plain.users.file``, SCRAM's in the log directory); the API then
requires HTTP Basic with one of them, checked against the stores of the
mechanisms that listener enables, so the API admits exactly whoever could log
in over Kafka. A SCRAM password is checked by deriving its StoredKey with the
user's salt and iterations (the file never holds the password). A failure is
counted with the listener's (``/metrics``), logged at a bounded rate and
answered 401 after ``connection.failed.authentication.delay.ms``, as a failed
SASL exchange is (Kafka's defence against guessing, KIP-306).

Without a SASL listener the caller is ``User:ANONYMOUS``, or over mutual TLS
(an SSL listener's ``ssl.client.auth``) its certificate's principal, mapped by
``ssl.principal.mapping.rules`` as a Kafka client's is. Either way, when the
broker has an authorizer, the principal's ACLs decide, as they decide a Fetch:
DESCRIBE on the topic (without it the topic's existence is not told), then READ.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from seglog.broker.http_api.errors import ApiError
from seglog.broker.security.authorizer import Authorizer, Operation, ResourceType
from seglog.broker.security.listener import ListenerSecurity
from seglog.broker.security.sasl import SaslConfig
from seglog.broker.security.scram import MECHANISMS, credential_from_salted, salted_password
from seglog.broker.security.session import ANONYMOUS
from seglog.broker.security.tls import PrincipalMapper, peer_principal

MECHANISM = "HTTP Basic"
"""How the failure log names this way of authenticating."""
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="seglog", charset="UTF-8"'}


@dataclass(frozen=True)
class ConsoleSecurity:
    """What the API takes from the broker's listeners: users, ACLs, certificates."""

    sasl: SaslConfig | None = None
    """The first SASL listener's settings (None: no users, everyone anonymous)."""
    authorizer: Authorizer | None = None
    ssl_context: ssl.SSLContext | None = None
    """The first TLS listener's context (None: plain HTTP)."""
    principal_mapper: PrincipalMapper | None = None
    """That listener's, when it is an SSL one: a client certificate names the caller."""

    @classmethod
    def of(
        cls, listeners: Sequence[ListenerSecurity], authorizer: Authorizer | None
    ) -> ConsoleSecurity:
        """The API's security from the broker's listeners (the first of each kind)."""
        sasl = next((x.sasl for x in listeners if x.sasl is not None), None)
        tls = next((x for x in listeners if x.ssl_context is not None), None)
        if tls is None:
            return cls(sasl, authorizer)
        # Mutual TLS names the caller as it names a Kafka client of an SSL listener.
        mapper = tls.principal_mapper if tls.listener.security_protocol == "SSL" else None
        return cls(sasl, authorizer, tls.ssl_context, mapper)


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "SASL_AUTHENTICATION_FAILED", message, _CHALLENGE)


def _basic(header: str) -> tuple[str, str] | None:
    """``(user, password)`` from an ``Authorization: Basic ...`` header (None if malformed)."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep and user else None


def check_password(sasl: SaslConfig, user: str, password: str) -> bool:
    """Whether ``password`` is ``user``'s under a mechanism the listener enables (blocking)."""
    if "PLAIN" in sasl.mechanisms and sasl.plain.check(user, password):
        return True
    for mechanism in sasl.mechanisms:
        if mechanism not in MECHANISMS:
            continue
        credential = sasl.scram.lookup(user, mechanism)
        if credential is None:
            continue
        salted = salted_password(mechanism, password, credential.salt, credential.iterations)
        derived = credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
        if hmac.compare_digest(derived.stored_key, credential.stored_key):
            return True
    return False


async def authenticate(request: web.Request, security: ConsoleSecurity) -> str:
    """The principal making ``request`` (401 ApiError when it must and does not prove it)."""
    sasl = security.sasl
    if sasl is None:
        if security.principal_mapper is None or request.transport is None:
            return ANONYMOUS
        ssl_object = request.transport.get_extra_info("ssl_object")
        try:
            principal = peer_principal(ssl_object, security.principal_mapper)
        except ValueError as exc:  # no mapping rule applies to the subject
            raise ApiError(403, "SASL_AUTHENTICATION_FAILED", str(exc)) from exc
        return ANONYMOUS if principal is None else principal
    header = request.headers.get("Authorization")
    if header is None:
        raise _unauthorized("authentication required: HTTP Basic with a SASL user's credentials")
    credentials = _basic(header)
    host = request.remote or ""
    if credentials is None:
        sasl.failures.record(sasl.listener, None, host, MECHANISM, "malformed Authorization")
        await asyncio.sleep(sasl.failed_delay_ms / 1000)
        raise _unauthorized("malformed Authorization header: expected Basic credentials")
    user, password = credentials
    # SCRAM's key derivation takes milliseconds of CPU: off the event loop.
    if await asyncio.to_thread(check_password, sasl, user, password):
        return f"User:{user}"
    sasl.failures.record(sasl.listener, f"User:{user}", host, MECHANISM, "invalid credentials")
    await asyncio.sleep(sasl.failed_delay_ms / 1000)
    raise _unauthorized("Authentication failed: Invalid username or password")


def allowed(
    security: ConsoleSecurity, principal: str, host: str, operation: Operation, topic: str
) -> bool:
    """Whether ``principal`` may do ``operation`` on ``topic`` (always, without an authorizer)."""
    authorizer = security.authorizer
    return authorizer is None or authorizer.authorize(
        principal, host, operation, ResourceType.TOPIC, topic
    )


def require(
    security: ConsoleSecurity, principal: str, host: str, operation: Operation, topic: str
) -> None:
    """Refuse (403) unless ``principal`` may do ``operation`` on ``topic``."""
    if not allowed(security, principal, host, operation, topic):
        raise ApiError(
            403,
            "TOPIC_AUTHORIZATION_FAILED",
            f"{principal} is not authorized to {operation.name} topic '{topic}'",
        )
