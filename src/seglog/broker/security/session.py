"""One connection's security state, and settings looked up per listener.

Kafka lets most security settings be given per listener:
``listener.name.<name>.ssl.keystore.location`` overrides ``ssl.keystore.location``
on the listener ``<name>`` (lower case), and SASL settings may also carry the
mechanism (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from seglog.broker.settings import Listener
from seglog.config import BrokerConfig

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a connection that did not authenticate (PLAINTEXT, SSL without a cert)."""


def listener_value(
    config: BrokerConfig, listener: str, key: str, mechanism: str | None = None
) -> Any:
    """``key`` for ``listener``: its listener-prefixed form if given, else the plain one."""
    prefix = f"listener.name.{listener.lower()}."
    names = [prefix + key]
    if mechanism is not None:
        names.insert(0, f"{prefix}{mechanism.lower()}.{key}")
    for name in names:
        if config.is_set(name):
            return config[name]
    return config[key]


@dataclass
class Session:
    """Who is on the other end of one connection, and how far its authentication got."""

    listener: Listener
    host: str = ""
    """The client's address, without the slash Kafka's ACLs show."""
    principal: str = ANONYMOUS
    authenticated: bool = True
    """False on a SASL listener until a SASL exchange succeeds."""
    expires_at: float | None = None
    """For a re-authenticating SASL session (KIP-368): when it expires (monotonic)."""
    security: Any = None
    """The listener's :class:`~seglog.broker.security.listener.ListenerSecurity`."""
    exchange: Any = None
    """The SASL exchange under way, if one is."""
    mechanism: str | None = None
    raw_tokens: bool = False
    """After SaslHandshake v0: the next frames are bare SASL tokens."""
    close_after: float | None = None
    """Set when the connection must close this many seconds after the response."""
    extra: dict[str, Any] = field(default_factory=dict)
    between_nodes: bool = False
    """A connection from another node of the cluster (it may send Envelope)."""
    gone: asyncio.Future[None] | None = None
    """Done once the connection has ended or reached end of stream (a waiting Fetch stops)."""

    @property
    def client_host(self) -> str:
        """The client's address as Kafka's group descriptions show it (``/127.0.0.1``)."""
        return f"/{self.host}" if self.host else "unknown"

    def expired(self) -> bool:
        """Whether the session's lifetime (connections.max.reauth.ms) has run out."""
        return self.expires_at is not None and time.monotonic() >= self.expires_at
