"""The registry of a broker with SASL users and ACLs: HTTP Basic, and a subject's topic ACLs."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.broker.conftest import free_port
from tests.broker.http_api.conftest import Api, wait_listening
from tests.broker.http_api.test_security import ADMIN, USERS
from tests.broker.security.conftest import Secured, secured_broker

__all__ = ["secured_broker"]
from tests.broker.security.test_sasl import confluent, sasl_settings

SCHEMA = Schema(json.dumps({"type": "record", "name": "O", "fields": []}), "AVRO")


@pytest.fixture
def secured_registry(secured_broker: Callable[..., Secured]) -> tuple[Secured, int]:
    port = free_port()
    broker = secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings(
            "SASL_PLAINTEXT",
            None,
            **{
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": USERS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "schema.registry.port": str(port),
                "connection.failed.authentication.delay.ms": "50",
            },
        ),
    )
    wait_listening(port, broker.process.alive, broker.process.log)
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", *ADMIN))
    binding = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(30)
    return broker, port


def _client(port: int, user: str, password: str) -> SchemaRegistryClient:
    return SchemaRegistryClient(
        {"url": f"http://127.0.0.1:{port}", "basic.auth.user.info": f"{user}:{password}"}
    )


def test_credentials_are_required(secured_registry: tuple[Secured, int]) -> None:
    _, port = secured_registry
    answer = Api(port).get("/subjects")
    assert (answer.status, answer.body["error_code"]) == (401, 40101)
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    wrong = Api(port).get("/subjects", auth=("alice", "nope"))
    assert wrong.status == 401


def test_a_subject_follows_its_topics_acls(secured_registry: tuple[Secured, int]) -> None:
    _, port = secured_registry
    alice = _client(port, "alice", "alice-secret")
    bob = _client(port, "bob", "bob-secret")
    admin = _client(port, *ADMIN)
    try:
        schema_id = alice.register_schema("orders-value", SCHEMA)
        assert alice.get_subjects() == ["orders-value"]
        with pytest.raises(SchemaRegistryError) as denied:
            bob.register_schema("orders-value", SCHEMA)
        assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301)
        # Bob sees neither the subject nor the schema by id.
        assert bob.get_subjects() == []
        with pytest.raises(SchemaRegistryError) as hidden:
            bob.get_schema(schema_id)
        assert hidden.value.error_code == 40403
        # Alice may not register for another topic, nor change the global level.
        with pytest.raises(SchemaRegistryError) as other:
            alice.register_schema("payments-value", SCHEMA)
        assert other.value.error_code == 40301
        with pytest.raises(SchemaRegistryError) as global_level:
            alice.set_compatibility(level="NONE")
        assert global_level.value.error_code == 40301
        # The super user may do everything.
        assert admin.register_schema("payments-value", SCHEMA) == schema_id
        admin.set_compatibility(level="FULL")
        assert admin.get_compatibility() == "FULL"
        assert admin.get_subjects() == ["orders-value", "payments-value"]
    finally:
        for client in (alice, bob, admin):
            client.close()
