"""JSON Schema documents as Spark types, parsed JSON values as what Arrow takes, and back.

Mapping::

    object with properties          struct (properties in the document's order)
    object with only a schema in    map<string, _>
      additionalProperties
    string                          string
    integer                         long
    number                          double
    boolean                         boolean
    array (items: a schema)         array
    type [T, "null"], oneOf/anyOf   T (nullable)
      [T, {"type": "null"}]
    anything else (several types,   string: the value's JSON text (a string value
      no type, allOf, an array        as itself)
      without items ...)

``$ref`` to ``#/definitions/...``, ``#/$defs/...`` or to a schema reference's
name is followed; a schema that refers to itself has no Spark type and is
refused. Every Spark field is nullable. A property missing from a value is
null; a property the schema does not name is left out.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
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
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from seglog.spark.typed import converters

__all__ = [
    "json_converter",
    "json_default",
    "json_spark_type",
    "maps_as_dicts",
    "spark_to_json_schema",
]

Converter = Callable[[Any], Any]
Document = Mapping[str, Any]

_SCALARS: dict[str, DataType] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
}
_TEXT = "text"  # the node is kept as JSON text


class JsonSchemaTypeError(ValueError):
    """A JSON Schema with no Spark type (one that refers to itself, a dangling ``$ref``)."""


class _Resolver:
    """Follows ``$ref`` within a document and to the documents of its references."""

    def __init__(self, root: Document, references: Mapping[str, Document]) -> None:
        self.root = root
        self.references = references

    def resolve(self, node: Any, stack: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        seen = stack
        while isinstance(node, Mapping) and "$ref" in node:
            ref = str(node["$ref"])
            if ref in seen:
                raise JsonSchemaTypeError(
                    f"JSON Schema '$ref' {ref} refers to itself: a recursive schema has no "
                    "Spark type"
                )
            seen = (*seen, ref)
            node = self._target(ref)
        return node, seen

    def _target(self, ref: str) -> Any:
        doc: Any
        location, _, pointer = ref.partition("#")
        if location:
            if location not in self.references:
                raise JsonSchemaTypeError(f"JSON Schema '$ref' {ref} names no schema reference")
            doc = self.references[location]
        else:
            doc = self.root
        for part in (p for p in pointer.split("/") if p):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(doc, Mapping) or part not in doc:
                raise JsonSchemaTypeError(f"JSON Schema '$ref' {ref} points at nothing")
            doc = doc[part]
        return doc


def _kind(
    node: Any, resolver: _Resolver, stack: tuple[str, ...]
) -> tuple[str, Any, tuple[str, ...]]:
    """(kind, the node to map further, ``$ref`` stack): kind is a scalar type name, "object",
    "map", "array", "null" or :data:`_TEXT`."""
    node, stack = resolver.resolve(node, stack)
    if node is True or node == {}:
        return _TEXT, node, stack
    if not isinstance(node, Mapping):
        return _TEXT, node, stack
    for combinator in ("oneOf", "anyOf"):
        if combinator in node and isinstance(node[combinator], list):
            options = [
                o
                for o in node[combinator]
                if not (isinstance(o, Mapping) and o.get("type") == "null")
            ]
            if len(options) == 1:
                return _kind(options[0], resolver, stack)
            return _TEXT, node, stack
    declared = node.get("type")
    if isinstance(declared, list):
        types = [t for t in declared if t != "null"]
        declared = types[0] if len(types) == 1 else (None if types else "null")
        if declared is None:
            return _TEXT, node, stack
    if declared is None:
        if "properties" in node:
            declared = "object"
        elif "items" in node:
            declared = "array"
        elif "enum" in node and all(isinstance(v, str) for v in node["enum"]):
            declared = "string"
        else:
            return _TEXT, node, stack
    if declared == "object":
        if isinstance(node.get("properties"), Mapping) and node["properties"]:
            return "object", node, stack
        if isinstance(node.get("additionalProperties"), Mapping):
            return "map", node, stack
        return _TEXT, node, stack
    if declared == "array":
        items = node.get("items")
        return ("array" if isinstance(items, Mapping) else _TEXT), node, stack
    if declared in _SCALARS or declared == "null":
        return str(declared), node, stack
    return _TEXT, node, stack


def json_spark_type(document: Any, references: Mapping[str, Document] | None = None) -> DataType:
    """The Spark type of a JSON Schema document (``references``: name -> document)."""
    resolver = _Resolver(document if isinstance(document, Mapping) else {}, references or {})
    return _spark(document, resolver, ())


def _spark(node: Any, resolver: _Resolver, stack: tuple[str, ...]) -> DataType:
    kind, node, stack = _kind(node, resolver, stack)
    if kind == "object":
        return StructType(
            [
                StructField(str(name), _spark(sub, resolver, stack))
                for name, sub in node["properties"].items()
            ]
        )
    if kind == "map":
        return MapType(StringType(), _spark(node["additionalProperties"], resolver, stack))
    if kind == "array":
        return ArrayType(_spark(node["items"], resolver, stack))
    if kind in _SCALARS:
        return _SCALARS[kind]
    return StringType()  # JSON text, and "null" alone (always null)


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _as_float(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def json_converter(
    document: Any, references: Mapping[str, Document] | None = None
) -> Converter | None:
    """What turns ``json.loads``'s value into Arrow's input for :func:`json_spark_type`'s type
    (None: nothing to do)."""
    resolver = _Resolver(document if isinstance(document, Mapping) else {}, references or {})
    return _converter(document, resolver, ())


def _converter(node: Any, resolver: _Resolver, stack: tuple[str, ...]) -> Converter | None:
    kind, node, stack = _kind(node, resolver, stack)
    if kind == "object":
        fields = [
            (str(n), _converter(sub, resolver, stack)) for n, sub in node["properties"].items()
        ]
        # Always: a value that is not an object is null in a struct column.
        return converters.fields((n, c) for n, c in fields if c is not None)
    if kind in ("map", "array"):
        inner = _converter(
            node["additionalProperties" if kind == "map" else "items"], resolver, stack
        )
        return converters.values(inner) if kind == "map" else converters.items(inner)
    if kind == "number":
        return _as_float
    if kind in ("string", "integer", "boolean"):
        return None
    if kind == "null":
        return lambda _: None
    return _as_text


# --------------------------------------------------- Spark type -> JSON Schema


def spark_to_json_schema(data_type: DataType, title: str) -> dict[str, Any]:
    """A JSON Schema (draft-07) for values of ``data_type`` (every property nullable); the sink
    registers it when the subject has none."""
    schema = _json_of(data_type)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **schema}


def _json_of(data_type: DataType) -> dict[str, Any]:
    if isinstance(data_type, StructType):
        return {
            "type": "object",
            "properties": {f.name: _or_null(_json_of(f.dataType)) for f in data_type.fields},
        }
    if isinstance(data_type, ArrayType):
        return {"type": "array", "items": _or_null(_json_of(data_type.elementType))}
    if isinstance(data_type, MapType):
        return {"type": "object", "additionalProperties": _or_null(_json_of(data_type.valueType))}
    if isinstance(data_type, ByteType | ShortType | IntegerType | LongType):
        return {"type": "integer"}
    if isinstance(data_type, FloatType | DoubleType | DecimalType):
        return {"type": "number"}
    if isinstance(data_type, BooleanType):
        return {"type": "boolean"}
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return {"type": "string", "format": "date-time"}
    if isinstance(data_type, DateType):
        return {"type": "string", "format": "date"}
    if isinstance(data_type, BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    return {"type": "string"}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def json_default(value: Any) -> Any:
    """``json.dumps``'s ``default`` for the Python values of Spark rows (maps as pairs,
    timestamps, decimals, bytes)."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def maps_as_dicts(data_type: DataType) -> Converter | None:
    """What turns Arrow's Python value of ``data_type`` (maps as lists of pairs) into plain
    JSON-like values (maps as dicts); None when the type holds no map."""
    if isinstance(data_type, MapType):
        return converters.values(maps_as_dicts(data_type.valueType), from_pairs=True)
    if isinstance(data_type, ArrayType):
        item = maps_as_dicts(data_type.elementType)
        return None if item is None else converters.items(item)
    if isinstance(data_type, StructType):
        fields = [(f.name, maps_as_dicts(f.dataType)) for f in data_type.fields]
        converting = [(n, c) for n, c in fields if c is not None]
        return converters.fields(converting) if converting else None
    return None
