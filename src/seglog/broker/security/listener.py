"""What a listener needs to secure its connections, built once at start-up."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from seglog.broker.security.authorizer import Authorizer
from seglog.broker.security.failures import AuthenticationFailures
from seglog.broker.security.sasl import SaslConfig
from seglog.broker.security.session import listener_value
from seglog.broker.security.tls import PrincipalMapper, server_context
from seglog.broker.settings import Listener
from seglog.config import BrokerConfig


@dataclass
class ListenerSecurity:
    """A listener with its TLS context and principal mapping (None where it has no TLS)."""

    listener: Listener
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper | None = None
    sasl: SaslConfig | None = None
    """The listener's SASL settings (SASL_PLAINTEXT and SASL_SSL)."""
    authorizer: Authorizer | None = None
    """The broker's authorizer, shared by every listener (None: everything is allowed)."""

    @property
    def tls(self) -> bool:
        """Whether connections are encrypted."""
        return self.ssl_context is not None

    @classmethod
    def build(
        cls,
        config: BrokerConfig,
        listener: Listener,
        log_dir: Path,
        authorizer: Authorizer | None = None,
        failures: AuthenticationFailures | None = None,
    ) -> ListenerSecurity:
        """Read the listener's settings; InvalidConfigError when they are wrong."""
        protocol = listener.security_protocol
        result = cls(listener, authorizer=authorizer)
        if protocol in ("SSL", "SASL_SSL"):
            result.ssl_context = server_context(config, listener.name)
            result.principal_mapper = PrincipalMapper(
                str(listener_value(config, listener.name, "ssl.principal.mapping.rules"))
            )
        if protocol.startswith("SASL_"):
            result.sasl = SaslConfig.build(config, listener.name, log_dir, failures)
        return result
