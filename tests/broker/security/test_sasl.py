"""SASL PLAIN and SCRAM on SASL_PLAINTEXT and SASL_SSL listeners, with real clients."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from seglog.broker.security.scram import ScramServer, make_credential
from seglog.protocol.api_keys import ApiKey
from tests.broker.security.conftest import Certs, RawClient, Secured

VALUE = b"s" * 1024
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";'
)


def add_scram_user(name: str, password: str) -> Callable[[Path], None]:
    """Create a SCRAM user in a log directory before the broker starts, with the CLI."""

    def prepare(data: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "seglog", "users", "add", name, "--log-dir", str(data),
             "--create", "--password", password],
            check=True, capture_output=True,
        )  # fmt: skip

    return prepare


def sasl_settings(protocol: str, certs: Certs | None = None, **extra: str) -> dict[str, str]:
    settings = {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{protocol}:{protocol}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }
    if certs is not None:
        settings.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(certs.server),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs.ca),
            }
        )
    return settings


def confluent(
    bootstrap: str, mechanism: str, user: str, password: str, certs: Certs | None = None
) -> dict[str, str]:
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL" if certs else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if certs is not None:
        config["ssl.ca.location"] = str(certs.ca)
    return config


def roundtrip(config: dict[str, str], topic: str, count: int = 30) -> None:
    producer = Producer(config)
    for _ in range(count):
        producer.produce(topic, VALUE)
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = 0
    try:
        while seen < count:
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            seen += 1
    finally:
        consumer.close()


def test_rfc7677_exchange() -> None:
    """RFC 7677 section 3's example, byte for byte."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda user, mechanism: credential if user == "user" else None,
        nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    first = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.respond(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


def test_confluent_plain_over_sasl_plaintext(
    secured_broker: Callable[..., Secured], topic: str
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    roundtrip(confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret"), topic)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_scram_over_sasl_ssl(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str, mechanism: str
) -> None:
    broker = secured_broker(
        "SASL_SSL", add_scram_user("alice", "alice-secret"), **sasl_settings("SASL_SSL", certs)
    )
    roundtrip(confluent(broker.bootstrap, mechanism, "alice", "alice-secret", certs), topic)


def test_kafka_python_plain_and_scram_over_sasl_ssl(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker(
        "SASL_SSL", add_scram_user("alice", "alice-secret"), **sasl_settings("SASL_SSL", certs)
    )
    common = {"security_protocol": "SASL_SSL", "ssl_cafile": str(certs.ca)}
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        **common,
    )
    for _ in range(20):
        producer.send(topic, VALUE)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **common,
    )
    values = [record.value for _, record in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert values == [VALUE] * 20


def test_aiokafka_scram_over_sasl_ssl(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker(
        "SASL_SSL", add_scram_user("alice", "alice-secret"), **sasl_settings("SASL_SSL", certs)
    )

    async def run() -> int:
        options = {
            "bootstrap_servers": broker.bootstrap,
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(certs.ca)),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        }
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            for _ in range(20):
                await producer.send_and_wait(topic, VALUE)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            count = 0
            while count < 20:
                batch = await consumer.getmany(timeout_ms=10_000)
                assert batch
                count += sum(len(records) for records in batch.values())
            return count
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == 20


def test_kcat_over_sasl_ssl(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker(
        "SASL_SSL", add_scram_user("alice", "alice-secret"), **sasl_settings("SASL_SSL", certs)
    )
    options = [
        "-b", broker.bootstrap, "-X", "security.protocol=SASL_SSL",
        "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice",
        "-X", "sasl.password=alice-secret", "-X", f"ssl.ca.location={certs.ca}",
    ]  # fmt: skip
    subprocess.run(
        ["kcat", *options, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=30
    )
    out = subprocess.run(
        ["kcat", *options, "-C", "-t", topic, "-e", "-o", "beginning"],
        capture_output=True, check=True, timeout=30,
    )  # fmt: skip
    assert out.stdout.split() == [b"one", b"two"]


def test_wrong_password_fails_and_closes_after_the_delay(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings("SASL_PLAINTEXT", **{"connection.failed.authentication.delay.ms": "500"}),
    )
    client = RawClient(broker.port)
    handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert handshake == {
        "error_code": 0,
        "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    }
    began = time.monotonic()
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0wrong"})
    assert answer is not None
    assert answer["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == "Authentication failed: Invalid username or password"
    assert client.receive_frame() is None  # closed ...
    assert time.monotonic() - began >= 0.45  # ... after the delay
    client.close()
    # The same with a real client: an error, not a hang.
    admin = AdminClient({**confluent(broker.bootstrap, "PLAIN", "bob", "wrong"), "log_level": "0"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)


def test_unknown_mechanism_is_refused(secured_broker: Callable[..., Secured]) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT", **{"sasl.enabled.mechanisms": "PLAIN"})
    )
    client = RawClient(broker.port)
    answer = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    assert answer == {"error_code": 33, "mechanisms": ["PLAIN"]}  # UNSUPPORTED_SASL_MECHANISM
    assert client.receive_frame() is None
    client.close()


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (ApiKey.METADATA, 1, {"topics": None}),
        (ApiKey.PRODUCE, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                             "topic_data": []}),
        (ApiKey.CREATE_TOPICS, 4, {"topics": [], "timeout_ms": 1000, "validate_only": False}),
    ],
)  # fmt: skip
def test_nothing_but_sasl_before_authentication(
    secured_broker: Callable[..., Secured], api_key: int, version: int, body: dict[str, object]
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.port)
    versions = client.request(ApiKey.API_VERSIONS, 0, {})
    assert versions is not None and versions["error_code"] == 0
    assert client.request(api_key, version, body) is None  # closed, unanswered
    client.close()


def test_sasl_handshake_v0_then_raw_tokens(secured_broker: Callable[..., Secured]) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.port)
    assert client.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}) is not None
    client.sock.sendall(len(b"\0bob\0bob-secret").to_bytes(4, "big") + b"\0bob\0bob-secret")
    assert client.receive_frame() == b""
    metadata = client.request(ApiKey.METADATA, 1, {"topics": None})
    assert metadata is not None and metadata["brokers"][0]["port"] == broker.port
    client.close()


