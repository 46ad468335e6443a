"""Kafka requests over a connection of seglog's own, secured as the client properties say.

confluent-kafka's AdminClient cannot ask for everything the tools need: the
cluster-wide default broker resource and client quotas (``seglog configs``), a
transaction's partition leaders (``seglog transactions``), share groups
(``seglog groups``). Those requests are encoded by :mod:`seglog.protocol` and
sent here, one connection each, reaching the broker as librdkafka would with
the same properties:

- ``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
- TLS from ``ssl.ca.location`` / ``ssl.ca.pem`` (else the system's CAs),
  ``ssl.certificate.location`` + ``ssl.key.location`` (+ ``ssl.key.password``)
  or their ``.pem`` forms, ``enable.ssl.certificate.verification`` and
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, or ``none``);
- SASL PLAIN or SCRAM-SHA-256/512 from ``sasl.mechanism(s)``, ``sasl.username``
  and ``sasl.password``: SaslHandshake v1, then SaslAuthenticate v2.

What librdkafka can do and this cannot (GSSAPI, OAUTHBEARER, a PKCS#12 key
store) is refused in one line naming what works.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from seglog.broker.security.scram import MECHANISMS, ScramClient, ScramError
from seglog.broker.security.tls import load_chain_text, normalize_pem
from seglog.cli._client import TLS_LISTENER_HINT, ClientError, ClientSettings
from seglog.protocol import ApiKey, decode_response, encode_request, error_codes

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
"""A response longer than this is not believed: a length prefix that lies is refused unread."""
_SPOKEN_MECHANISMS = ("PLAIN", *MECHANISMS)
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNEXPECTED_EOF_WHILE_READING"}
)
"""OpenSSL's reasons when what answered the handshake does not speak TLS."""
_CERTIFICATE_HINT = (
    "does the listener require a client certificate? (ssl.certificate.location and "
    "ssl.key.location)"
)


def kafka_request(
    settings: ClientSettings,
    api: int,
    version: int,
    body: Mapping[str, Any],
    *,
    address: str | None = None,
    client_id: str = "seglog",
) -> Any:
    """One request to ``address`` (else the first bootstrap server); its decoded answer.

    Raises ClientError naming the address and the cause: refused, TLS handshake,
    SASL authentication, a closed connection, or no answer within the timeout.
    """
    target = address or settings.bootstrap.split(",")[0].strip()
    with _connected(settings, target, client_id) as connection:
        return connection.request(api, version, body)


