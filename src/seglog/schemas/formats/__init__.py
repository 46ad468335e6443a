"""Schema formats: parsing, canonical and normalized text, and compatibility of schema versions.

``parse_schema(schema_type, text, references)`` gives a :class:`ParsedSchema` (Avro, JSON Schema
or Protobuf); ``check_compatibility(level, new, previous)`` lists what makes ``new`` break
``level`` against the previous versions (an empty list: compatible).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from seglog.schemas.formats import avro, json_schema, protobuf, protobuf_diff
from seglog.schemas.formats._base import InvalidSchemaError, ParsedSchema
from seglog.schemas.formats.levels import LEVELS, apply_level

__all__ = [
    "LEVELS",
    "SCHEMA_TYPES",
    "InvalidSchemaError",
    "ParsedSchema",
    "check_compatibility",
    "parse_schema",
]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def parse_schema(
    schema_type: str, text: str, references: Mapping[str, str] | None = None
) -> ParsedSchema:
    """Parse ``text`` as a schema of ``schema_type``; raise :class:`InvalidSchemaError` if invalid.

    ``references`` maps each reference's name to its schema text, dependencies first (as
    ``RegistryState.resolved_references`` gives them). The same arguments give the same
    object, from a cache: treat a parsed schema as immutable.
    """
    try:
        return _parse(schema_type, text, tuple((references or {}).items()))
    except RecursionError:
        # The JSON depth limit keeps the parsers well inside the stack; this is for a
        # schema that nests deep in a way the limit does not count (a chain of references).
        raise InvalidSchemaError(
            f"Invalid {schema_type} schema: nested too deeply to be parsed"
        ) from None


# A registry parses the same stored schemas again and again (every compatibility check, every
# lookup): JSON Schema's metaschema check and protoc take milliseconds each.
@functools.lru_cache(maxsize=1024)
def _parse(schema_type: str, text: str, references: tuple[tuple[str, str], ...]) -> ParsedSchema:
    refs = dict(references)
    if schema_type == "AVRO":
        return avro.parse(text, refs)
    if schema_type == "JSON":
        return json_schema.parse(text, refs)
    if schema_type == "PROTOBUF":
        return protobuf.parse(text, refs)
    types = ", ".join(SCHEMA_TYPES)
    raise InvalidSchemaError(f"Unknown schema type {schema_type!r}; one of {types}")


def check_compatibility(
    level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]
) -> list[str]:
    """One message per problem that makes ``new`` break ``level`` against ``previous``.

    ``previous`` is oldest first. A previous version of another schema type than ``new`` is
    incompatible with it whatever the level but NONE.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}; one of {', '.join(LEVELS)}")
    return apply_level(level, new, previous, _check_pair)


def _check_pair(
    reader: ParsedSchema, writer: ParsedSchema, r_label: str, w_label: str
) -> list[str]:
    if isinstance(reader, avro.AvroSchema) and isinstance(writer, avro.AvroSchema):
        return avro.incompatibilities(reader, writer, r_label, w_label)
    if isinstance(reader, json_schema.JsonSchema) and isinstance(writer, json_schema.JsonSchema):
        return json_schema.incompatibilities(reader, writer, r_label, w_label)
    if isinstance(reader, protobuf.ProtobufSchema) and isinstance(writer, protobuf.ProtobufSchema):
        return protobuf_diff.incompatibilities(reader, writer, r_label, w_label)
    return [
        "{errorType:'TYPE_MISMATCH', description:'The "
        f"{r_label} schema is of type {reader.schema_type} and the {w_label} schema of type "
        f"{writer.schema_type}'}}"
    ]
