"""What a client that has not logged in can make a SASL listener do: little, and slowly."""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from collections.abc import Callable

from confluent_kafka import Consumer, Producer

from seglog.protocol.api_keys import ApiKey
from tests.broker.conftest import free_port
from tests.broker.security.conftest import RawClient, Secured
from tests.broker.security.test_sasl import confluent, sasl_settings

FAILED = 58  # SASL_AUTHENTICATION_FAILED


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closed the connection (reads until EOF or a reset)."""
    sock.settimeout(30)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def test_a_frame_over_the_pre_authentication_limit_closes_the_connection(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings("SASL_PLAINTEXT", **{"sasl.server.max.receive.size": "65536"}),
    )
    stranger = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    # A 100 MB frame announced, its first bytes sent: refused before it is held.
    stranger.sendall(struct.pack(">i", 100_000_000) + b"\0" * 4096)
    assert _closed(stranger)
    stranger.close()
    log = broker.process.log.read_text()
    assert "over the limit of 65536 (sasl.server.max.receive.size)" in log
    # A client that logged in may send frames as large as socket.request.max.bytes.
    config = confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret")
    producer = Producer({**config, "message.max.bytes": 600_000})
    producer.produce("big", b"x" * 500_000)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["big"])
    try:
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        assert len(message.value() or b"") == 500_000
    finally:
        consumer.close()


def test_a_huge_scram_message_is_refused_unread(secured_broker: Callable[..., Secured]) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.port)
    handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    assert handshake is not None and handshake["error_code"] == 0
    token = b"n,,n=bob,r=abc" + b",x=" * 100_000  # 300 KB of attributes
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    assert answer is not None and answer["error_code"] == FAILED
    assert client.receive_frame() is None
    client.close()
    assert "SCRAM message of 300014 bytes is over the limit" in broker.process.log.read_text()


def test_the_failure_answer_itself_waits_for_the_delay(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings("SASL_PLAINTEXT", **{"connection.failed.authentication.delay.ms": "400"}),
    )
    client = RawClient(broker.port)
    client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    began = time.monotonic()
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0guess"})
    assert time.monotonic() - began >= 0.35  # the verdict came only after the delay
    assert answer is not None and answer["error_code"] == FAILED
    assert client.receive_frame() is None
    client.close()


def test_password_guessing_is_logged_at_a_bounded_rate(
    secured_broker: Callable[..., Secured],
) -> None:
    metrics_port = free_port()
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings(
            "SASL_PLAINTEXT",
            **{"connection.failed.authentication.delay.ms": "0", "metrics.port": str(metrics_port)},
        ),
    )
    guesses = 40
    began = time.monotonic()
    for attempt in range(guesses):
        client = RawClient(broker.port)
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        token = f"\0bob\0guess{attempt}".encode()
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert answer is not None and answer["error_code"] == FAILED
        client.close()
    elapsed = time.monotonic() - began
    lines = [
        line
        for line in broker.process.log.read_text().splitlines()
        if "failed authentication" in line
    ]
    # One line per listener per 10 s, however fast the failures came.
    assert 1 <= len(lines) <= 2 + elapsed // 10, lines
    assert "as User:bob" in lines[0]
    assert all("guess" not in line for line in lines)  # passwords are never logged
    # Every failure is counted, by listener and claimed principal.
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as page:
        text = page.read().decode()
    assert (
        "kafka_server_socket_server_metrics_failed_authentication_total"
        f'{{listener="SASL_PLAINTEXT",principal="User:bob"}} {float(guesses)}'
    ) in text


def test_a_connection_that_does_not_log_in_in_time_is_closed(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings("SASL_PLAINTEXT", **{"sasl.server.authentication.timeout.ms": "500"}),
    )
    client = RawClient(broker.port)
    # ApiVersions is answered before login; then the stranger dawdles, a byte at a time.
    assert (
        client.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}
        )
        is not None
    )
    client.sock.sendall(b"\0")
    assert _closed(client.sock)
    client.close()
    assert "not authenticated within sasl.server.authentication.timeout.ms" in (
        broker.process.log.read_text()
    )
    # A client that logs in in time stays connected past the timeout.
    producer = Producer(confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret"))
    producer.produce("t", b"v")
    assert producer.flush(30) == 0
    time.sleep(1.0)
    producer.produce("t", b"w")
    assert producer.flush(30) == 0
