"""Avro schemas: parsed by fastavro, written canonically and normalized, resolved reader/writer.

Parsing. The text is JSON; fastavro checks it (names, types, defaults) with the named types of
the references already known, so a schema can use a referenced record by its full name. A walk
of our own then builds the *normalized* document and a table of every named type by full name,
which both ``normalize()`` and the compatibility check use.

Canonical text. The document as given, as compact JSON: only whitespace goes. Avro's Parsing
Canonical Form would drop defaults, docs and aliases, which are part of what a user registered.

Normalized text. Every name fully qualified (no ``namespace`` attributes), attributes in a fixed
order (``type, name, doc, aliases`` then the type's own, then any other property sorted), and a
primitive written as a bare string when it has no other property.

Compatibility. The rules of the specification's "Schema Resolution" section, checking that a
reader schema can read what a writer schema wrote:

- primitives must match, or the writer's promote to the reader's: int to long, float or
  double; long to float or double; float to double; string to bytes and bytes to string;
- records, enums and fixed must have the same name (unqualified, or the writer's full name
  among the reader's aliases); fixed must have the same size;
- a reader field absent from the writer (by name or alias) needs a default; a writer field
  absent from the reader is skipped;
- a writer enum symbol absent from the reader is an error unless the reader has a default;
- arrays and maps resolve by their items and values;
- each branch of a writer union must resolve in the reader; a non-union writer must resolve
  against some branch of a reader union.

Each problem is reported with the error types and wording of the registry (TYPE_MISMATCH,
NAME_MISMATCH, ...) and a path into the reader schema such as ``/fields/1/type``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from fastavro.schema import SchemaParseException
from fastavro.schema import parse_schema as _fastavro_parse

from seglog.schemas import json_text
from seglog.schemas.formats._base import InvalidSchemaError, ParsedSchema, message

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
_KINDS = PRIMITIVES | NAMED | {"array", "map"}

# The writer types each reader type accepts besides itself (the specification's promotions).
PROMOTIONS: dict[str, frozenset[str]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

# The attributes each kind of schema writes first, in this order, in the normalized form;
# any other property follows, sorted by name.
_ORDER: dict[str, tuple[str, ...]] = {
    "record": ("type", "name", "doc", "aliases", "fields"),
    "error": ("type", "name", "doc", "aliases", "fields"),
    "enum": ("type", "name", "doc", "aliases", "symbols", "default"),
    "fixed": ("type", "name", "doc", "aliases", "size"),
    "array": ("type", "items"),
    "map": ("type", "values"),
    "field": ("name", "doc", "type", "default", "order", "aliases"),
}

Json = Any  # a decoded JSON value


class AvroSchema(ParsedSchema):
    """A parsed Avro schema.

    ``document`` is the JSON as given, ``fastavro`` fastavro's parsed schema (with the named types
    of the references), ``names`` every named type this schema and its references define, by full
    name, in normalized form.
    """

    schema_type: ClassVar[str] = "AVRO"

    def __init__(
        self,
        document: Json,
        fastavro: Any,
        normalized: Json,
        names: dict[str, Json],
        references: Mapping[str, str],
    ) -> None:
        self.document = document
        self.fastavro = fastavro
        self.normalized = normalized
        self.names = names
        self.references = dict(references)

    def canonical(self) -> str:
        """The document as compact JSON, keys in the order given."""
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False)

    def normalize(self) -> AvroSchema:
        """Names fully qualified, attributes in a fixed order."""
        return AvroSchema(
            self.normalized, self.fastavro, self.normalized, self.names, self.references
        )


def parse(text: str, references: Mapping[str, str]) -> AvroSchema:
    """Parse ``text`` (Avro JSON) with ``references`` (name -> schema text, dependencies first)."""
    fastavro_names: dict[str, Any] = {}
    names: dict[str, Json] = {}
    for name, ref_text in references.items():
        ref_doc = _load(ref_text, f"reference '{name}'")
        _check_with_fastavro(ref_doc, fastavro_names, f"reference '{name}'")
        _Normalizer(names, f"reference '{name}'").walk(ref_doc, "")
    document = _load(text, "schema")
    parsed = _check_with_fastavro(document, fastavro_names, "schema")
    normalized = _Normalizer(names, "schema").walk(document, "")
    return AvroSchema(document, parsed, normalized, names, references)


def _load(text: str, what: str) -> Json:
    try:
        return json_text.loads(text)
    except json_text.TooDeepError as exc:
        raise InvalidSchemaError(f"Invalid Avro {what}: {exc}") from None
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid Avro {what}: not JSON: {exc}") from None


def _check_with_fastavro(document: Json, named: dict[str, Any], what: str) -> Any:
    try:
        return _fastavro_parse(document, named_schemas=named)
    # fastavro says what is wrong with SchemaParseException or UnknownType (a ValueError); a
    # document of the wrong shape (a number where an object belongs) fails with one of the rest.
    except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchemaError(f"Invalid Avro {what}: {type(exc).__name__}: {exc}") from None


def _full_name(name: str, namespace: str) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _namespace_of(full_name: str) -> str:
    return full_name.rpartition(".")[0]


class _Normalizer:
    """Builds the normalized document and records each named type's definition by full name."""

    def __init__(self, names: dict[str, Json], what: str) -> None:
        self.names = names
        self.what = what

    def _invalid(self, problem: str) -> InvalidSchemaError:
        return InvalidSchemaError(f"Invalid Avro {self.what}: {problem}")

    def walk(self, node: Json, namespace: str) -> Json:
        if isinstance(node, str):
            return self._reference(node, namespace)
        if isinstance(node, list):
            return [self.walk(branch, namespace) for branch in node]
        if not isinstance(node, dict) or "type" not in node:
            raise self._invalid(f"not a schema: {node!r}")
        kind = node["type"]
        if not isinstance(kind, str) or kind not in NAMED | {"array", "map"}:
            # A primitive written as an object, or {"type": <another schema>}.
            extra = {k: v for k, v in node.items() if k != "type"}
            inner = self.walk(kind, namespace)
            if not extra:
                return inner
            return {"type": inner, **dict(sorted(extra.items()))}
        if kind == "array":
            return self._ordered(kind, node, {"items": self.walk(node.get("items"), namespace)})
        if kind == "map":
            return self._ordered(kind, node, {"values": self.walk(node.get("values"), namespace)})
        return self._named(kind, node, namespace)

    def _reference(self, name: str, namespace: str) -> str:
        if name in PRIMITIVES:
            return name
        qualified = _full_name(name, namespace)
        if qualified in self.names:
            return qualified
        if name in self.names:
            return name
        raise self._invalid(f"unknown type '{name}'")

    def _named(self, kind: str, node: dict[str, Json], namespace: str) -> Json:
        name = node.get("name")
        if not isinstance(name, str):
            raise self._invalid(f"a {kind} needs a name")
        own_namespace = node.get("namespace", namespace)
        full = _full_name(name, own_namespace if isinstance(own_namespace, str) else namespace)
        inner_namespace = _namespace_of(full)
        replaced: dict[str, Json] = {"name": full}
        if "." not in full and namespace:
            # A name in the null namespace inside a namespaced type: without this, a reader of
            # the normalized text would put it in the enclosing namespace.
            replaced["namespace"] = ""
        if "aliases" in node:
            replaced["aliases"] = [_full_name(a, inner_namespace) for a in node["aliases"]]
        if kind in ("record", "error"):
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise self._invalid(f"record '{full}' has no fields")
            # Registered before its fields are walked: a record may refer to itself.
            result = self._ordered(kind, node, replaced)
            self.names[full] = result
            result["fields"] = [self._field(f, inner_namespace) for f in fields]
            # Re-ordered now that the fields are in: dict order is the written order.
            ordered = self._ordered(
                kind, result, {"namespace": ""} if "namespace" in result else {}
            )
            result.clear()
            result.update(ordered)
            return result
        result = self._ordered(kind, node, replaced)
        self.names[full] = result
        return result

    def _field(self, field: Json, namespace: str) -> Json:
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            raise self._invalid(f"not a field: {field!r}")
        return self._ordered("field", field, {"type": self.walk(field.get("type"), namespace)})

    @staticmethod
    def _ordered(kind: str, node: dict[str, Json], replaced: dict[str, Json]) -> dict[str, Json]:
        merged = {k: v for k, v in node.items() if k != "namespace"}
        merged.update(replaced)
        first = _ORDER[kind]
        result = {k: merged[k] for k in first if k in merged}
        result.update(sorted((k, v) for k, v in merged.items() if k not in first))
        return result


