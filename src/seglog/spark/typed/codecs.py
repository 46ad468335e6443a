"""One registered schema made ready to type, decode and encode records.

A :class:`SchemaCodec` is built once per schema id and task from a
:class:`~seglog.spark.typed.registry.RegisteredSchema`: its Spark type (the
column's type when it is the planned schema), a decoder of records written
with it into the planned schema's shape, and an encoder for the sink. A
decoder takes the whole record, the wire format's 5-byte header included
(checked by the caller), and starts after it: no copy of the payload is made
just to drop the header.

How a record written with another schema than the planned one is read
(``schemaEvolution=latest``):

* Avro: fastavro resolves the writer's schema into the planned one (the
  reader schema): added fields take their defaults, removed ones are
  skipped, promotions (int -> long ...) apply; a schema that cannot be
  resolved fails the record;
* JSON: the value is parsed and fitted to the planned struct by property
  name (a missing property is null, an unknown one left out);
* Protobuf: the message is decoded with the writer's descriptor (the message
  its indexes name) and fitted to the planned struct by field name.
"""

from __future__ import annotations

import io
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import fastavro
from google.protobuf.descriptor import Descriptor
from pyspark.sql.types import DataType

from seglog.schemas.decoding import message_at
from seglog.schemas.formats import parse_schema
from seglog.schemas.wire import HEADER_SIZE, encode_message_indexes, header, read_message_indexes
from seglog.spark.typed.avro_types import avro_converter, avro_preparer, avro_spark_type
from seglog.spark.typed.json_types import (
    json_converter,
    json_default,
    json_spark_type,
    maps_as_dicts,
)
from seglog.spark.typed.protobuf_types import (
    message_class,
    message_spark_type,
    message_to_dict,
    row_message_indexes,
)
from seglog.spark.typed.registry import RegisteredSchema

__all__ = ["FORMATS", "SchemaCodec", "codec_of"]

FORMATS = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
"""Option value -> the registry's schema type."""

Decoder = Callable[[bytes], Any]
Encoder = Callable[[Any], bytes]


class SchemaCodec(ABC):
    """A parsed registered schema (see the module docstring)."""

    def __init__(self, registered: RegisteredSchema) -> None:
        self.registered = registered

    @property
    def id(self) -> int:
        """The schema's id."""
        return self.registered.id

    @abstractmethod
    def spark_type(self) -> DataType:
        """The Spark type of a value of this schema."""

    @abstractmethod
    def decoder(self, planned: SchemaCodec) -> Decoder:
        """Records written with this schema (header included), as Arrow input of ``planned``'s
        Spark type."""

    @abstractmethod
    def encoder(self, data_type: DataType) -> Encoder:
        """Arrow's Python values of ``data_type`` as whole wire-format records of this schema."""


class AvroCodec(SchemaCodec):
    """An Avro schema, parsed by fastavro (references first, as named types)."""

    def __init__(self, registered: RegisteredSchema) -> None:
        super().__init__(registered)
        named: dict[str, Any] = {}
        for _, text in registered.references:
            fastavro.parse_schema(json.loads(text), named_schemas=named)
        self.parsed = fastavro.parse_schema(json.loads(registered.schema), named_schemas=named)
        self.named = named

    def spark_type(self) -> DataType:
        """See :mod:`seglog.spark.typed.avro_types`."""
        return avro_spark_type(self.parsed, self.named)

    def decoder(self, planned: SchemaCodec) -> Decoder:
        """fastavro's ``schemaless_reader``, resolving into ``planned`` when it is another."""
        assert isinstance(planned, AvroCodec)
        writer = self.parsed
        reader = None if planned.id == self.id else planned.parsed
        convert = avro_converter(planned.parsed, planned.named)
        read = fastavro.schemaless_reader
        bytes_io = io.BytesIO

        def decode(record: bytes) -> Any:
            stream = bytes_io(record)
            stream.seek(HEADER_SIZE)
            value = read(stream, writer, reader, True, True)
            return value if convert is None else convert(value)

        return decode

    def encoder(self, data_type: DataType) -> Encoder:
        """fastavro's ``schemaless_writer`` after the header."""
        prefix = header(self.id)
        prepare = avro_preparer(self.parsed, self.named)
        schema = self.parsed
        write = fastavro.schemaless_writer

        def encode(value: Any) -> bytes:
            out = io.BytesIO()
            out.write(prefix)
            write(out, schema, value if prepare is None else prepare(value))
            return out.getvalue()

        return encode


