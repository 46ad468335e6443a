"""Protobuf message descriptors as Spark types, decoded messages as what Arrow takes.

Mapping (as Spark's ``from_protobuf``, unsigned integers widened where lossless)::

    message                     struct (fields in declaration order, oneof members
                                as ordinary nullable fields)
    repeated T                  array<T>
    map<K, V>                   map<K, V>
    enum                        string (the value's name)
    int32, sint32, sfixed32     int
    int64, sint64, sfixed64     long
    uint32, fixed32             long
    uint64, fixed64             long (values past 2^63 - 1 wrap, as in Spark)
    float / double / bool       float / double / boolean
    string / bytes              string / binary
    google.protobuf.Timestamp   timestamp

A message field that is not set is null; a scalar field reads as the
message holds it (proto3's zero values included). A message that contains
itself has no Spark type and is refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "ProtobufTypeError",
    "message_class",
    "message_spark_type",
    "message_to_dict",
    "row_message_indexes",
]

_TIMESTAMP = "google.protobuf.Timestamp"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_SCALARS: dict[int, DataType] = {
    FieldDescriptor.TYPE_INT32: IntegerType(),
    FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(),
    FieldDescriptor.TYPE_INT64: LongType(),
    FieldDescriptor.TYPE_SINT64: LongType(),
    FieldDescriptor.TYPE_SFIXED64: LongType(),
    FieldDescriptor.TYPE_UINT32: LongType(),
    FieldDescriptor.TYPE_FIXED32: LongType(),
    FieldDescriptor.TYPE_UINT64: LongType(),
    FieldDescriptor.TYPE_FIXED64: LongType(),
    FieldDescriptor.TYPE_FLOAT: FloatType(),
    FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(),
    FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(),
    FieldDescriptor.TYPE_ENUM: StringType(),
}
_UNSIGNED_64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)


class ProtobufTypeError(ValueError):
    """A Protobuf schema with no Spark type, or message indexes that name no message."""


def message_class(message: Descriptor) -> type[Message]:
    """The Python class of ``message`` (made once per descriptor by protobuf)."""
    cls: type[Message] = message_factory.GetMessageClass(message)
    return cls


def _is_map(field: FieldDescriptor) -> bool:
    sub = field.message_type
    return bool(field.is_repeated and sub is not None and sub.GetOptions().map_entry)


def message_spark_type(message: Descriptor, stack: tuple[str, ...] = ()) -> StructType:
    """The Spark struct of ``message``."""
    if message.full_name in stack:
        raise ProtobufTypeError(
            f"Protobuf message {message.full_name} contains itself: a recursive message has no "
            "Spark type"
        )
    inner = (*stack, message.full_name)
    return StructType([StructField(f.name, _field_type(f, inner)) for f in message.fields])


def _field_type(field: FieldDescriptor, stack: tuple[str, ...]) -> DataType:
    if _is_map(field):
        entry = field.message_type
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return MapType(_single_type(key, stack), _single_type(value, stack))
    single = _single_type(field, stack)
    return ArrayType(single) if field.is_repeated else single


def _single_type(field: FieldDescriptor, stack: tuple[str, ...]) -> DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if field.message_type.full_name == _TIMESTAMP:
            return TimestampType()
        return message_spark_type(field.message_type, stack)
    return _SCALARS[field.type]


# ------------------------------------------------------------------ decoding

Converter = Callable[[Any], Any]


def message_to_dict(message: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """A function from a decoded ``message`` to the dict Arrow takes for its Spark struct."""
    fields = [(f.name, f, _value_converter(f)) for f in message.fields]

    def convert(msg: Message) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, field, conv in fields:
            if field.message_type is not None and not field.is_repeated and not msg.HasField(name):
                out[name] = None
                continue
            value = getattr(msg, name)
            out[name] = value if conv is None else conv(value)
        return out

    return convert


def _value_converter(field: FieldDescriptor) -> Converter | None:
    if _is_map(field):
        entry = field.message_type
        value_conv = _single_converter(entry.fields_by_name["value"])
        key_conv = _single_converter(entry.fields_by_name["key"])
        return lambda m: {
            (k if key_conv is None else key_conv(k)): (v if value_conv is None else value_conv(v))
            for k, v in m.items()
        }
    single = _single_converter(field)
    if field.is_repeated:
        if single is None:
            return list
        return lambda values: [single(v) for v in values]
    return single


def _single_converter(field: FieldDescriptor) -> Converter | None:
    if field.type == FieldDescriptor.TYPE_ENUM:
        names: Mapping[int, str] = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))
    if field.type in _UNSIGNED_64:
        return lambda n: n - (1 << 64) if n >= 1 << 63 else n
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if field.message_type.full_name == _TIMESTAMP:
            return lambda ts: (
                _EPOCH + dt.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
            )
        return message_to_dict(field.message_type)
    return None


# --------------------------------------------------------- the row message


def _messages_with_indexes(
    messages: Sequence[descriptor_pb2.DescriptorProto], prefix: str, path: tuple[int, ...]
) -> list[tuple[str, tuple[int, ...], descriptor_pb2.DescriptorProto]]:
    out = []
    for i, message in enumerate(messages):
        full = f"{prefix}{message.name}"
        out.append((full, (*path, i), message))
        out.extend(_messages_with_indexes(message.nested_type, f"{full}.", (*path, i)))
    return out


def row_message_indexes(
    pool: descriptor_pool.DescriptorPool, file_name: str, name: str | None
) -> tuple[int, ...]:
    """The message indexes of the message a row is (in ``file_name``).

    ``name`` (a full name, ``shop.Order``, or a simple one, ``Order``) chooses
    it; without one it is the file's first top-level message that no other
    message of the file uses as a field type (files usually declare the
    parts of a message before it, and confluent-kafka registers the whole
    file of the message it serializes), else the first.
    """
    proto = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(file_name).CopyToProto(proto)
    prefix = f"{proto.package}." if proto.package else ""
    messages = _messages_with_indexes(proto.message_type, prefix, ())
    if not messages:
        raise ProtobufTypeError(f"Protobuf schema {file_name} declares no message")
    if name is not None:
        wanted = name.lstrip(".")
        for full, indexes, _ in messages:
            if wanted in (full, full.removeprefix(prefix)):
                return indexes
        names = ", ".join(full for full, _, _ in messages)
        raise ProtobufTypeError(f"Protobuf schema {file_name} has no message {name} ({names})")
    used = {
        field.type_name.lstrip(".")
        for _, _, message in messages
        for field in message.field
        if field.type_name
    }
    for full, indexes, _ in messages:
        if len(indexes) == 1 and full not in used:
            return indexes
    return (0,)
