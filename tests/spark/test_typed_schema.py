"""The typed columns' type mapping and value conversion, without Spark running: each
format's schemas as Spark types, decoded values accepted by Arrow in exactly the type Spark
expects, and the schemas the sink derives from Spark types."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid
from typing import Any

import fastavro
import jsonschema
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from google.protobuf import descriptor_pb2
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from seglog.schemas.wire import WireFormatError, header, split
from seglog.spark.options import parse_source_options, parse_write_options
from seglog.spark.typed.avro_types import AvroTypeError, avro_spark_type
from seglog.spark.typed.codecs import codec_of
from seglog.spark.typed.json_types import JsonSchemaTypeError, json_spark_type
from seglog.spark.typed.protobuf_types import ProtobufTypeError
from seglog.spark.typed.registry import RegisteredSchema
from seglog.spark.typed.write import derived_schema

F = descriptor_pb2.FieldDescriptorProto


_PRIMITIVES = {
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
}


def spark(text: str) -> T.DataType:
    """A Spark type from its simple string (``struct<a:int>``), with no session needed."""
    data_type, rest = _type(text.replace(" ", ""))
    assert not rest, rest
    return data_type


def _type(text: str) -> tuple[T.DataType, str]:
    for prefix in ("struct<", "array<", "map<"):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if prefix == "array<":
                item, rest = _type(rest)
                return T.ArrayType(item), rest[1:]
            if prefix == "map<":
                key, rest = _type(rest)
                value, rest = _type(rest[1:])
                return T.MapType(key, value), rest[1:]
            fields = []
            while not rest.startswith(">"):
                name, _, rest = rest.partition(":")
                field_type, rest = _type(rest)
                fields.append(T.StructField(name, field_type))
                rest = rest.removeprefix(",")
            return T.StructType(fields), rest[1:]
    if text.startswith("decimal("):
        inside, _, rest = text[len("decimal(") :].partition(")")
        precision, scale = inside.split(",")
        return T.DecimalType(int(precision), int(scale)), rest
    end = len(text)
    for stop in ",>":
        if stop in text:
            end = min(end, text.index(stop))
    return _PRIMITIVES[text[:end]], text[end:]


def arrow(values: list[Any], data_type: T.DataType) -> list[Any]:
    """``values`` through Arrow in the type Spark expects for ``data_type``, back as Python."""
    out: list[Any] = pa.array(values, type=to_arrow_type(data_type, timezone="UTC")).to_pylist()
    return out


# ---------------------------------------------------------------------------- Avro

EVERYTHING = {
    "type": "record",
    "name": "Everything",
    "namespace": "t",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "arr", "type": {"type": "array", "items": ["null", "int"]}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt_last", "type": ["long", "null"]},
        {"name": "u", "type": ["null", "int", "string", "Four"]},
        {
            "name": "recs",
            "type": [
                {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
                {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]},
            ],
        },
        {"name": "nested", "type": "A"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
        },
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
EVERYTHING_TYPE = (
    "struct<i:int,l:bigint,f:float,d:double,b:boolean,s:string,raw:binary,fx:binary,"
    "e:string,arr:array<int>,m:map<string,string>,opt:string,opt_last:bigint,"
    "u:struct<member0:int,member1:string,member2:binary>,"
    "recs:struct<member0:struct<x:int>,member1:struct<x:int>>,nested:struct<x:int>,"
    "day:date,ms:timestamp,us:timestamp,local:timestamp_ntz,tm:int,tu:bigint,"
    "dec:decimal(12,3),id:string>"
)


def avro_codec(schema: Any, schema_id: int = 1) -> Any:
    return codec_of(RegisteredSchema(schema_id, "AVRO", json.dumps(schema)))


def avro_bytes(schema: Any, value: Any, schema_id: int = 1) -> bytes:
    """``value`` in the wire format (the decoders take whole records)."""
    out = io.BytesIO()
    out.write(header(schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def test_avro_types_map_as_spark_from_avro_does() -> None:
    assert avro_codec(EVERYTHING).spark_type() == spark(EVERYTHING_TYPE)
    assert avro_codec("string").spark_type() == spark("string")
    assert avro_codec(["null", "long"]).spark_type() == spark("bigint")


def test_avro_values_convert_into_the_arrow_type_spark_expects() -> None:
    ts = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
    some_id = uuid.UUID(int=42)
    value = {
        "i": -1,
        "l": 2**40,
        "f": 1.5,
        "d": 2.25,
        "b": True,
        "s": "text",
        "raw": b"\x00\x01",
        "fx": b"abcd",
        "e": "GREEN",
        "arr": [1, None, 3],
        "m": {"k": "v"},
        "opt": None,
        "opt_last": 7,
        "u": "in the union",
        "recs": ("t.B", {"x": 9}),
        "nested": {"x": 1},
        "day": dt.date(2024, 5, 6),
        "ms": ts,
        "us": ts,
        "local": ts.replace(tzinfo=None),
        "tm": dt.time(1, 2, 3, 4000),
        "tu": dt.time(1, 2, 3, 4),
        "dec": decimal.Decimal("123.456"),
        "id": str(some_id),
    }
    codec = avro_codec(EVERYTHING)
    decoded = codec.decoder(codec)(avro_bytes(EVERYTHING, value))
    (row,) = arrow([decoded], codec.spark_type())
    assert row["u"] == {"member0": None, "member1": "in the union", "member2": None}
    assert row["recs"] == {"member0": None, "member1": {"x": 9}}
    assert row["tm"] == 3_723_004 and row["tu"] == 3_723_000_004
    assert row["id"] == str(some_id)
    assert row["m"] == [("k", "v")]
    assert row["ms"] == ts and row["local"] == ts.replace(tzinfo=None)
    assert row["dec"] == decimal.Decimal("123.456") and row["fx"] == b"abcd"
    assert row["arr"] == [1, None, 3] and row["e"] == "GREEN"


def test_avro_records_of_an_older_schema_read_into_the_planned_one() -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    v2 = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "a", "type": "long"},
            {"name": "b", "type": "string", "default": "none"},
        ],
    }
    old, new = avro_codec(v1, 1), avro_codec(v2, 2)
    assert old.decoder(new)(avro_bytes(v1, {"a": 5})) == {"a": 5, "b": "none"}
    incompatible = {"type": "record", "name": "R", "fields": [{"name": "c", "type": "int"}]}
    with pytest.raises(Exception, match="c"):
        old.decoder(avro_codec(incompatible, 3))(avro_bytes(v1, {"a": 5}))


def test_avro_schemas_with_no_spark_type_are_refused() -> None:
    recursive = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}],
    }
    with pytest.raises(AvroTypeError, match="refers to itself"):
        avro_codec(recursive).spark_type()
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 0}
    with pytest.raises(AvroTypeError, match="precision 40"):
        avro_spark_type(fastavro.parse_schema(wide), {})


def test_avro_references_are_named_types() -> None:
    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    user = {"type": "record", "name": "User", "fields": [{"name": "home", "type": "Address"}]}
    codec = codec_of(
        RegisteredSchema(3, "AVRO", json.dumps(user), (("Address", json.dumps(address)),))
    )
    assert codec.spark_type() == spark("struct<home:struct<city:string>>")


def test_derived_avro_schema_round_trips_a_row() -> None:
    data_type = spark(
        "struct<name:string,n:int,big:bigint,score:double,ok:boolean,blob:binary,"
        "tags:array<string>,attrs:map<string,int>,inner:struct<x:int>,"
        "day:date,at:timestamp,price:decimal(8,2)>"
    )
    text = derived_schema("avro", data_type, "my-topic.v1")
    schema = json.loads(text)
    assert schema["type"] == "record" and schema["name"] == "my_topic_v1"
    codec = avro_codec(schema, 7)
    # The column's type comes back the same, through the registry's form of the schema.
    assert codec.spark_type() == data_type
    row = {
        "name": "a",
        "n": 1,
        "big": 2**40,
        "score": 0.5,
        "ok": False,
        "blob": b"\x01",
        "tags": ["x", None],
        "attrs": [("k", 3)],  # Arrow's Python form of a map
        "inner": {"x": None},
        "day": dt.date(2020, 2, 29),
        "at": dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
        "price": decimal.Decimal("12.34"),
    }
    encoded = codec.encoder(data_type)(row)
    schema_id, _ = split(encoded)
    assert schema_id == 7
    back = codec.decoder(codec)(encoded)
    assert back == {**row, "attrs": {"k": 3}}


# ---------------------------------------------------------------------- JSON Schema

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "price": {"type": "number"},
        "note": {"type": ["string", "null"]},
        "paid": {"type": "boolean"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "any": {},
        "either": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "mixed": {"type": ["string", "integer"]},
        "kind": {"enum": ["a", "b"]},
    },
    "definitions": {"Line": {"properties": {"sku": {"type": "string"}}}},
}


def json_codec(document: Any, references: tuple[tuple[str, str], ...] = ()) -> Any:
    return codec_of(RegisteredSchema(1, "JSON", json.dumps(document), references))


def test_json_schema_types() -> None:
    assert json_codec(ORDER).spark_type() == spark(
        "struct<id:bigint,price:double,note:string,paid:boolean,lines:array<struct<sku:string>>,"
        "attrs:map<string,bigint>,any:string,either:string,mixed:string,kind:string>"
    )
    line = {"type": "object", "properties": {"sku": {"type": "string"}}}
    referring = {"type": "object", "properties": {"line": {"$ref": "line.json"}}}
    codec = json_codec(referring, (("line.json", json.dumps(line)),))
    assert codec.spark_type() == spark("struct<line:struct<sku:string>>")


def test_json_values_fit_the_struct() -> None:
    codec = json_codec(ORDER)
    value = {
        "id": 3,
        "price": 2,
        "paid": True,
        "lines": [{"sku": "s", "unknown": 1}],
        "attrs": {"a": 1},
        "any": {"deep": [1, 2]},
        "mixed": 5,
        "unknown": "left out",
    }
    decoded = codec.decoder(codec)(header(1) + json.dumps(value).encode())
    (row,) = arrow([decoded], codec.spark_type())
    assert row == {
        "id": 3,
        "price": 2.0,
        "note": None,
        "paid": True,
        "lines": [{"sku": "s"}],
        "attrs": [("a", 1)],
        "any": '{"deep":[1,2]}',
        "either": None,
        "mixed": "5",
        "kind": None,
    }


def test_recursive_json_schema_is_refused() -> None:
    tree = {
        "type": "object",
        "properties": {"child": {"$ref": "#"}},
    }
    with pytest.raises(JsonSchemaTypeError, match="refers to itself"):
        json_spark_type(tree)


def test_derived_json_schema_validates_the_rows_it_encodes() -> None:
    data_type = spark("struct<name:string,n:int,at:timestamp,tags:array<string>,m:map<string,int>>")
    schema = json.loads(derived_schema("json", data_type, "orders"))
    codec = json_codec(schema)
    assert codec.spark_type() == spark(
        "struct<name:string,n:bigint,at:string,tags:array<string>,m:map<string,bigint>>"
    )
    row = {
        "name": "x",
        "n": None,
        "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "tags": ["a"],
        "m": [("k", 1)],
    }
    encoded = codec.encoder(data_type)(row)
    _, payload = split(encoded)
    document = json.loads(bytes(payload))
    jsonschema.validate(document, schema)
    assert document == {
        "name": "x",
        "n": None,
        "at": "2024-01-01T00:00:00+00:00",
        "tags": ["a"],
        "m": {"k": 1},
    }


# ------------------------------------------------------------------------- Protobuf


def order_file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="shop.proto",
        package="shop",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    line = proto.message_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order = proto.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="small", number=2, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    order.field.add(
        name="lines", number=3, type=F.TYPE_MESSAGE, type_name=".shop.Line", label=F.LABEL_REPEATED
    )
    order.field.add(
        name="at",
        number=4,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
    )
    state = order.enum_type.add(name="State")
    state.value.add(name="OPEN", number=0)
    state.value.add(name="DONE", number=1)
    order.field.add(
        name="state",
        number=5,
        type=F.TYPE_ENUM,
        type_name=".shop.Order.State",
        label=F.LABEL_OPTIONAL,
    )
    order.field.add(name="data", number=6, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    nested = order.nested_type.add(name="Note")
    nested.field.add(name="text", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    return proto


def protobuf_codec(message: str | None = None) -> Any:
    import base64

    text = base64.b64encode(order_file().SerializeToString()).decode()
    return codec_of(RegisteredSchema(4, "PROTOBUF", text), message)


def test_protobuf_types_of_the_main_message_and_of_a_named_one() -> None:
    codec = protobuf_codec()
    assert codec.row_indexes == (1,)  # Order: Line is used by it
    assert codec.spark_type() == spark(
        "struct<id:bigint,small:bigint,lines:array<struct<sku:string>>,at:timestamp,"
        "state:string,data:binary>"
    )
    assert protobuf_codec("shop.Order.Note").row_indexes == (1, 0)
    assert protobuf_codec("Line").spark_type() == spark("struct<sku:string>")
    with pytest.raises(ProtobufTypeError, match="has no message Nope"):
        protobuf_codec("Nope")


def test_protobuf_messages_decode_and_encode() -> None:
    codec = protobuf_codec()
    _, _, order_class = codec.message((1,))
    message = order_class(id=2**64 - 1, small=2**32 - 1, state=1, data=b"\x00")
    message.lines.add(sku="s")
    message.at.seconds = 1_700_000_000
    message.at.nanos = 5000
    record = header(4) + b"\x02\x02" + message.SerializeToString()  # indexes [1]
    decoded = codec.decoder(codec)(record)
    (row,) = arrow([decoded], codec.spark_type())
    assert row == {
        "id": -1,  # uint64 past 2^63 - 1 wraps, as in Spark
        "small": 2**32 - 1,
        "lines": [{"sku": "s"}],
        "at": dt.datetime(2023, 11, 14, 22, 13, 20, 5, tzinfo=dt.UTC),
        "state": "DONE",
        "data": b"\x00",
    }
    encoded = codec.encoder(spark("struct<id:bigint,lines:array<struct<sku:string>>>"))(
        {"id": 5, "lines": [{"sku": "t"}]}
    )
    schema_id, rest = split(encoded)
    assert schema_id == 4 and bytes(rest[:2]) == b"\x02\x02"
    assert codec.decoder(codec)(encoded)["lines"] == [{"sku": "t"}]


# -------------------------------------------------------------------------- options


def test_wire_format_errors_say_what_is_wrong() -> None:
    with pytest.raises(WireFormatError, match="magic byte 1"):
        split(b"\x01" + header(3)[1:])
    assert split(header(3) + b"x")[0] == 3


def test_typed_options_are_validated() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    typed = parse_source_options(
        {**base, "valueFormat": "AVRO", "schema.registry.url": "http://r", "mode": "permissive"},
        streaming=False,
    ).typed
    assert typed.value_format == "avro" and typed.key_format == "binary"
    assert typed.permissive and typed.schema_evolution == "latest"
    assert typed.registry == {"url": "http://r"}
    with pytest.raises(ValueError, match=r"Option 'schema\.registry\.url' must be specified"):
        parse_source_options({**base, "valueFormat": "avro"}, streaming=False)
    with pytest.raises(ValueError, match="'valueFormat', must be one of: binary, avro"):
        parse_source_options({**base, "valueFormat": "xml"}, streaming=False)
    with pytest.raises(ValueError, match="'schemaEvolution', must be one of: latest, fail"):
        parse_source_options(
            {**base, "keyFormat": "json", "schema.registry.url": "u", "schemaEvolution": "x"},
            streaming=False,
        )
    with pytest.raises(ValueError, match="'mode', must be one of: FAILFAST, PERMISSIVE"):
        parse_source_options({**base, "mode": "DROPMALFORMED"}, streaming=False)
    # Files mode reads the registry from the log directory.
    files = parse_source_options({"path": "/tmp/x", "valueFormat": "json"}, streaming=False)
    assert files.typed.value_format == "json"
    write = parse_write_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "valueFormat": "avro",
            "schema.registry.url": "http://r",
            "auto.register.schemas": "false",
        }
    )
    assert write.typed.value_format == "avro" and not write.typed.auto_register
    with pytest.raises(ValueError, match=r"schema\.registry\.url"):
        parse_write_options({"kafka.bootstrap.servers": "x", "valueFormat": "avro"})


def test_protobuf_sink_needs_a_registered_schema() -> None:
    with pytest.raises(Exception, match="Protobuf schema cannot be derived"):
        derived_schema("protobuf", spark("struct<a:int>"), "t")
