"""The HTTP API of a broker with SASL users and ACLs, and over TLS."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.broker.conftest import free_port
from tests.broker.http_api.conftest import Api, wait_listening
from tests.broker.security.conftest import Certs, Secured
from tests.broker.security.test_sasl import JAAS, add_scram_user, confluent, sasl_settings

USERS = JAAS.replace('user_bob="bob-secret"', 'user_bob="bob-secret" user_alice="alice-secret"')
ADMIN = ("admin", "admin-secret")


def _start(
    secured_broker: Callable[..., Secured],
    protocol: str,
    certs: Certs | None = None,
    *,
    write: bool = False,
) -> tuple[Secured, Api]:
    port = free_port()
    broker = secured_broker(
        protocol,
        add_scram_user("carol", "carol-secret"),
        **sasl_settings(
            protocol,
            certs,
            **{
                f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": USERS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "console.port": str(port),
                # A failed attempt waits this long before its 401, as a failed SASL login does.
                "connection.failed.authentication.delay.ms": "50",
                "console.write.enable": "true" if write else "false",
            },
        ),
    )
    wait_listening(port, broker.process.alive, broker.process.log)
    api = Api(port)
    if certs is not None:
        api = Api(port, "https", ssl.create_default_context(cafile=str(certs.ca)))
    return broker, api


def _prepare(broker: Secured, topic: str, certs: Certs | None = None) -> None:
    """The topic with one record of key k, readable by alice and carol (not bob)."""
    config = confluent(broker.bootstrap, "PLAIN", *ADMIN, certs)
    admin = AdminClient(config)
    for future in admin.create_topics(
        [NewTopic(topic, 1, config={"key.index.enable": "true"})]
    ).values():
        future.result(30)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for principal in ("User:alice", "User:carol")
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    producer = Producer(config)
    producer.produce(topic, key=b"k", value=b"secret value")
    assert producer.flush(30) == 0


@pytest.fixture
def sasl_api(secured_broker: Callable[..., Secured], topic: str) -> Api:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    _prepare(broker, topic)
    return api


def test_no_credentials_401(sasl_api: Api, topic: str) -> None:
    answer = sasl_api.records(topic, key="k")
    assert (answer.status, answer.body["error_code"]) == (401, 58)
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    assert sasl_api.get("/v1/topics").status == 401
    # The document of the routes is public.
    assert sasl_api.get("/openapi.json").status == 200


@pytest.mark.parametrize(
    "auth", [("alice", "wrong"), ("nobody", "alice-secret"), ("carol", "alice-secret")]
)
def test_wrong_password_401(sasl_api: Api, topic: str, auth: tuple[str, str]) -> None:
    answer = sasl_api.records(topic, key="k", auth=auth)
    assert (answer.status, answer.body["error_code"]) == (401, 58)


def test_a_user_without_read_is_403(sasl_api: Api, topic: str) -> None:
    answer = sasl_api.records(topic, key="k", auth=("bob", "bob-secret"))
    assert (answer.status, answer.body["error_code"]) == (403, 29)
    # Without DESCRIBE, not even whether a topic exists is told.
    missing = sasl_api.records(f"{topic}-missing", key="k", auth=("bob", "bob-secret"))
    assert missing.status == 403
    assert topic not in sasl_api.get("/v1/topics", auth=("bob", "bob-secret")).body["topics"]


@pytest.mark.parametrize(
    "auth", [("alice", "alice-secret"), ("carol", "carol-secret"), ADMIN], ids=str
)
def test_a_user_with_read_is_200(sasl_api: Api, topic: str, auth: tuple[str, str]) -> None:
    """PLAIN users (alice, admin the super user) and a SCRAM user (carol)."""
    answer = sasl_api.records(topic, key="k", auth=auth)
    assert answer.status == 200
    assert [r["value"] for r in answer.body["records"]] == ["secret value"]
    assert topic in sasl_api.get("/v1/topics", auth=auth).body["topics"]
    missing = sasl_api.records(f"{topic}-missing", key="k", auth=ADMIN)
    assert missing.status == 404


def test_https_with_the_listeners_certificate(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker, api = _start(secured_broker, "SASL_SSL", certs)
    _prepare(broker, topic, certs)
    answer = api.records(topic, key="k", auth=("alice", "alice-secret"))
    assert answer.status == 200
    assert [r["value"] for r in answer.body["records"]] == ["secret value"]
    plain = Api(api.port)  # plain HTTP to the TLS port is refused
    with pytest.raises(OSError):
        plain.get("/openapi.json")


def test_mutual_tls_names_the_caller_by_its_certificate(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    """Without SASL users, a client certificate is the caller, as on the SSL listener."""
    port = free_port()
    broker = secured_broker(
        "SSL",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "ssl.client.auth": "requested",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The PLAINTEXT listener (and so a caller without a certificate) may do anything.
            "super.users": "User:ANONYMOUS",
            "console.port": str(port),
        },
    )
    wait_listening(port, broker.process.alive, broker.process.log)
    admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, 1, config={"key.index.enable": "true"})]
    ).values():
        future.result(30)
    anonymous = Api(port, "https", ssl.create_default_context(cafile=str(certs.ca)))
    assert anonymous.records(topic, key="k").status == 200
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    alice = Api(port, "https", context)
    answer = alice.records(topic, key="k")
    assert (answer.status, answer.body["error_code"]) == (403, 29)
    assert "User:CN=alice,O=Example,C=US" in answer.body["message"]
