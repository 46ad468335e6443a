"""ACLs enforced on a live broker, managed with CreateAcls/DescribeAcls/DeleteAcls."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import TopicAuthorizationFailedError

from seglog.protocol.api_keys import ApiKey
from tests.broker.security.conftest import Certs, RawClient, Secured
from tests.broker.security.test_sasl import JAAS, confluent, sasl_settings

ALICE_JAAS = JAAS.replace('user_bob="bob-secret"', 'user_bob="bob-secret" user_alice="alice"')
ANY = "*"


@pytest.fixture
def acl_broker(secured_broker: Callable[..., Secured]) -> Secured:
    return secured_broker(
        "SASL_PLAINTEXT",
        **sasl_settings(
            "SASL_PLAINTEXT",
            **{
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": ALICE_JAAS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "auto.create.topics.enable": "false",
                "group.initial.rebalance.delay.ms": "0",
            },
        ),
    )


def _admin(broker: Secured, user: str = "admin") -> AdminClient:
    password = {"admin": "admin-secret", "alice": "alice", "bob": "bob-secret"}[user]
    return AdminClient(confluent(broker.bootstrap, "PLAIN", user, password))


def _allow(
    admin: AdminClient,
    restype: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    principal: str = "User:alice",
) -> None:
    binding = AclBinding(restype, name, pattern, principal, ANY, operation, permission)
    for future in admin.create_acls([binding]).values():
        future.result(10)


def _create_topics(admin: AdminClient, *names: str) -> None:
    for future in admin.create_topics([NewTopic(n, 1) for n in names]).values():
        future.result(10)


def _produce_error(broker: Secured, topic: str, user: str = "alice") -> KafkaError | None:
    password = {"alice": "alice", "bob": "bob-secret"}[user]
    producer = Producer(
        {
            **confluent(broker.bootstrap, "PLAIN", user, password),
            "message.timeout.ms": 5000,
            "log_level": "0",
        }
    )
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert len(errors) == 1
    return errors[0]


def test_produce_needs_write_and_deny_wins(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, topic, f"{topic}-denied")
    error = _produce_error(acl_broker, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
    assert _produce_error(acl_broker, topic) is None
    _allow(
        admin, ResourceType.TOPIC, f"{topic}-denied", AclOperation.WRITE,
        permission=AclPermissionType.DENY,
    )  # fmt: skip
    error = _produce_error(acl_broker, f"{topic}-denied")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Another user has no ACL at all.
    error = _produce_error(acl_broker, topic, user="bob")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_consume_needs_read_on_topic_and_group(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, topic)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALL)
    assert _produce_error(acl_broker, topic) is None
    config = {
        **confluent(acl_broker.bootstrap, "PLAIN", "alice", "alice"),
        "group.id": f"{topic}-group",
        "auto.offset.reset": "earliest",
        "log_level": "0",
    }
    consumer = Consumer(config)
    consumer.subscribe([topic])
    message = consumer.poll(10)
    consumer.close()
    assert message is not None and message.error() is not None
    assert message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.GROUP, f"{topic}-group", AclOperation.READ)
    consumer = Consumer(config)
    consumer.subscribe([topic])
    message = consumer.poll(15)
    assert message is not None and message.error() is None and message.value() == b"x"
    consumer.commit(message, asynchronous=False)
    consumer.close()


def test_metadata_hides_topics(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, f"{topic}-seen", f"{topic}-hidden")
    _allow(admin, ResourceType.TOPIC, f"{topic}-seen", AclOperation.DESCRIBE)
    seen = set(_admin(acl_broker, "alice").list_topics(timeout=10).topics)
    assert f"{topic}-seen" in seen and f"{topic}-hidden" not in seen
    hidden = _admin(acl_broker, "alice").list_topics(f"{topic}-hidden", timeout=10)
    assert hidden.topics[f"{topic}-hidden"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert f"{topic}-hidden" in _admin(acl_broker).list_topics(timeout=10).topics


def test_admin_apis_without_their_acls(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    alice = _admin(acl_broker, "alice")
    _create_topics(admin, topic)

    def failure(futures: dict[object, object]) -> KafkaError:
        (future,) = futures.values()
        with pytest.raises(KafkaException) as raised:
            future.result(10)  # type: ignore[attr-defined]
        return raised.value.args[0]  # type: ignore[no-any-return]

    topic_failed = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert failure(alice.create_topics([NewTopic(f"{topic}-new", 1)])).code() == topic_failed
    assert failure(alice.delete_topics([topic])).code() == topic_failed
    assert failure(alice.create_partitions([NewPartitions(topic, 2)])).code() == topic_failed
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert failure(alice.describe_configs([resource])).code() == topic_failed
    # librdkafka looks the leader up first: with DESCRIBE, DeleteRecords reaches the broker.
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    records = alice.delete_records([TopicPartition(topic, 0, 0)])
    assert failure(records).code() == topic_failed
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", ANY,
        AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    cluster_failed = KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert failure(alice.create_acls([binding])).code() == cluster_failed
    # With the ACLs, the same requests pass.
    _allow(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALTER)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.DELETE)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE_CONFIGS)
    for future in alice.create_topics([NewTopic(f"{topic}-new", 1)]).values():
        future.result(10)
    for future in alice.create_partitions([NewPartitions(topic, 2)]).values():
        future.result(10)
    for future in alice.describe_configs([resource]).values():
        future.result(10)
    for future in alice.delete_topics([topic]).values():
        future.result(10)


def test_acls_are_described_deleted_and_persisted(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.READ)
    _allow(admin, ResourceType.GROUP, "g-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    acl_broker.process.stop()
    acl_broker.process.start()
    admin = _admin(acl_broker)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    described = admin.describe_acls(everything).result(10)
    assert {(b.restype, b.name, b.resource_pattern_type) for b in described} == {
        (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL),
        (ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED),
    }
    groups = AclBindingFilter(
        ResourceType.GROUP, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    (deleted,) = admin.delete_acls([groups]).values()
    assert [b.name for b in deleted.result(10)] == ["g-"]
    assert [b.name for b in admin.describe_acls(everything).result(10)] == [topic]


def test_acl_apis_without_an_authorizer(secured_broker: Callable[..., Secured]) -> None:
    broker = secured_broker("SASL_PLAINTEXT", **sasl_settings("SASL_PLAINTEXT"))
    # librdkafka drops DescribeAcls' top-level error: asked directly.
    client = RawClient(broker.port)
    client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0admin\0admin-secret"})
    described = client.request(
        ApiKey.DESCRIBE_ACLS, 3,
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
    )  # fmt: skip
    client.close()
    assert described is not None
    assert described["error_code"] == 54  # SECURITY_DISABLED
    assert described["error_message"] == "No Authorizer is configured on the broker"
    admin = AdminClient(confluent(broker.bootstrap, "PLAIN", "admin", "admin-secret"))
    binding = AclBinding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", ANY,
        AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    with pytest.raises(KafkaException) as raised:
        for future in admin.create_acls([binding]).values():
            future.result(10)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_mutual_tls_principal_is_authorized(
    secured_broker: Callable[..., Secured], certs: Certs, topic: str
) -> None:
    broker = secured_broker(
        "SSL",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "ssl.client.auth": "required",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener administers
        },
    )
    admin = AdminClient({"bootstrap.servers": broker.process.bootstrap})
    _create_topics(admin, topic)
    client = {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
        "message.timeout.ms": 5000,
        "log_level": "0",
    }

    def produce() -> KafkaError | None:
        producer = Producer(client)
        errors: list[KafkaError | None] = []
        producer.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        return errors[0]

    error = produce()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _allow(
        admin,
        ResourceType.TOPIC,
        topic,
        AclOperation.WRITE,
        principal="User:CN=alice,O=Example,C=US",
    )
    assert produce() is None


def test_fetch_groups_and_idempotence_without_their_acls(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, topic)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    alice = {**confluent(acl_broker.bootstrap, "PLAIN", "alice", "alice"), "log_level": "0"}
    # Fetch without READ on the topic (kafka-python: assign, no group at all).
    reader = KafkaConsumer(
        bootstrap_servers=acl_broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice",
    )
    reader.assign([KafkaTopicPartition(topic, 0)])
    reader.seek(KafkaTopicPartition(topic, 0), 0)
    with pytest.raises(TopicAuthorizationFailedError):
        for _ in range(20):
            reader.poll(500)
    reader.close()
    # An idempotent producer without WRITE anywhere: InitProducerId is refused.
    producer = Producer({**alice, "enable.idempotence": True, "message.timeout.ms": 3000})
    with pytest.raises(KafkaException, match="Cluster authorization failed"):
        producer.produce(topic, b"x")
        producer.flush(5)
    # Groups: listed only with DESCRIBE; deleting one needs DELETE.
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.READ)
    _allow(admin, ResourceType.GROUP, f"{topic}-g", AclOperation.READ)
    consumer = Consumer({**alice, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    consumer.poll(5)
    consumer.close()
    admin_config = confluent(acl_broker.bootstrap, "PLAIN", "admin", "admin-secret")
    other = Consumer({**admin_config, "group.id": f"{topic}-other"})
    other.subscribe([topic])
    other.poll(5)
    other.close()
    admin_groups = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert admin_groups == {f"{topic}-g", f"{topic}-other"}
    alice_admin = _admin(acl_broker, "alice")
    # READ on her group implies DESCRIBE: alice sees it, and only it.
    listed = alice_admin.list_consumer_groups().result(10).valid
    assert {g.group_id for g in listed} == {f"{topic}-g"}
    (deleted,) = alice_admin.delete_consumer_groups([f"{topic}-g"]).values()
    with pytest.raises(KafkaException) as raised:
        deleted.result(10)
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_transactions_need_write_on_the_transactional_id(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, topic)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALL)
    txn_id = f"{topic}-txn"

    def producer() -> Producer:
        return Producer(
            {
                **confluent(acl_broker.bootstrap, "PLAIN", "alice", "alice"),
                "transactional.id": txn_id,
                "log_level": "0",
            }
        )

    with pytest.raises(KafkaException) as refused:
        producer().init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _allow(admin, ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE)
    allowed = producer()
    allowed.init_transactions(10)
    allowed.begin_transaction()
    allowed.produce(topic, b"v")
    allowed.commit_transaction(10)


def test_write_txn_markers_needs_cluster_action(acl_broker: Secured, topic: str) -> None:
    marker = {
        "producer_id": 1000,
        "producer_epoch": 0,
        "transaction_result": False,
        "topics": [{"name": topic, "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }

    def write(user: str, password: str) -> int:
        client = RawClient(acl_broker.port)
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        client.request(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{password}".encode()}
        )
        answer = client.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [marker]})
        client.close()
        assert answer is not None
        return int(answer["markers"][0]["topics"][0]["partitions"][0]["error_code"])

    admin = _admin(acl_broker)
    _create_topics(admin, topic)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALL)
    assert write("alice", "alice") == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert write("admin", "admin-secret") == 0
    _allow(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    assert write("alice", "alice") == 0


def test_authorized_operations_are_what_the_acls_allow(acl_broker: Secured, topic: str) -> None:
    admin = _admin(acl_broker)
    _create_topics(admin, topic)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.READ)
    _allow(admin, ResourceType.TOPIC, topic, AclOperation.ALTER_CONFIGS)
    _allow(admin, ResourceType.GROUP, topic, AclOperation.READ)
    alice = _admin(acl_broker, "alice")
    described = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(10)
    # As Kafka's authorizer: READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }
    config = {
        **confluent(acl_broker.bootstrap, "PLAIN", "alice", "alice"),
        "group.id": topic,
        "log_level": "0",
    }
    consumer = Consumer(config)
    consumer.subscribe([topic])
    try:
        consumer.poll(2)
        group = alice.describe_consumer_groups([topic], include_authorized_operations=True)
        assert set(group[topic].result(10).authorized_operations) == {
            AclOperation.READ,
            AclOperation.DESCRIBE,
        }
    finally:
        consumer.close()
    # Alice may not describe the cluster: no operations; the super user has them all.
    cluster = alice.describe_cluster(include_authorized_operations=True).result(10)
    assert not cluster.authorized_operations
    everything = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert AclOperation.CLUSTER_ACTION in set(everything.authorized_operations)
