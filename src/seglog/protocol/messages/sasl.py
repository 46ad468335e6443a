"""SaslHandshake (key 17) and SaslAuthenticate (key 36).

SaslHandshake is never flexible. v0 is followed by raw SASL tokens outside the
Kafka framing; v1 by SaslAuthenticate requests. SaslAuthenticate v1 adds the
session lifetime and v2 is flexible.
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

SASL_HANDSHAKE = Api(
    17,
    "SaslHandshake",
    "0-1",
    flexible=None,
    request=(F("mechanism", "string"),),
    response=(
        F("error_code", "int16"),
        F("mechanisms", "[]string"),
    ),
)

SASL_AUTHENTICATE = Api(
    36,
    "SaslAuthenticate",
    "0-2",
    flexible=2,
    request=(F("auth_bytes", "bytes"),),
    response=(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+", ignorable=True),
    ),
)
