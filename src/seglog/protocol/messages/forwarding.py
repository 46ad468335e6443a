"""Envelope (KIP-590): a client's request carried from one node to the controller.

A node that is not the controller wraps a client's administration request
whole (its header and body, as the client sent them) with the client's
principal and address; the controller handles it with the ordinary handler,
authorized as that principal, and sends the response back whole. Envelope is
served only between the nodes (never advertised to clients).
"""

from __future__ import annotations

from seglog.protocol.schema import Api, F

ENVELOPE = Api(
    58,
    "Envelope",
    "0",
    flexible=0,
    request=(
        F("request_data", "bytes"),
        F("request_principal", "bytes", nullable="0+"),
        F("client_host_address", "bytes"),
    ),
    response=(
        F("response_data", "bytes", nullable="0+", default=None),
        F("error_code", "int16"),
    ),
)