class _Connection:
    """One socket to one broker, plain or TLS, with requests numbered from 1."""

    def __init__(
        self, sock: socket.socket, address: str, client_id: str, client_certificate: bool
    ) -> None:
        self.sock = sock
        self.client_certificate = client_certificate
        self.address = address
        self.client_id = client_id
        self._correlation = 0
        self._answered = False

    def request(self, api: int, version: int, body: Mapping[str, Any]) -> Any:
        self._correlation += 1
        payload = encode_request(api, version, self._correlation, self.client_id, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._exactly(4))
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise ClientError(f"{self.address} answered a length of {size} bytes: not Kafka?")
        correlation, answer = decode_response(api, version, memoryview(self._exactly(size)))
        if correlation != self._correlation:
            raise ClientError(
                f"{self.address} answered request {correlation}, not {self._correlation}"
            )
        self._answered = True
        return answer

    def _hint(self) -> str:
        """What a connection closed before its first answer most likely means."""
        if self._answered:
            return ""
        if not isinstance(self.sock, ssl.SSLSocket):
            return f": {TLS_LISTENER_HINT}"
        if not self.client_certificate:
            return f": {_CERTIFICATE_HINT}"
        return ""

    def _exactly(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            if not chunk:
                raise ClientError(f"{self.address} closed the connection{self._hint()}")
            out += chunk
        return bytes(out)


@contextmanager
def _connected(settings: ClientSettings, address: str, client_id: str) -> Iterator[_Connection]:
    properties = settings.properties
    protocol = properties.get("security.protocol", "plaintext").lower()
    if protocol not in ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"):
        raise ClientError(f"unknown security.protocol {protocol!r}")
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    context = _tls_context(properties) if protocol in ("ssl", "sasl_ssl") else None
    if protocol.startswith("sasl"):
        _sasl_settings(properties)  # refused before connecting
    try:
        sock = socket.create_connection((host, int(port)), timeout=settings.timeout)
    except (OSError, ValueError) as exc:
        raise ClientError(f"cannot reach {address}: {exc}") from exc
    try:
        if context is not None:
            try:
                sock = context.wrap_socket(sock, server_hostname=host)
            except OSError as exc:  # ssl.SSLError, or the peer resetting the handshake
                raise ClientError(
                    f"cannot reach {address}: SSL handshake failed: {_tls_reason(exc)}"
                ) from exc
        certificate = any(
            key in properties for key in ("ssl.certificate.location", "ssl.certificate.pem")
        )
        connection = _Connection(sock, address, client_id, certificate)
        if protocol.startswith("sasl"):
            _authenticate(connection, properties)
        yield connection
    except (OSError, ValueError) as exc:
        if "CERTIFICATE_REQUIRED" in str(getattr(exc, "reason", "")):
            raise ClientError(f"cannot reach {address}: {_CERTIFICATE_HINT}") from exc
        raise ClientError(f"cannot reach {address}: {exc or type(exc).__name__}") from exc
    finally:
        sock.close()


def _tls_reason(error: OSError) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {error.verify_message}"
    reason = getattr(error, "reason", None) or error.strerror or str(error) or type(error).__name__
    if not isinstance(error, ssl.SSLError) or reason in _NOT_TLS:
        return f"{reason} (a PLAINTEXT broker listener?)"
    return str(reason)


def _tls_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS settings of ``properties``, in librdkafka's names and with its defaults."""
    if "ssl.keystore.location" in properties:
        raise ClientError(
            "seglog's own requests cannot read a PKCS#12 key store (ssl.keystore.location): "
            "give the certificate and key as PEM (ssl.certificate.location and "
            "ssl.key.location, or ssl.keystore.type=PEM)"
        )
    try:
        authorities = properties.get("ssl.ca.pem")
        context = ssl.create_default_context(
            cafile=properties.get("ssl.ca.location"),
            cadata=normalize_pem(authorities) if authorities else None,
        )
        if properties.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
            context.check_hostname = False
        if properties.get("enable.ssl.certificate.verification", "true").lower() == "false":
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        _client_certificate(context, properties)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ClientError(f"cannot use the TLS settings: {exc}") from exc
    return context


def _client_certificate(context: ssl.SSLContext, properties: Mapping[str, str]) -> None:
    password = properties.get("ssl.key.password")
    certificate = properties.get("ssl.certificate.location")
    key = properties.get("ssl.key.location")
    if certificate is not None:
        context.load_cert_chain(certificate, key, password)
        return
    if "ssl.certificate.pem" in properties:
        key_text = properties.get("ssl.key.pem")
        if key_text is None:
            raise ClientError("ssl.certificate.pem needs ssl.key.pem beside it")
        load_chain_text(context, properties["ssl.certificate.pem"], key_text, password)


def _sasl_settings(properties: Mapping[str, str]) -> tuple[str, str, str]:
    """The mechanism, user and password; ClientError for what cannot be spoken here."""
    mechanism = (
        properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI"
    ).upper()
    if mechanism not in _SPOKEN_MECHANISMS:
        raise ClientError(
            f"seglog's own requests speak SASL {', '.join(_SPOKEN_MECHANISMS)}, "
            f"not {mechanism} (sasl.mechanism)"
        )
    user = properties.get("sasl.username")
    password = properties.get("sasl.password")
    if user is None or password is None:
        raise ClientError(f"SASL {mechanism} needs sasl.username and sasl.password")
    return mechanism, user, password


def _authenticate(connection: _Connection, properties: Mapping[str, str]) -> None:
    """SaslHandshake v1, then SaslAuthenticate v2 rounds until the mechanism is done."""
    mechanism, user, password = _sasl_settings(properties)
    where = f"cannot reach {connection.address}"
    answer = connection.request(
        ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": mechanism}
    )
    if answer["error_code"]:
        offered = ", ".join(answer["mechanisms"]) or "none"
        raise ClientError(
            f"{where}: SASL mechanism {mechanism} is not enabled on this listener "
            f"(it offers {offered})"
        )

    def exchange(token: bytes) -> bytes:
        reply = connection.request(
            ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token}
        )
        if reply["error_code"]:
            reason = reply["error_message"] or error_codes.name_for(reply["error_code"])
            raise ClientError(f"{where}: SASL authentication error: {reason}")
        return bytes(reply["auth_bytes"])

    if mechanism == "PLAIN":
        exchange(f"\0{user}\0{password}".encode())
        return
    scram = ScramClient(mechanism, user, password)
    try:
        server_first = exchange(scram.first())
        scram.verify(exchange(scram.final(server_first)))
    except ScramError as exc:
        raise ClientError(f"{where}: SASL authentication error: {exc}") from exc
