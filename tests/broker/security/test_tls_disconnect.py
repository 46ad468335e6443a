"""A TLS client that goes away is a quiet event, as a plaintext one is."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable

from seglog.protocol import ApiKey
from seglog.protocol.headers import decode_response, encode_request
from tests.broker.security.conftest import Certs, Secured
from tests.broker.security.test_tls import _tls


def _tls_client(port: int, certs: Certs) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs.ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _read(sock: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection before answering"
        data += chunk
    return data


def _api_versions(sock: ssl.SSLSocket, correlation: int) -> None:
    sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation, "eof", {}, framed=True))
    (size,) = struct.unpack(">i", _read(sock, 4))
    got, body = decode_response(ApiKey.API_VERSIONS, 0, memoryview(_read(sock, size)))
    assert got == correlation and body["error_code"] == 0


def test_tls_disconnects_log_no_asyncio_warning(
    secured_broker: Callable[..., Secured], certs: Certs
) -> None:
    broker = secured_broker("SSL", **_tls(certs))
    for n in range(3):
        # A clean TLS close (close_notify, then the socket) ...
        sock = _tls_client(broker.port, certs)
        _api_versions(sock, n)
        sock.unwrap().close()
        # ... and a client that just drops the socket.
        sock = _tls_client(broker.port, certs)
        _api_versions(sock, n)
        sock.close()
    # The broker still serves TLS, and its log is complete once it has stopped.
    sock = _tls_client(broker.port, certs)
    _api_versions(sock, 99)
    sock.close()
    assert broker.process.stop() == 0
    log = broker.process.log.read_text()
    assert "INFO stopped cleanly" in log
    assert "eof_received" not in log, log
    assert "WARNING" not in log, log