# --- schema resolution ---------------------------------------------------------------------


class _Resolver:
    """Checks that ``reader`` can read data written with ``writer``; collects every problem."""

    def __init__(
        self, reader: AvroSchema, writer: AvroSchema, reader_label: str, writer_label: str
    ) -> None:
        self.reader_names = reader.names
        self.writer_names = writer.names
        self.r = reader_label
        self.w = writer_label
        # Record pairs being checked: a recursive schema is compatible with itself
        # if nothing else is wrong, so a pair met again is assumed to be.
        self.in_progress: set[tuple[str, str]] = set()

    def check(self, reader: Json, writer: Json, path: str) -> list[str]:
        return list(self._check(reader, writer, path))

    @staticmethod
    def _deref(node: Json, names: dict[str, Json]) -> Json:
        """The schema a node stands for: a named type's definition, a wrapped type unwrapped."""
        while True:
            if isinstance(node, str) and node not in PRIMITIVES:
                node = names[node]
            elif isinstance(node, dict) and not (
                isinstance(node["type"], str) and node["type"] in _KINDS
            ):
                node = node["type"]
            else:
                return node

    @staticmethod
    def _kind(node: Json) -> str:
        if isinstance(node, str):
            return node
        if isinstance(node, list):
            return "union"
        kind = node["type"]
        return "record" if kind == "error" else str(kind)

    def _check(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        reader = self._deref(reader, self.reader_names)
        writer = self._deref(writer, self.writer_names)
        r_kind, w_kind = self._kind(reader), self._kind(writer)
        if w_kind == "union":
            # Each value the writer may have written, of any branch, must be readable.
            for index, branch in enumerate(writer):
                if not self._compatible(reader, branch, path):
                    yield message(
                        "MISSING_UNION_BRANCH",
                        f"The {self.r} schema is missing a type inside a union field at path "
                        f"'{path}/{index}' in the {self.w} schema",
                        f"reader union lacking writer type: "
                        f"{self._kind(self._deref(branch, self.writer_names)).upper()}",
                    )
            return
        if r_kind == "union":
            if not any(self._compatible(branch, writer, path) for branch in reader):
                yield message(
                    "MISSING_UNION_BRANCH",
                    f"The {self.r} schema is missing a type inside a union field at path "
                    f"'{path}' in the {self.w} schema",
                    f"reader union lacking writer type: {w_kind.upper()}",
                )
            return
        if r_kind != w_kind:
            if w_kind in PROMOTIONS.get(r_kind, frozenset()):
                return
            yield self._type_mismatch(path, r_kind, w_kind)
            return
        if r_kind in PRIMITIVES:
            return
        if r_kind == "array":
            yield from self._check(reader["items"], writer["items"], f"{path}/items")
        elif r_kind == "map":
            yield from self._check(reader["values"], writer["values"], f"{path}/values")
        elif r_kind == "fixed":
            yield from self._name(reader, writer, path)
            if reader["size"] != writer["size"]:
                yield message(
                    "FIXED_SIZE_MISMATCH",
                    f"The size of FIXED type field at path '{path}/size' in the {self.r} "
                    f"schema does not match with the {self.w} schema",
                    f"expected: {writer['size']}, found: {reader['size']}",
                )
        elif r_kind == "enum":
            yield from self._name(reader, writer, path)
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                symbols = f"[{', '.join(missing)}]"
                yield message(
                    "MISSING_ENUM_SYMBOLS",
                    f"The {self.r} schema is missing enum symbols '{symbols}' at path "
                    f"'{path}/symbols' in the {self.w} schema",
                    symbols,
                )
        else:
            yield from self._record(reader, writer, path)

    def _compatible(self, reader: Json, writer: Json, path: str) -> bool:
        return next(iter(self._check(reader, writer, path)), None) is None

    def _type_mismatch(self, path: str, r_kind: str, w_kind: str) -> str:
        return message(
            "TYPE_MISMATCH",
            f"The type (path '{path}') of a field in the {self.r} schema does not match with "
            f"the {self.w} schema",
            f"reader type: {r_kind.upper()} not compatible with writer type: {w_kind.upper()}",
        )

    def _name(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        r_name, w_name = reader["name"], writer["name"]
        unqualified = r_name.rpartition(".")[2] == w_name.rpartition(".")[2]
        if unqualified or w_name in reader.get("aliases", ()):
            return
        yield message(
            "NAME_MISMATCH",
            f"The name of the schema has changed (path '{path}/name')",
            f"expected: {w_name}",
        )

    def _record(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        names = list(self._name(reader, writer, path))
        yield from names
        pair = (reader["name"], writer["name"])
        if names or pair in self.in_progress:
            return
        self.in_progress.add(pair)
        try:
            writer_fields = {f["name"]: f for f in writer["fields"]}
            for index, field in enumerate(reader["fields"]):
                field_path = f"{path}/fields/{index}"
                match = writer_fields.get(field["name"])
                if match is None:
                    match = next(
                        (writer_fields[a] for a in field.get("aliases", ()) if a in writer_fields),
                        None,
                    )
                if match is not None:
                    yield from self._check(field["type"], match["type"], f"{field_path}/type")
                elif "default" not in field:
                    yield message(
                        "READER_FIELD_MISSING_DEFAULT_VALUE",
                        f"The field '{field['name']}' at path '{field_path}' in the {self.r} "
                        f"schema has no default value and is missing in the {self.w} schema",
                        field["name"],
                    )
        finally:
            self.in_progress.discard(pair)


def incompatibilities(
    reader: AvroSchema, writer: AvroSchema, reader_label: str, writer_label: str
) -> list[str]:
    """The problems a reader with ``reader`` meets on data written with ``writer`` (none: [])."""
    resolver = _Resolver(reader, writer, reader_label, writer_label)
    return resolver.check(reader.normalized, writer.normalized, "")
