"""confluent-kafka's registry client and serializers against seglog's registry, end to end."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.broker.schema_registry.conftest import RegistryBroker

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}


def avro(schema: dict[str, Any]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def round_trip(broker: RegistryBroker, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to ``topic`` and consume them back, as bytes."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(600):
            if len(out) == len(values):
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                out.append(message.value())
    finally:
        consumer.close()
    return out


def test_avro_serializer_round_trip(any_registry: RegistryBroker) -> None:
    broker = any_registry
    serializer = AvroSerializer(broker.client(), json.dumps(USER_V1))
    ctx = SerializationContext("users", MessageField.VALUE)
    users = [{"name": f"u{i}", "age": i} for i in range(20)]
    encoded = [serializer(user, ctx) for user in users]
    assert all(e is not None and e[0] == 0 for e in encoded)
    consumed = round_trip(broker, "users", [e for e in encoded if e is not None])
    deserializer = AvroDeserializer(broker.client())
    assert [deserializer(value, ctx) for value in consumed] == users
    client = broker.client()
    latest = client.get_latest_version("users-value")
    assert latest.version == 1 and latest.subject == "users-value"
    assert json.loads(latest.schema.schema_str)["name"] == "User"
    assert client.get_subjects() == ["users-value"]


def test_registering_again_gives_the_same_id_and_other_subjects_share_it(
    any_registry: RegistryBroker,
) -> None:
    broker = any_registry
    client = broker.client()
    first = client.register_schema("a-value", avro(USER_V1))
    # Whitespace and key order do not make another schema.
    assert (
        broker.client().register_schema("a-value", Schema(json.dumps(USER_V1, indent=2), "AVRO"))
        == first
    )
    assert broker.client().register_schema("b-value", avro(USER_V1)) == first
    assert client.get_versions("a-value") == [1]
    found = broker.client().lookup_schema("b-value", avro(USER_V1))
    assert (found.schema_id, found.version) == (first, 1)
    assert sorted(broker.api.get(f"/schemas/ids/{first}/subjects").body) == ["a-value", "b-value"]


def test_incompatible_changes_are_refused_with_409(
    any_registry: RegistryBroker,
) -> None:
    broker = any_registry
    client = broker.client()
    client.register_schema("u-value", avro(USER_V1))
    no_default = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("u-value", avro(no_default))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409
    assert "incompatible" in refused.value.error_message
    assert not client.test_compatibility("u-value", avro(no_default))
    # With a default the new field is BACKWARD compatible.
    with_default = {
        **USER_V1,
        "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}],
    }
    assert client.test_compatibility("u-value", avro(with_default))
    assert client.register_schema("u-value", avro(with_default)) > 0
    assert client.get_versions("u-value") == [1, 2]
    # FORWARD: removing a field without default breaks old readers.
    client.set_compatibility("u-value", "FORWARD")
    assert client.get_compatibility("u-value") == "FORWARD"
    removed = {**USER_V1, "fields": [USER_V1["fields"][0]]}
    with pytest.raises(SchemaRegistryError) as forward:
        client.register_schema("u-value", avro(removed))
    assert forward.value.http_status_code == 409
    client.set_compatibility("u-value", "NONE")
    assert client.register_schema("u-value", avro(removed)) > 0


def test_invalid_schemas_and_unknown_things(any_registry: RegistryBroker) -> None:
    broker = any_registry
    client = broker.client()
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema("x-value", Schema('{"type": "nope"}', "AVRO"))
    assert (invalid.value.http_status_code, invalid.value.error_code) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as subject:
        client.get_latest_version("missing")
    assert subject.value.error_code == 40401
    with pytest.raises(SchemaRegistryError) as schema:
        client.get_schema(999)
    assert schema.value.error_code == 40403
    client.register_schema("x-value", avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as version:
        client.get_version("x-value", 7)
    assert version.value.error_code == 40402
    with pytest.raises(SchemaRegistryError) as level:
        client.set_compatibility("x-value", "SIDEWAYS")
    assert level.value.error_code == 42203
    assert broker.api.get("/schemas/types").body == ["JSON", "PROTOBUF", "AVRO"]
    assert broker.api.get("/contexts").body == ["."]


def test_soft_and_permanent_deletes(any_registry: RegistryBroker) -> None:
    broker = any_registry
    client = broker.client()
    schema_id = client.register_schema("d-value", avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as not_soft:
        client.delete_version("d-value", 1, permanent=True)
    assert not_soft.value.error_code == 40407
    assert client.delete_version("d-value", 1) == 1
    assert client.get_subjects() == []
    assert broker.api.get("/subjects", deleted="true").body == ["d-value"]
    # A soft-deleted schema is still found by id (consumers keep reading old records).
    assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "User"
    assert client.delete_version("d-value", 1, permanent=True) == 1
    assert broker.api.get("/subjects", deleted="true").body == []
    assert broker.api.get(f"/schemas/ids/{schema_id}").status == 404
    # A whole subject: soft first, then permanently.
    client.register_schema("e-value", avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as subject_not_soft:
        client.delete_subject("e-value", permanent=True)
    assert subject_not_soft.value.error_code == 40405
    assert client.delete_subject("e-value") == [1]
    with pytest.raises(SchemaRegistryError) as soft_again:
        client.delete_subject("e-value")
    assert soft_again.value.error_code == 40404
    assert client.delete_subject("e-value", permanent=True) == [1]
    # Registering after a permanent deletion starts the subject again.
    assert broker.client().register_schema("e-value", avro(USER_V1)) > 0


def test_avro_references(any_registry: RegistryBroker) -> None:
    broker = any_registry
    client = broker.client()
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "com.example",
        "fields": [{"name": "city", "type": "string"}],
    }
    client.register_schema("com.example.Address", avro(address))
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "com.example",
        "fields": [{"name": "home", "type": "com.example.Address"}],
    }
    ref = SchemaReference("com.example.Address", "com.example.Address", 1)
    person_id = client.register_schema("people-value", Schema(json.dumps(person), "AVRO", [ref]))
    assert broker.api.get("/subjects/com.example.Address/versions/1/referencedby").body == [
        person_id
    ]
    registered = client.get_latest_version("people-value")
    assert [r.name for r in registered.schema.references] == ["com.example.Address"]
    # The referenced version cannot go while a schema uses it.
    with pytest.raises(SchemaRegistryError) as in_use:
        client.delete_version("com.example.Address", 1)
    assert in_use.value.error_code == 42206
    ctx = SerializationContext("people", MessageField.VALUE)
    serializer = AvroSerializer(
        broker.client(), None, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    encoded = serializer({"home": {"city": "Lyon"}}, ctx)
    assert encoded is not None
    assert AvroDeserializer(broker.client())(encoded, ctx) == {"home": {"city": "Lyon"}}
    with pytest.raises(SchemaRegistryError) as missing:
        bad = SchemaReference("com.example.Nope", "nope", 1)
        client.register_schema("other-value", Schema(json.dumps(person), "AVRO", [bad]))
    assert missing.value.error_code == 42201


def test_json_schema_serializer_round_trip(any_registry: RegistryBroker) -> None:
    broker = any_registry
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    }
    ctx = SerializationContext("orders", MessageField.VALUE)
    serializer = JSONSerializer(json.dumps(schema), broker.client())
    orders = [{"id": i, "item": f"thing {i}"} for i in range(5)]
    consumed = round_trip(broker, "orders", [serializer(o, ctx) for o in orders])  # type: ignore[misc]
    deserializer = JSONDeserializer(None, schema_registry_client=broker.client())
    assert [deserializer(value, ctx) for value in consumed] == orders
    assert broker.client().get_latest_version("orders-value").schema.schema_type == "JSON"


def _point_class() -> Any:
    """A Protobuf message class made at run time (no generated code needed)."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="geo/point.proto", package="geo", syntax="proto3"
    )
    message = proto.message_type.add(name="Point")
    message.field.add(
        name="x",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    message.field.add(
        name="label",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("geo.Point"))


def test_protobuf_serializer_round_trip(any_registry: RegistryBroker) -> None:
    broker = any_registry
    point = _point_class()
    ctx = SerializationContext("points", MessageField.VALUE)
    serializer = ProtobufSerializer(point, broker.client(), {"use.deprecated.format": False})
    points = [point(x=i, label=f"p{i}") for i in range(5)]
    consumed = round_trip(broker, "points", [serializer(p, ctx) for p in points])  # type: ignore[misc]
    deserializer = ProtobufDeserializer(
        point, {"use.deprecated.format": False}, schema_registry_client=broker.client()
    )
    assert [deserializer(value, ctx) for value in consumed] == points
    latest = broker.client().get_latest_version("points-value")
    assert latest.schema.schema_type == "PROTOBUF"
    # The serialized form answers as a descriptor whatever form was registered.
    serialized = broker.api.get(f"/schemas/ids/{latest.schema_id}", format="serialized").body
    assert (
        descriptor_pb2.FileDescriptorProto.FromString(
            __import__("base64").b64decode(serialized["schema"])
        )
        .message_type[0]
        .name
        == "Point"
    )


def test_the_registry_survives_kill_9(any_registry: RegistryBroker) -> None:
    broker = any_registry
    client = broker.client()
    ids = [
        client.register_schema(f"s{i}-value", avro({**USER_V1, "name": f"User{i}"}))
        for i in range(5)
    ]
    client.set_compatibility("s0-value", "FULL")
    client.delete_version("s1-value", 1)
    broker.kill_and_restart()
    after = broker.client()
    assert after.get_subjects() == [f"s{i}-value" for i in (0, 2, 3, 4)]
    assert [after.get_schema(i).schema_type for i in ids] == ["AVRO"] * 5
    assert after.get_compatibility("s0-value") == "FULL"
    # New ids go on above the old ones.
    assert after.register_schema("new-value", avro({**USER_V1, "name": "New"})) > max(ids)


def test_metadata_is_kept_and_the_latest_with_metadata_found(any_registry: RegistryBroker) -> None:
    from confluent_kafka.schema_registry import Metadata, MetadataProperties, MetadataTags

    client = any_registry.client()

    def with_owner(owner: str, name: str) -> Schema:
        metadata = Metadata(MetadataTags({}), MetadataProperties({"owner": owner}), set())
        return Schema(json.dumps({**USER_V1, "name": name}), "AVRO", metadata=metadata)

    client.set_compatibility("m-value", "NONE")
    first = client.register_schema("m-value", with_owner("team-a", "A"))
    client.register_schema("m-value", with_owner("team-b", "B"))
    client.register_schema("m-value", avro({**USER_V1, "name": "C"}))
    found = any_registry.client().get_latest_with_metadata("m-value", {"owner": "team-a"})
    assert (found.schema_id, found.version) == (first, 1)
    assert found.schema.metadata is not None
    assert found.schema.metadata.properties.properties == {"owner": "team-a"}
    latest = any_registry.client().get_latest_with_metadata("m-value", {})
    assert latest.version == 3
    with pytest.raises(SchemaRegistryError) as none:
        any_registry.client().get_latest_with_metadata("m-value", {"owner": "nobody"})
    assert none.value.error_code == 40403
