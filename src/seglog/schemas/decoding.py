"""Records in the registry's wire format decoded to plain Python values (for JSON output).

:class:`WireDecoder` reads the schema id of each record, asks its
:data:`SchemaSource` for that schema once, parses it with the registry's own
parsers (:mod:`seglog.schemas.formats`) and decodes the payload with the
writer's schema: Avro with fastavro, JSON Schema as JSON text, Protobuf with
the message class of the message the record's indexes name.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool

from seglog.schemas.formats import InvalidSchemaError, ParsedSchema, parse_schema
from seglog.schemas.wire import WireFormatError, read_message_indexes, split

__all__ = ["SchemaSource", "WireDecoder", "WireFormatError", "json_default", "message_at"]

SchemaSource = Callable[[int], tuple[str, str, Mapping[str, str]]]
"""A schema id → its type, its text and its references (name → text, dependencies first);
KeyError when there is no such schema."""


def message_at(pool: DescriptorPool, file_name: str, indexes: Sequence[int]) -> Descriptor:
    """The message Confluent's message indexes name in ``file_name``: ``[0]`` the file's first
    message, ``[1, 0]`` the first nested message of its second (WireFormatError if none)."""
    proto = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(file_name).CopyToProto(proto)
    prefix = f"{proto.package}." if proto.package else ""
    candidates = [pool.FindMessageTypeByName(prefix + m.name) for m in proto.message_type]
    found: Descriptor | None = None
    for depth, index in enumerate(indexes or [0]):
        if not 0 <= index < len(candidates):
            raise WireFormatError(
                f"message indexes {list(indexes)} name no message of {file_name} "
                f"(level {depth} has {len(candidates)})"
            )
        found = candidates[index]
        candidates = list(found.nested_types)
    assert found is not None
    return found


class WireDecoder:
    """Decodes records of any schema id ``source`` knows; each schema parsed once."""

    def __init__(self, source: SchemaSource) -> None:
        self._source = source
        self._parsed: dict[int, ParsedSchema] = {}

    def schema(self, schema_id: int) -> ParsedSchema:
        """The parsed schema of ``schema_id`` (KeyError unknown, InvalidSchemaError)."""
        parsed = self._parsed.get(schema_id)
        if parsed is None:
            schema_type, text, references = self._source(schema_id)
            parsed = self._parsed[schema_id] = parse_schema(schema_type, text, references)
        return parsed

    def decode(self, value: bytes) -> tuple[int, Any]:
        """The schema id of ``value`` and its payload as Python values.

        WireFormatError for bytes not in the wire format or not decodable with
        their schema; KeyError for an id the registry does not have.
        """
        schema_id, payload = split(value)
        parsed: Any = self.schema(schema_id)
        try:
            if parsed.schema_type == "AVRO":
                return schema_id, fastavro.schemaless_reader(
                    io.BytesIO(payload), parsed.fastavro, None
                )
            if parsed.schema_type == "JSON":
                return schema_id, json.loads(bytes(payload))
            indexes, pos = read_message_indexes(payload)
            message = message_at(parsed.pool, parsed.file_descriptor.name, indexes)
            cls = message_factory.GetMessageClass(message)
            decoded = cls.FromString(bytes(payload[pos:]))
            return schema_id, json_format.MessageToDict(decoded, preserving_proto_field_name=True)
        except WireFormatError:
            raise
        except (EOFError, ValueError, TypeError, IndexError, InvalidSchemaError) as exc:
            raise WireFormatError(
                f"cannot be decoded with schema {schema_id} ({parsed.schema_type}): {exc}"
            ) from exc
        except Exception as exc:  # protobuf's DecodeError and fastavro's own
            raise WireFormatError(
                f"cannot be decoded with schema {schema_id} ({parsed.schema_type}): {exc}"
            ) from exc


def json_default(value: Any) -> Any:
    """What JSON has no type for, as text: bytes as base64, decimals, times, UUIDs."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time | datetime.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")
