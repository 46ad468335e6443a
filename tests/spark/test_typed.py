"""Typed key/value columns end to end: records produced by confluent-kafka's serializers
against the broker's schema registry, read by Spark as structs (network and files mode, batch
and streaming); typed rows written by the sink and read back by confluent-kafka."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.http_api.conftest import wait_listening
from tests.spark.conftest import create_topic

pytest.importorskip("pyspark")

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.utils import CapturedException

UTC = dt.UTC

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
            },
        },
        {"name": "id", "type": ["long", "string"]},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "balance",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "raw", "type": "bytes"},
    ],
}
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker serving the schema registry: (its process, the registry's URL)."""
    port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("typed") / "data",
        {"schema.registry.port": str(port), "internal.log.segment.bytes": "65536"},
    )
    process.start()
    wait_listening(port, process.alive, process.log)
    yield process, f"http://127.0.0.1:{port}"
    process.close()


_clients: list[SchemaRegistryClient] = []


def _client(url: str) -> SchemaRegistryClient:
    """A registry client, closed at the end of the test that made it."""
    client = SchemaRegistryClient({"url": url})
    _clients.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def _user(i: int, v2: bool = False) -> dict[str, Any]:
    user: dict[str, Any] = {
        "name": f"user {i}",
        "age": None if i % 4 == 0 else 20 + i,
        "tags": [f"t{j}" for j in range(i % 3)],
        "scores": {"math": float(i)} if i % 2 else {},
        "level": "HIGH" if i % 2 else "LOW",
        "address": {"city": f"city {i}", "zip": 1000 + i},
        "id": i if i % 2 else f"id-{i}",
        "seen": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i),
        "born": dt.date(1990, 1, 1) + dt.timedelta(days=i),
        "balance": decimal.Decimal(f"{i}.25"),
        "raw": bytes([i % 256]) * 3,
    }
    if v2:
        user["email"] = f"u{i}@example.com"
    return user


def _expected(user: dict[str, Any], v2: bool) -> dict[str, Any]:
    """What the typed column holds for ``user`` (read into the v2 schema when ``v2``)."""
    out = dict(user)
    out["scores"] = user["scores"]
    out["id"] = (
        {"member0": user["id"], "member1": None}
        if isinstance(user["id"], int)
        else {"member0": None, "member1": user["id"]}
    )
    out["raw"] = bytearray(user["raw"])
    if v2:
        out.setdefault("email", None)
    return out