def test_expired_session_is_closed_unless_reauthenticated(
    secured_broker: Callable[..., Secured], topic: str
) -> None:
    broker = secured_broker(
        "SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT", **{"connections.max.reauth.ms": "1000"})
    )
    client = RawClient(broker.port)
    client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0bob\0bob-secret"})
    assert answer is not None and answer["error_code"] == 0
    assert answer["session_lifetime_ms"] == 1000
    assert client.request(ApiKey.METADATA, 1, {"topics": None}) is not None
    time.sleep(1.1)
    assert client.request(ApiKey.METADATA, 1, {"topics": None}) is None
    client.close()
    # librdkafka re-authenticates (KIP-368) and keeps producing past the lifetime.
    producer = Producer(confluent(broker.bootstrap, "PLAIN", "bob", "bob-secret"))
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        producer.produce(topic, VALUE)
        assert producer.flush(10) == 0
        time.sleep(0.2)


def test_reauthentication_cannot_change_principal(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.port)
    client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    client.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0bob\0bob-secret"})
    client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    answer = client.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0admin\0admin-secret"})
    assert answer is not None and answer["error_code"] == 58
    assert "Cannot change principals" in answer["error_message"]
    client.close()


def test_plain_users_file_is_reread(
    secured_broker: Callable[..., Secured], tmp_path: Path, topic: str
) -> None:
    users = tmp_path / "plain-users.properties"
    users.write_text("carol=first\n")
    broker = secured_broker(
        "SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT", **{"sasl.plain.users.file": str(users)})
    )
    AdminClient(confluent(broker.bootstrap, "PLAIN", "carol", "first")).list_topics(timeout=10)
    users.write_text("carol=second\n")
    with pytest.raises(KafkaException):
        AdminClient(
            {**confluent(broker.bootstrap, "PLAIN", "carol", "first"), "log_level": "0"}
        ).list_topics(timeout=2)
    AdminClient(confluent(broker.bootstrap, "PLAIN", "carol", "second")).list_topics(timeout=10)


def test_passwords_are_not_logged(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    with pytest.raises(KafkaException):
        AdminClient(
            {**confluent(broker.bootstrap, "PLAIN", "bob", "guess-1"), "log_level": "0"}
        ).list_topics(timeout=2)
    broker.process.stop()
    log = broker.process.log.read_text()
    assert "failed authentication" in log
    assert "guess-1" not in log and "bob-secret" not in log


def test_sasl_handshake_on_a_plaintext_listener_is_answered(
    secured_broker: Callable[..., Secured],
) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    client = RawClient(broker.process.port)  # the PLAINTEXT listener
    answer = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert answer == {"error_code": 34, "mechanisms": []}  # ILLEGAL_SASL_STATE, not a hang
    client.close()
