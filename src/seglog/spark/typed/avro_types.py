"""Avro schemas as Spark types, decoded Avro values as what Arrow takes, and back.

Mapping (as Spark's ``from_avro``)::

    record                      struct (fields in order)
    array                       array
    map                         map<string, _>
    union [null, T] / [T, null] T (nullable)
    other unions                struct<member0, member1, ...> (non-null members in order;
                                the member the value has is set, the others null)
    enum                        string (the symbol)
    bytes, fixed                binary
    string (uuid too)           string
    int / long                  int / long (time-millis, time-micros: the number)
    float / double / boolean    float / double / boolean
    date                        date
    timestamp-millis/micros     timestamp
    local-timestamp-millis/...  timestamp_ntz
    decimal (bytes or fixed)    decimal(precision, scale), precision at most 38
    null                        void

Every Spark field is nullable, as Spark's Kafka columns are. A record that
refers to itself has no Spark type and is refused.

A *converter* turns what fastavro's ``schemaless_reader`` returns into what
``pyarrow.array`` takes for the Spark type's Arrow form; it is None wherever
fastavro's value already fits (records, arrays, maps, nullable unions, most
logical types), so the common record is handed to Arrow as fastavro made it.
The *preparer* does the reverse for the sink (Arrow's Python values into what
fastavro's writer takes).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from seglog.spark.typed import converters

__all__ = [
    "Converter",
    "avro_converter",
    "avro_preparer",
    "avro_spark_type",
    "spark_to_avro",
]

Converter = Callable[[Any], Any]
"""A function from one decoded value to another; None where a value passes unchanged."""

AvroSchema = Any  # a parsed Avro schema: a name, a dict or a list (a union)

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_MAX_DECIMAL_PRECISION = 38


class AvroTypeError(ValueError):
    """An Avro schema with no Spark type (a recursive record, a decimal too wide)."""


def _named(schema: AvroSchema, named: Mapping[str, Any], stack: tuple[str, ...]) -> AvroSchema:
    """``schema`` with a reference to a named type replaced by its definition."""
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        if schema in stack:
            raise AvroTypeError(
                f"Avro type '{schema}' refers to itself: a recursive record has no Spark type"
            )
        if schema not in named:
            raise AvroTypeError(f"Avro type '{schema}' is not defined")
        return named[schema]
    return schema


def _non_null(members: list[Any]) -> list[Any]:
    return [
        m for m in members if m != "null" and not (isinstance(m, dict) and m.get("type") == "null")
    ]


def avro_spark_type(
    schema: AvroSchema, named: Mapping[str, Any], stack: tuple[str, ...] = ()
) -> DataType:
    """The Spark type of a parsed Avro schema (``named``: fastavro's named schemas)."""
    schema = _named(schema, named, stack)
    if isinstance(schema, str):
        return _PRIMITIVES[schema]
    if isinstance(schema, list):
        members = _non_null(schema)
        if len(members) == 1:
            return avro_spark_type(members[0], named, stack)
        if not members:
            return NullType()
        return StructType(
            [
                StructField(f"member{i}", avro_spark_type(m, named, stack))
                for i, m in enumerate(members)
            ]
        )
    kind = schema["type"]
    logical = schema.get("logicalType")
    if kind == "record" or kind == "error":
        inner = (*stack, schema["name"])
        return StructType(
            [
                StructField(f["name"], avro_spark_type(f["type"], named, inner))
                for f in schema["fields"]
            ]
        )
    if kind == "array":
        return ArrayType(avro_spark_type(schema["items"], named, stack))
    if kind == "map":
        return MapType(StringType(), avro_spark_type(schema["values"], named, stack))
    if kind == "enum":
        return StringType()
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(schema["precision"])
        if precision > _MAX_DECIMAL_PRECISION:
            raise AvroTypeError(
                f"Avro decimal of precision {precision} does not fit Spark's decimal (at most 38)"
            )
        return DecimalType(precision, int(schema.get("scale", 0)))
    if kind == "fixed":
        return BinaryType()
    if logical == "date" and kind == "int":
        return DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return TimestampNTZType()
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    return avro_spark_type(kind, named, stack)  # {"type": <another schema>}


# ------------------------------------------------------------------ decoding


def _time_millis(value: Any) -> Any:
    if isinstance(value, dt.time):
        return (
            value.hour * 3600 + value.minute * 60 + value.second
        ) * 1000 + value.microsecond // 1000
    return value


def _time_micros(value: Any) -> Any:
    if isinstance(value, dt.time):
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return seconds * 1_000_000 + value.microsecond
    return value


def _text(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value


def avro_converter(
    schema: AvroSchema, named: Mapping[str, Any], stack: tuple[str, ...] = ()
) -> Converter | None:
    """What turns fastavro's value of ``schema`` into Arrow's input (None: nothing to do).

    fastavro must be called with ``return_record_name=True`` and
    ``return_record_name_override=True``: a union of several records then says
    which record a value is.
    """
    schema = _named(schema, named, stack)
    if isinstance(schema, str):
        return None
    if isinstance(schema, list):
        members = _non_null(schema)
        if len(members) == 1:
            return avro_converter(members[0], named, stack)
        if not members:
            return None
        return _union_converter(members, named, stack)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if kind == "record" or kind == "error":
        inner = (*stack, schema["name"])
        fields = [(f["name"], avro_converter(f["type"], named, inner)) for f in schema["fields"]]
        converting = [(name, conv) for name, conv in fields if conv is not None]
        return converters.fields(converting) if converting else None
    if kind == "array":
        item_conv = avro_converter(schema["items"], named, stack)
        return None if item_conv is None else converters.items(item_conv)
    if kind == "map":
        value_conv = avro_converter(schema["values"], named, stack)
        return None if value_conv is None else converters.values(value_conv)
    if logical == "time-millis":
        return _time_millis
    if logical == "time-micros":
        return _time_micros
    if logical == "uuid":
        return _text
    if isinstance(kind, dict | list) or (isinstance(kind, str) and kind in named):
        return avro_converter(kind, named, stack)
    return None


def _member_kind(schema: AvroSchema, named: Mapping[str, Any]) -> tuple[str, str | None]:
    """(base Avro type, name of a named type) of a union member."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema, None
        schema = named[schema]
    if isinstance(schema, dict):
        kind = schema["type"]
        if isinstance(kind, str) and kind in ("record", "error", "enum", "fixed"):
            return kind, schema.get("name")
        if isinstance(kind, str):
            return kind, None
    return "union", None


# Python types fastavro returns per Avro base type (logical types included).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "int": (int, dt.date, dt.time),
    "long": (int, dt.datetime, dt.time),
    "float": (float, int),
    "double": (float, int),
    "bytes": (bytes, bytearray, decimal.Decimal),
    "fixed": (bytes, bytearray, decimal.Decimal),
    "string": (str, uuid.UUID),
    "enum": (str,),
    "array": (list,),
    "map": (dict,),
    "record": (dict,),
    "error": (dict,),
}


def _union_converter(
    members: list[Any], named: Mapping[str, Any], stack: tuple[str, ...]
) -> Converter:
    """A value of a union of several non-null members into ``struct<member0, ...>``."""
    kinds = [_member_kind(m, named) for m in members]
    convs = [avro_converter(m, named, stack) for m in members]
    names = [f"member{i}" for i in range(len(members))]
    by_record_name = {name: i for i, (_, name) in enumerate(kinds) if name is not None}

    def index_of(value: Any) -> int:
        if isinstance(value, tuple) and len(value) == 2 and value[0] in by_record_name:
            return by_record_name[value[0]]
        for i, (kind, _) in enumerate(kinds):
            types = _PYTHON_TYPES.get(kind, ())
            # bool is an int in Python: only a boolean member takes it.
            if isinstance(value, bool) != (kind == "boolean"):
                continue
            if isinstance(value, dt.datetime) and kind == "int":
                continue
            if isinstance(value, types):
                return i
        raise ValueError(f"value {value!r} matches no member of the union")

    def union(value: Any) -> Any:
        if value is None:
            return None
        i = index_of(value)
        if isinstance(value, tuple):
            value = value[1]
        conv = convs[i]
        out: dict[str, Any] = dict.fromkeys(names)
        out[names[i]] = value if conv is None else conv(value)
        return out

    return union


# ------------------------------------------------------------------- writing


def avro_preparer(
    schema: AvroSchema, named: Mapping[str, Any], stack: tuple[str, ...] = ()
) -> Converter | None:
    """What turns Arrow's Python value of ``schema``'s Spark type into what fastavro's
    ``schemaless_writer`` takes (maps arrive as lists of pairs, unions as member structs)."""
    schema = _named(schema, named, stack)
    if isinstance(schema, str):
        return None
    if isinstance(schema, list):
        members = _non_null(schema)
        if len(members) == 1:
            return avro_preparer(members[0], named, stack)
        if not members:
            return None
        preps = [avro_preparer(m, named, stack) for m in members]
        kinds = [_member_kind(m, named) for m in members]

        def union(value: Any) -> Any:
            if value is None:
                return None
            for i, prep in enumerate(preps):
                item = value.get(f"member{i}")
                if item is not None:
                    item = item if prep is None else prep(item)
                    kind, name = kinds[i]
                    # A record member is named, so fastavro writes the branch meant.
                    return (name, item) if kind in ("record", "error") else item
            return None

        return union
    kind = schema["type"]
    if kind == "record" or kind == "error":
        inner = (*stack, schema["name"])
        fields = [(f["name"], avro_preparer(f["type"], named, inner)) for f in schema["fields"]]
        converting = [(name, prep) for name, prep in fields if prep is not None]
        return converters.fields(converting) if converting else None
    if kind == "array":
        item_prep = avro_preparer(schema["items"], named, stack)
        return None if item_prep is None else converters.items(item_prep)
    if kind == "map":
        # Always: Arrow gives a map as a list of pairs, an encoder takes a dict.
        value_prep = avro_preparer(schema["values"], named, stack)
        return converters.values(value_prep, from_pairs=True)
    if isinstance(kind, dict | list) or (isinstance(kind, str) and kind in named):
        return avro_preparer(kind, named, stack)
    return None


# ------------------------------------------------------- Spark type -> Avro

_AVRO_NAME = re.compile(r"[^A-Za-z0-9_]")


def avro_name(text: str) -> str:
    """``text`` made a valid Avro name (letters, digits and ``_``, not starting with a digit)."""
    name = _AVRO_NAME.sub("_", text) or "_"
    return "_" + name if name[0].isdigit() else name


def spark_to_avro(data_type: DataType, name: str) -> Any:
    """An Avro schema for values of ``data_type``, records named after ``name`` and their
    field paths; the sink registers it when the subject has none. Fields and items are
    nullable (``["null", T]``, default null), as Spark's are; a null value itself is
    written as a null record value (a tombstone), not through the schema."""
    return _avro_of(data_type, avro_name(name))


def _nullable(schema: Any) -> Any:
    return ["null", schema]


def _avro_of(data_type: DataType, name: str) -> Any:
    if isinstance(data_type, StructType):
        return {
            "type": "record",
            "name": name,
            "fields": [
                {
                    "name": avro_name(f.name),
                    "type": _nullable(_avro_of(f.dataType, f"{name}_{avro_name(f.name)}")),
                    "default": None,
                }
                for f in data_type.fields
            ],
        }
    if isinstance(data_type, ArrayType):
        return {"type": "array", "items": _nullable(_avro_of(data_type.elementType, name))}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise AvroTypeError(
                f"An Avro map has string keys: {data_type.simpleString()} cannot be written"
            )
        return {"type": "map", "values": _nullable(_avro_of(data_type.valueType, name))}
    if isinstance(data_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(data_type, ByteType | ShortType | IntegerType):
        return "int"
    for avro, spark in _PRIMITIVES.items():
        if type(data_type) is type(spark):
            return avro
    raise AvroTypeError(f"Spark type {data_type.simpleString()} has no Avro form")