class JsonCodec(SchemaCodec):
    """A JSON Schema document."""

    def __init__(self, registered: RegisteredSchema) -> None:
        super().__init__(registered)
        self.document = json.loads(registered.schema)
        self.references = {name: json.loads(text) for name, text in registered.references}

    def spark_type(self) -> DataType:
        """See :mod:`seglog.spark.typed.json_types`."""
        return json_spark_type(self.document, self.references)

    def decoder(self, planned: SchemaCodec) -> Decoder:
        """``json.loads``, then fitted to ``planned``'s struct."""
        assert isinstance(planned, JsonCodec)
        convert = json_converter(planned.document, planned.references)
        loads = json.loads

        def decode(record: bytes) -> Any:
            value = loads(record[HEADER_SIZE:])
            return value if convert is None else convert(value)

        return decode

    def encoder(self, data_type: DataType) -> Encoder:
        """Compact JSON text after the header (not validated against the schema)."""
        prefix = header(self.id)
        plain = maps_as_dicts(data_type)
        dumps = json.dumps

        def encode(value: Any) -> bytes:
            text = dumps(
                value if plain is None else plain(value),
                separators=(",", ":"),
                default=json_default,
            )
            return prefix + text.encode()

        return encode


class ProtobufCodec(SchemaCodec):
    """A Protobuf file parsed by the registry's parser (:mod:`seglog.schemas.formats`), in the
    descriptor pool that parser builds with its references and imports."""

    def __init__(self, registered: RegisteredSchema, message: str | None = None) -> None:
        super().__init__(registered)
        parsed: Any = parse_schema("PROTOBUF", registered.schema, dict(registered.references))
        self.pool = parsed.pool
        self.file_name = parsed.file_descriptor.name
        self._messages: dict[tuple[int, ...], tuple[Descriptor, Callable[..., Any], Any]] = {}
        self.row_indexes = row_message_indexes(self.pool, self.file_name, message)
        """The message a row is: the one named, else the file's main one."""

    def message(self, indexes: tuple[int, ...]) -> tuple[Descriptor, Callable[..., Any], Any]:
        """(descriptor, to-dict converter, class) of the message ``indexes`` name."""
        found = self._messages.get(indexes)
        if found is None:
            descriptor = message_at(self.pool, self.file_name, indexes)
            found = (descriptor, message_to_dict(descriptor), message_class(descriptor))
            self._messages[indexes] = found
        return found

    def spark_type(self) -> DataType:
        """The struct of the row message (see :mod:`seglog.spark.typed.protobuf_types`)."""
        return message_spark_type(self.message(self.row_indexes)[0])

    def decoder(self, planned: SchemaCodec) -> Decoder:
        """The message the indexes name, decoded with this schema's descriptors."""
        messages = self.message

        def decode(record: bytes) -> Any:
            indexes, pos = read_message_indexes(record, HEADER_SIZE)
            _, to_dict, cls = messages(tuple(indexes))
            return to_dict(cls.FromString(record[pos:]))

        return decode

    def encoder(self, data_type: DataType) -> Encoder:
        """The row message built from the row's fields, after the header and its message
        indexes."""
        prefix = header(self.id) + encode_message_indexes(self.row_indexes)
        _, _, cls = self.message(self.row_indexes)
        plain = maps_as_dicts(data_type)

        def build(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: build(v) for k, v in value.items() if v is not None}
            if isinstance(value, list):
                return [build(v) for v in value]
            return value

        def encode(value: Any) -> bytes:
            fields = build(value if plain is None else plain(value))
            encoded: bytes = cls(**fields).SerializeToString()
            return prefix + encoded

        return encode


_CODECS: dict[str, type[SchemaCodec]] = {
    "AVRO": AvroCodec,
    "JSON": JsonCodec,
    "PROTOBUF": ProtobufCodec,
}


def codec_of(registered: RegisteredSchema, message: str | None = None) -> SchemaCodec:
    """The codec of a registered schema's type (``message``: the Protobuf message a row is,
    when not the file's main one)."""
    kind = registered.schema_type.upper()
    if kind == "PROTOBUF":
        return ProtobufCodec(registered, message)
    return _CODECS[kind](registered)