def _produce(
    bootstrap: str, topic: str, values: list[bytes | None], key: bytes | None = None
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0


def _avro_users(
    registry: tuple[BrokerProcess, str],
    topic: str,
    schema: dict[str, Any],
    users: list[dict[str, Any]],
) -> None:
    process, url = registry
    serializer = AvroSerializer(_client(url), json.dumps(schema))
    ctx = SerializationContext(topic, MessageField.VALUE)
    _produce(process.bootstrap, topic, [serializer(u, ctx) for u in users])


def _as_python(row: Row | None) -> Any:
    """A Spark row's value as plain Python (structs as dicts, maps as dicts)."""
    if isinstance(row, Row):
        return {k: _as_python(v) for k, v in row.asDict().items()}
    if isinstance(row, list):
        return [_as_python(v) for v in row]
    if isinstance(row, dict):
        return {k: _as_python(v) for k, v in row.items()}
    return row


def _network(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str, **options: str
) -> DataFrame:
    process, url = registry
    return (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", process.bootstrap)
        .option("subscribe", topic)
        .option("schema.registry.url", url)
        .options(**options)
        .load()
    )


def _files(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str, **options: str
) -> DataFrame:
    process, _ = registry
    return (
        spark.read.format("seglog")
        .option("subscribe", topic)
        .options(**options)
        .load(str(process.data))
    )


def _values(df: DataFrame) -> list[Any]:
    return [_as_python(r["value"]) for r in df.orderBy("offset").collect()]


def _naive_utc(user: dict[str, Any]) -> dict[str, Any]:
    # Spark hands timestamps to Python in the session's time zone (UTC here), naive.
    out = dict(user)
    out["seen"] = user["seen"].astimezone(UTC).replace(tzinfo=None)
    return out


def test_avro_topic_reads_as_typed_columns_over_the_network_and_from_files(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    create_topic(registry[0].bootstrap, topic)
    users = [_user(i) for i in range(30)]
    _avro_users(registry, topic, USER_V1, users)
    expected = [_naive_utc(_expected(u, v2=False)) for u in users]

    network = _network(spark, registry, topic, valueFormat="avro")
    value_type = network.schema["value"].dataType.simpleString()
    assert value_type == (
        "struct<name:string,age:int,tags:array<string>,scores:map<string,double>,"
        "level:string,address:struct<city:string,zip:int>,"
        "id:struct<member0:bigint,member1:string>,seen:timestamp,born:date,"
        "balance:decimal(10,2),raw:binary>"
    )
    assert network.schema["key"].dataType.simpleString() == "binary"
    assert _values(network) == expected
    assert [r["name"] for r in network.select("value.name").orderBy("offset").collect()] == [
        u["name"] for u in users
    ]

    files = _files(spark, registry, topic, valueFormat="avro")
    assert files.schema == network.schema
    assert _values(files) == expected


def test_a_schema_change_mid_topic_reads_into_the_latest_or_fails(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    create_topic(registry[0].bootstrap, topic)
    _avro_users(registry, topic, USER_V1, [_user(i) for i in range(5)])
    _avro_users(registry, topic, USER_V2, [_user(i, v2=True) for i in range(5, 10)])
    client = _client(registry[1])
    v1_id = client.get_version(f"{topic}-value", 1).schema_id
    v2_id = client.get_latest_version(f"{topic}-value").schema_id
    assert v1_id != v2_id

    expected = [_naive_utc(_expected(_user(i, v2=i >= 5), v2=True)) for i in range(10)]
    for read in (_network, _files):
        df = read(spark, registry, topic, valueFormat="avro")
        assert "email" in df.schema["value"].dataType.fieldNames()
        assert _values(df) == expected

        failing = read(spark, registry, topic, valueFormat="avro", schemaEvolution="fail")
        with pytest.raises(CapturedException) as caught:
            failing.collect()
        message = str(caught.value)
        assert f"topic {topic} partition 0 offset 0" in message
        assert f"schema id {v1_id}, not {v2_id}" in message
        assert "schemaEvolution=fail" in message
        # Only the records written with the planned schema: they read.
        tail = read(
            spark,
            registry,
            topic,
            valueFormat="avro",
            schemaEvolution="fail",
            startingOffsets=json.dumps({topic: {"0": 5}}),
        )
        assert _values(tail) == expected[5:]


def test_streaming_read_of_an_avro_topic(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str, tmp_path: Path
) -> None:
    process, url = registry
    create_topic(process.bootstrap, topic, partitions=2)
    users = [_user(i) for i in range(40)]
    _avro_users(registry, topic, USER_V1, users)
    for mode, options in (
        ("network", {"kafka.bootstrap.servers": process.bootstrap, "schema.registry.url": url}),
        ("files", {"path": str(process.data)}),
    ):
        stream = (
            spark.readStream.format("seglog")
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("valueFormat", "avro")
            .option("maxOffsetsPerTrigger", "15")
            .options(**options)
            .load()
        )
        out = tmp_path / mode
        query = (
            stream.select("partition", "offset", "value.name", "value.address.city")
            .writeStream.format("parquet")
            .option("path", str(out / "table"))
            .option("checkpointLocation", str(out / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None
        rows = spark.read.parquet(str(out / "table")).collect()
        assert sorted(r["name"] for r in rows) == sorted(u["name"] for u in users)
        assert sorted(r["city"] for r in rows) == sorted(u["address"]["city"] for u in users)


def test_json_schema_topic(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    process, url = registry
    create_topic(process.bootstrap, topic)
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "item": {"type": "string"},
            "price": {"type": "number"},
            "paid": {"type": "boolean"},
            "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
            "note": {"type": ["string", "null"]},
            "extra": {},
        },
        "definitions": {
            "Line": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            }
        },
    }
    serializer = JSONSerializer(json.dumps(schema), _client(url))
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [
        {
            "id": i,
            "item": f"thing {i}",
            "price": i + 0.5 if i % 2 else i,
            "paid": i % 2 == 0,
            "lines": [{"sku": f"s{i}", "qty": i}],
            "note": None if i % 3 else "fragile",
            "extra": {"any": [i]},
        }
        for i in range(12)
    ]
    # Keys: Avro strings, through the key subject.
    key_serializer = AvroSerializer(_client(url), json.dumps("string"))
    key_ctx = SerializationContext(topic, MessageField.KEY)
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 5})
    for o in orders:
        producer.produce(
            topic, value=serializer(o, ctx), key=key_serializer(f"order-{o['id']}", key_ctx)
        )
    assert producer.flush(30) == 0
    keyed = _network(spark, registry, topic, valueFormat="json", keyFormat="avro")
    assert keyed.schema["key"].dataType.simpleString() == "string"
    rows = keyed.orderBy("offset").collect()
    assert [(r["key"], r["value"]["id"]) for r in rows] == [(f"order-{i}", i) for i in range(12)]
    df = _network(spark, registry, topic, valueFormat="json")
    # Properties in the order of the registered document (the registry may reorder them).
    fields = {f.name: f.dataType.simpleString() for f in df.schema["value"].dataType.fields}
    assert fields == {
        "id": "bigint",
        "item": "string",
        "price": "double",
        "paid": "boolean",
        "lines": fields["lines"],
        "note": "string",
        "extra": "string",
    }
    assert fields["lines"] in (
        "array<struct<sku:string,qty:bigint>>",
        "array<struct<qty:bigint,sku:string>>",
    )
    expected = [
        {**o, "price": float(o["price"]), "extra": json.dumps(o["extra"], separators=(",", ":"))}
        for o in orders
    ]
    assert _values(df) == expected
    assert _values(_files(spark, registry, topic, valueFormat="json")) == expected


def _order_class() -> Any:
    """A Protobuf message class made at run time: nested, repeated, map, enum fields."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    status = proto.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="SHIPPED", number=1)
    line = proto.message_type.add(name="Line")
    line.field.add(name="sku", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    line.field.add(name="qty", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    order = proto.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    order.field.add(
        name="status", number=2, type=f.TYPE_ENUM, type_name=".shop.Status", label=f.LABEL_OPTIONAL
    )
    order.field.add(
        name="lines", number=3, type=f.TYPE_MESSAGE, type_name=".shop.Line", label=f.LABEL_REPEATED
    )
    order.field.add(
        name="main", number=4, type=f.TYPE_MESSAGE, type_name=".shop.Line", label=f.LABEL_OPTIONAL
    )
    entry = order.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    order.field.add(
        name="attrs",
        number=5,
        type=f.TYPE_MESSAGE,
        type_name=".shop.Order.AttrsEntry",
        label=f.LABEL_REPEATED,
    )
    order.field.add(name="tags", number=6, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_topic(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    process, url = registry
    create_topic(process.bootstrap, topic)
    order_class = _order_class()
    serializer = ProtobufSerializer(order_class, _client(url), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = []
    for i in range(10):
        message = order_class(id=i, status=i % 2, tags=[f"t{i}"])
        message.lines.add(sku=f"s{i}", qty=i)
        if i % 2:
            message.main.sku = "main"
            message.main.qty = 1
        message.attrs["k"] = str(i)
        orders.append(message)
    _produce(process.bootstrap, topic, [serializer(o, ctx) for o in orders])
    expected = [
        {
            "id": i,
            "status": "SHIPPED" if i % 2 else "NEW",
            "lines": [{"sku": f"s{i}", "qty": i}],
            "main": {"sku": "main", "qty": 1} if i % 2 else None,
            "attrs": {"k": str(i)},
            "tags": [f"t{i}"],
        }
        for i in range(10)
    ]
    # The row message is Order, the file's message no other one uses (Line comes first).
    df = _network(spark, registry, topic, valueFormat="protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,status:string,lines:array<struct<sku:string,qty:int>>,"
        "main:struct<sku:string,qty:int>,attrs:map<string,string>,tags:array<string>>"
    )
    assert _values(df) == expected
    assert _values(_files(spark, registry, topic, valueFormat="protobuf")) == expected
    # Naming the message chooses another; records of Order fitted to Line by field name.
    line = _network(spark, registry, topic, valueFormat="protobuf", valueProtobufMessage="Line")
    assert line.schema["value"].dataType.simpleString() == "struct<sku:string,qty:int>"


def test_records_not_in_the_wire_format_fail_or_read_as_null(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    process, _ = registry
    create_topic(process.bootstrap, topic)
    _avro_users(registry, topic, USER_V1, [_user(0)])
    _produce(process.bootstrap, topic, [b"plain text", b"\x00\x00\x0f\x42\x3f rest", None])
    _avro_users(registry, topic, USER_V1, [_user(1)])
    for read in (_network, _files):
        with pytest.raises(CapturedException) as caught:
            read(spark, registry, topic, valueFormat="avro").collect()
        message = str(caught.value)
        where = f"record at topic {topic} partition 0 offset 1"
        assert f"{where} is not in the schema registry's wire format" in message
        assert "mode=PERMISSIVE" in message
        permissive = read(spark, registry, topic, valueFormat="avro", mode="PERMISSIVE")
        names = [v and v["name"] for v in _values(permissive)]
        # An unknown schema id (999999) reads as null too; a tombstone is null anyway.
        assert names == ["user 0", None, None, None, "user 1"]
    only_offset_2 = _network(
        spark,
        registry,
        topic,
        valueFormat="avro",
        startingOffsets=json.dumps({topic: {"0": 2}}),
        endingOffsets=json.dumps({topic: {"0": 3}}),
    )
    with pytest.raises(CapturedException) as caught:
        only_offset_2.collect()
    assert "offset 2 names schema id 999999, which the registry does not have" in str(caught.value)


def test_subscribing_to_topics_of_different_schemas_is_refused(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    process, url = registry
    other = f"{topic}-other"
    for name in (topic, other):
        create_topic(process.bootstrap, name)
    _avro_users(registry, topic, USER_V1, [_user(0)])
    point = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}
    _avro_users(registry, other, point, [{"x": 1}])
    with pytest.raises(CapturedException) as caught:
        (
            spark.read.format("seglog")
            .option("kafka.bootstrap.servers", process.bootstrap)
            .option("subscribe", f"{topic},{other}")
            .option("schema.registry.url", url)
            .option("valueFormat", "avro")
            .load()
        )
    assert "give the value column different types" in str(caught.value)
    # One topic with no subject at all.
    missing = f"{topic}-none"
    with pytest.raises(CapturedException) as caught:
        _network(spark, registry, missing, valueFormat="avro")
    assert f"Subject '{missing}-value' has no schema in the registry" in str(caught.value)


def _consume(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(1200):
            if len(out) == count:
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                out.append(message)
    finally:
        consumer.close()
    return out


def test_typed_rows_written_by_the_sink_read_back_with_confluent_kafka(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str
) -> None:
    process, url = registry
    create_topic(process.bootstrap, topic, partitions=2)
    rows = [
        (
            f"k{i}",
            {
                "name": f"user {i}",
                "age": i if i % 3 else None,
                "tags": [f"t{i}"],
                "scores": {"a": float(i)},
                "address": {"city": f"c{i}", "zip": i},
                "seen": dt.datetime(2024, 1, 1, 0, 0, i),
                "balance": decimal.Decimal(f"{i}.50"),
            },
        )
        for i in range(20)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value struct<name: string, age: int, tags: array<string>, "
        "scores: map<string, double>, address: struct<city: string, zip: int>, "
        "seen: timestamp, balance: decimal(10,2)>",
    )
    (
        df.write.format("seglog")
        .option("kafka.bootstrap.servers", process.bootstrap)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", url)
        .mode("append")
        .save()
    )
    client = _client(url)
    registered = client.get_latest_version(f"{topic}-value")
    schema = json.loads(registered.schema.schema_str)
    assert schema["type"] == "record" and schema["name"] == "".join(
        c if c.isalnum() else "_" for c in topic
    )
    deserializer = AvroDeserializer(client)
    messages = _consume(process.bootstrap, topic, len(rows))
    got = {
        m.key().decode(): deserializer(m.value(), SerializationContext(topic, MessageField.VALUE))
        for m in messages
    }
    assert len(got) == len(rows)
    for key, value in rows:
        back = got[key]
        assert back["name"] == value["name"] and back["age"] == value["age"]
        assert back["tags"] == value["tags"] and back["scores"] == value["scores"]
        assert back["address"] == value["address"]
        assert back["balance"] == value["balance"]
        assert back["seen"] == value["seen"].replace(tzinfo=UTC)

    # And through the source, typed again.
    typed = _network(spark, registry, topic, valueFormat="avro")
    names = sorted(r["name"] for r in typed.select("value.name").collect())
    assert names == sorted(v["name"] for _, v in rows)


def test_streaming_write_of_typed_rows_json(
    spark: SparkSession, registry: tuple[BrokerProcess, str], topic: str, tmp_path: Path
) -> None:
    """A typed Avro stream re-encoded as JSON Schema records by a streaming write."""
    process, url = registry
    target = f"{topic}-json"
    create_topic(process.bootstrap, topic)
    create_topic(process.bootstrap, target)
    users = [_user(i) for i in range(12)]
    _avro_users(registry, topic, USER_V1, users)
    stream = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", process.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("schema.registry.url", url)
        .option("valueFormat", "avro")
        .load()
    )
    query = (
        stream.selectExpr("named_struct('name', value.name, 'zip', value.address.zip) AS value")
        .writeStream.format("seglog")
        .option("kafka.bootstrap.servers", process.bootstrap)
        .option("topic", target)
        .option("valueFormat", "json")
        .option("schema.registry.url", url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    back = _network(spark, registry, target, valueFormat="json")
    assert back.schema["value"].dataType.simpleString() == "struct<name:string,zip:bigint>"
    got = sorted((v["name"], v["zip"]) for v in _values(back))
    assert got == sorted((u["name"], u["address"]["zip"]) for u in users)
