"""TLS listeners with real clients: confluent-kafka, kafka-python, aiokafka."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from seglog.broker.security.tls import PrincipalMapper, subject_dn
from tests.broker.conftest import BrokerProcess
from tests.broker.security.conftest import Certs, Secured

VALUE = b"v" * 1024


def _tls(certs: Certs, **extra: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        **extra,
    }


def _confluent(bootstrap: str, certs: Certs, **extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        **extra,
    }


def _roundtrip_confluent(config: dict[str, str], topic: str, count: int = 300) -> None:
    producer = Producer(config)
    for i in range(count):
        producer.produce(topic, VALUE, key=str(i).encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = 0
    try:
        while seen < count:
            message = consumer.poll(10)
            assert message is not None, f"only {seen} of {count} records came back"
            assert message.error() is None, message.error()
            assert message.value() == VALUE
            seen += 1
    finally:
        consumer.close()


def test_confluent_kafka_over_tls(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker("SSL", **_tls(certs))
    # Records larger than a fetch chunk go through the copying path under TLS.
    _roundtrip_confluent(_confluent(broker.bootstrap, certs), topic)
    metadata = AdminClient(_confluent(broker.bootstrap, certs)).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", broker.port)]


def test_key_store_given_as_pem_text(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    overrides = _tls(certs)
    del overrides["ssl.keystore.location"]
    overrides["ssl.keystore.certificate.chain"] = certs.server_cert.read_text().replace("\n", " ")
    overrides["ssl.keystore.key"] = certs.server_key.read_text().replace("\n", " ")
    # On one line, as a command-line override: PEM's line breaks become spaces.
    broker = secured_broker("SSL", **overrides)
    _roundtrip_confluent(_confluent(broker.bootstrap, certs), topic, count=10)


def test_kafka_python_over_tls(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker("SSL", **_tls(certs))
    options = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca)}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **options)
    for _ in range(50):
        producer.send(topic, VALUE)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **options,
    )
    values = [record.value for _, record in zip(range(50), consumer, strict=False)]
    consumer.close()
    assert values == [VALUE] * 50


def test_aiokafka_over_tls(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker("SSL", **_tls(certs))

    async def run() -> list[bytes | None]:
        context = create_ssl_context(cafile=str(certs.ca))
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, security_protocol="SSL", ssl_context=context
        )
        await producer.start()
        try:
            for _ in range(50):
                await producer.send_and_wait(topic, VALUE)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            security_protocol="SSL",
            ssl_context=context,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got: list[bytes | None] = []
            while len(got) < 50:
                batch = await consumer.getmany(timeout_ms=10_000)
                assert batch, "no records came back"
                got += [r.value for records in batch.values() for r in records]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [VALUE] * 50


def test_mutual_tls_required(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker("SSL", **_tls(certs, **{"ssl.client.auth": "required"}))
    without = AdminClient(_confluent(broker.bootstrap, certs, **{"log_level": "0"}))
    with pytest.raises(KafkaException):
        without.list_topics(timeout=3)
    config = _confluent(
        broker.bootstrap,
        certs,
        **{
            "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key),
        },
    )
    _roundtrip_confluent(config, topic, count=10)


def test_client_certificate_principal(certs: Certs) -> None:
    decoded = ssl._ssl._test_decode_cert(str(certs.client_cert))  # type: ignore[attr-defined]
    dn = subject_dn(decoded)
    assert dn == "CN=alice,O=Example,C=US"
    assert PrincipalMapper("DEFAULT").principal(dn) == "User:CN=alice,O=Example,C=US"
    rules = PrincipalMapper("RULE:^CN=(.*?),O=(.*?),C=.*$/$1@$2/L,DEFAULT")
    assert rules.principal(dn) == "User:alice@example"
    assert rules.principal("OU=x") == "User:OU=x"


def _api_versions_request() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def test_plaintext_client_on_tls_port_gets_no_answer(
    secured_broker: Callable[..., Secured], certs: Certs
) -> None:
    broker = secured_broker("SSL", **_tls(certs))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
        sock.sendall(_api_versions_request())
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    # A TLS alert at most (record type 21), never a Kafka response.
    assert reply[:1] in (b"", b"\x15")
    assert broker.process.alive()


def test_tls_client_on_plaintext_port_is_closed(
    secured_broker: Callable[..., Secured], certs: Certs
) -> None:
    broker = secured_broker("SSL", **_tls(certs))
    context = ssl.create_default_context(cafile=str(certs.ca))
    with (
        socket.create_connection(("127.0.0.1", broker.process.port), timeout=5) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
    ):
        context.wrap_socket(raw, server_hostname="127.0.0.1")
    assert broker.process.alive()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type=JKS is not supported"),
        ({"ssl.truststore.type": "PKCS12"}, "ssl.truststore.type=PKCS12 is not supported"),
        ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot load the key store"),
        ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "NO_SUCH_SUITE"}, "no cipher suite can be selected"),
    ],
)
def test_bad_tls_settings_are_refused(
    tmp_path: Path, certs: Certs, overrides: dict[str, str], message: str
) -> None:
    broker = BrokerProcess(tmp_path / "data")
    broker.overrides = {
        **_tls(certs),
        "listeners": f"SSL://127.0.0.1:{broker.port}",
        **overrides,
    }
    with pytest.raises(RuntimeError, match=message):
        broker.start()
