"""JSON Schema: documents checked by jsonschema, written canonically, compared for compatibility.

Parsing. The text is a JSON object (or ``true``/``false``), checked against its dialect's
metaschema (``validator_for(doc).check_schema(doc)``). A reference is reached by a ``$ref`` to
its name (``{"$ref": "address.json"}``), optionally with a fragment (``address.json#/$defs/x``).

Canonical text: compact JSON with sorted keys. Normalized: the same, with the arrays whose
order means nothing (``required``, a list of ``type``\\ s) sorted too.

Compatibility. A reader schema is compatible with a writer schema when every document the
writer accepts, the reader accepts too. The check walks both schemas side by side and reports
the registry's difference types where that fails:

- ``type``: the writer's types must be among the reader's (an integer is a number):
  TYPE_CHANGED if none are, TYPE_NARROWED if some are not;
- objects: a property the reader adds must be allowed by what the writer allowed for unknown
  properties (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL), a property the reader drops must be allowed
  by its own ``additionalProperties`` (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL,
  PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL), a newly required property needs
  a default (REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL, REQUIRED_ATTRIBUTE_ADDED), and
  ``additionalProperties`` may not close or narrow (ADDITIONAL_PROPERTIES_REMOVED/_NARROWED);
- limits may not tighten: ``maxLength``, ``maximum``, ``maxItems`` ... added or decreased,
  ``minLength``, ``minimum`` ... added or increased; ``pattern`` added or changed;
- ``enum`` may not lose values (ENUM_ARRAY_NARROWED); arrays compare ``items``;
- ``oneOf``/``anyOf``: each writer branch must be accepted by some reader branch
  (COMBINED_TYPE_SUBSCHEMAS_CHANGED).

Everything else (``if``/``then``, ``dependentSchemas``, formats ...) is not compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from jsonschema import exceptions as _jsonschema_exceptions
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from seglog.schemas.formats._base import InvalidSchemaError, ParsedSchema, message

Json = Any  # a decoded JSON value

# Keywords whose values are data, not schemas: never walked.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})

# Upper limits that a reader may not add or lower, lower limits it may not add or raise:
# keyword -> the difference type's stem.
_UPPER = {
    "maxLength": "MAX_LENGTH",
    "maximum": "MAXIMUM",
    "exclusiveMaximum": "EXCLUSIVE_MAXIMUM",
    "maxItems": "MAX_ITEMS",
    "maxProperties": "MAX_PROPERTIES",
}
_LOWER = {
    "minLength": "MIN_LENGTH",
    "minimum": "MINIMUM",
    "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
    "minItems": "MIN_ITEMS",
    "minProperties": "MIN_PROPERTIES",
}


class JsonSchema(ParsedSchema):
    """A parsed JSON Schema: ``document`` is the schema as a dict (or bool)."""

    schema_type: ClassVar[str] = "JSON"

    def __init__(self, document: Json, references: Mapping[str, Json]) -> None:
        self.document = document
        # name -> referenced schema document, dependencies first.
        self.references = dict(references)

    def canonical(self) -> str:
        """Compact JSON with sorted keys."""
        return json.dumps(self.document, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    def normalize(self) -> JsonSchema:
        """Sorted keys, and sorted ``required`` and ``type`` lists."""
        return JsonSchema(_sorted_lists(self.document), self.references)

    def registry(self) -> Registry[Any]:
        """A ``referencing`` registry holding the references by name, for a validator."""
        return Registry().with_resources(
            (name, Resource.from_contents(doc, default_specification=DRAFT202012))
            for name, doc in self.references.items()
        )

    def validator(self) -> Any:
        """A jsonschema validator for this schema, with its references reachable by name."""
        cls = validator_for(self.document)
        return cls(self.document, registry=self.registry())


def parse(text: str, references: Mapping[str, str]) -> JsonSchema:
    """Parse ``text`` (a JSON Schema) with ``references`` (name -> schema text)."""
    docs: dict[str, Json] = {}
    for name, ref_text in references.items():
        docs[name] = _load(ref_text, f"reference '{name}'")
    return JsonSchema(_load(text, "schema"), docs)


def _load(text: str, what: str) -> Json:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchemaError(f"Invalid JSON {what}: not JSON: {exc}") from None
    if not isinstance(document, dict | bool):
        raise InvalidSchemaError(f"Invalid JSON {what}: a schema is an object or a boolean")
    try:
        validator_for(document).check_schema(document)
    except _jsonschema_exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise InvalidSchemaError(f"Invalid JSON {what}: {exc.message} (at '#/{where}')") from None
    return document


def _sorted_lists(node: Json) -> Json:
    if isinstance(node, list):
        return [_sorted_lists(item) for item in node]
    if not isinstance(node, dict):
        return node
    result: dict[str, Json] = {}
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif key in ("required", "type") and isinstance(value, list):
            result[key] = sorted(value, key=str)
        else:
            result[key] = _sorted_lists(value)
    return result


# --- compatibility -------------------------------------------------------------------------


def _types(schema: dict[str, Json]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _covered(writer_types: set[str], reader_types: set[str]) -> set[str]:
    """The writer's types the reader does not accept (an integer is a number)."""
    missing = writer_types - reader_types
    if "number" in reader_types:
        missing.discard("integer")
    return missing


class _Comparer:
    def __init__(
        self, reader: JsonSchema, writer: JsonSchema, reader_label: str, writer_label: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.r = reader_label
        self.w = writer_label
        self.in_progress: set[tuple[int, int]] = set()

    def _resolve(self, schema: Json, side: JsonSchema) -> Json:
        """Follow ``$ref``\\ s (to a reference by name, or a pointer into the document)."""
        for _ in range(64):
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema
            target, _, pointer = schema["$ref"].partition("#")
            root = side.references.get(target) if target else side.document
            if root is None:
                return {}  # not ours to resolve: compared as "anything"
            node = root
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                return {}
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**node, **siblings} if isinstance(node, dict) and siblings else node
        return schema

    def _problem(self, kind: str, path: str, what: str) -> str:
        return message(kind, f"{what} at path '{path}' in the {self.r} schema ({kind.lower()})")

    def check(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        reader = self._resolve(reader, self.reader)
        writer = self._resolve(writer, self.writer)
        if reader is True or reader == {} or writer is False:
            return
        if reader is False:
            yield self._problem("TYPE_NARROWED", path, "Nothing is accepted")
            return
        if writer is True:
            writer = {}
        key = (id(reader), id(writer))
        if key in self.in_progress:
            return
        self.in_progress.add(key)
        try:
            yield from self._combined(reader, writer, path)
            yield from self._type(reader, writer, path)
            yield from self._limits(reader, writer, path)
            yield from self._enum(reader, writer, path)
            yield from self._object(reader, writer, path)
            if "items" in reader and isinstance(reader["items"], dict | bool):
                writer_items = writer.get("items", {})
                if isinstance(writer_items, dict | bool):
                    yield from self.check(reader["items"], writer_items, f"{path}/items")
        finally:
            self.in_progress.discard(key)

    def _accepts(self, reader: Json, writer: Json, path: str) -> bool:
        return next(iter(self.check(reader, writer, path)), None) is None

    def _combined(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        r_key = next((k for k in ("oneOf", "anyOf") if k in reader), None)
        if r_key is None:
            return
        w_key = next((k for k in ("oneOf", "anyOf") if k in writer), None)
        w_branches = writer[w_key] if w_key else [writer]
        for index, branch in enumerate(w_branches):
            if not any(
                self._accepts(r_branch, branch, f"{path}/{r_key}/{i}")
                for i, r_branch in enumerate(reader[r_key])
            ):
                yield message(
                    "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
                    f"No subschema of '{r_key}' at path '{path}' in the {self.r} schema accepts "
                    f"subschema {index} of the {self.w} schema",
                )

    def _type(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        r_types = _types(reader)
        if r_types is None:
            return
        w_types = _types(writer)
        if w_types is None:
            if "oneOf" in writer or "anyOf" in writer:
                return  # checked branch by branch
            yield message(
                "TYPE_NARROWED",
                f"The type at path '{path}' in the {self.r} schema is restricted to "
                f"{sorted(r_types)} where the {self.w} schema allows any",
            )
            return
        missing = _covered(w_types, r_types)
        if not missing:
            return
        kind = "TYPE_CHANGED" if missing == w_types else "TYPE_NARROWED"
        yield message(
            kind,
            f"The type at path '{path}' in the {self.r} schema ({sorted(r_types)}) does not "
            f"accept {sorted(missing)} of the {self.w} schema",
        )

    def _limits(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        for keyword, stem in _UPPER.items():
            r_value, w_value = reader.get(keyword), writer.get(keyword)
            if isinstance(r_value, int | float) and not isinstance(r_value, bool):
                if w_value is None:
                    yield self._limit(f"{stem}_ADDED", keyword, path, r_value, w_value)
                elif isinstance(w_value, int | float) and r_value < w_value:
                    yield self._limit(f"{stem}_DECREASED", keyword, path, r_value, w_value)
        for keyword, stem in _LOWER.items():
            r_value, w_value = reader.get(keyword), writer.get(keyword)
            if isinstance(r_value, int | float) and not isinstance(r_value, bool):
                if w_value is None:
                    yield self._limit(f"{stem}_ADDED", keyword, path, r_value, w_value)
                elif isinstance(w_value, int | float) and r_value > w_value:
                    yield self._limit(f"{stem}_INCREASED", keyword, path, r_value, w_value)
        r_pattern, w_pattern = reader.get("pattern"), writer.get("pattern")
        if r_pattern is not None and r_pattern != w_pattern:
            kind = "PATTERN_ADDED" if w_pattern is None else "PATTERN_CHANGED"
            yield self._limit(kind, "pattern", path, r_pattern, w_pattern)

    def _limit(self, kind: str, keyword: str, path: str, r_value: Json, w_value: Json) -> str:
        was = "none" if w_value is None else json.dumps(w_value)
        return message(
            kind,
            f"The '{keyword}' at path '{path}' is {json.dumps(r_value)} in the {self.r} schema "
            f"and {was} in the {self.w} schema",
        )

    def _enum(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        r_enum = reader.get("enum")
        if not isinstance(r_enum, list):
            return
        w_enum = writer.get("enum")
        missing = [v for v in w_enum if v not in r_enum] if isinstance(w_enum, list) else None
        if missing is None or missing:
            what = "any value" if missing is None else json.dumps(missing)
            yield message(
                "ENUM_ARRAY_NARROWED",
                f"The enum at path '{path}' in the {self.r} schema does not accept {what} of "
                f"the {self.w} schema",
            )

    def _object(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        keys = ("properties", "required", "additionalProperties")
        if not any(k in reader for k in keys) and not any(k in writer for k in keys):
            return
        r_props: dict[str, Json] = reader.get("properties", {})
        w_props: dict[str, Json] = writer.get("properties", {})
        r_extra: Json = reader.get("additionalProperties", True)
        w_extra: Json = writer.get("additionalProperties", True)
        for name, schema in r_props.items():
            where = f"{path}/properties/{name}"
            if name in w_props:
                yield from self.check(schema, w_props[name], where)
            elif w_extra is not False and not self._accepts(schema, w_extra, where):
                yield message(
                    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                    f"The property '{name}' at path '{where}' in the {self.r} schema is not "
                    f"accepted by what the open content model of the {self.w} schema allows",
                )
        for name, schema in w_props.items():
            if name in r_props:
                continue
            where = f"{path}/properties/{name}"
            if r_extra is False:
                yield message(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    f"The {self.r} schema has a closed content model and is missing the "
                    f"property '{name}' at path '{where}' in the {self.w} schema",
                )
            elif not self._accepts(r_extra, schema, where):
                yield message(
                    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                    f"The property '{name}' at path '{where}' in the {self.w} schema is "
                    f"missing in the {self.r} schema and not accepted by its "
                    "additionalProperties",
                )
        w_required = set(writer.get("required", ()))
        for name in reader.get("required", ()):
            if name in w_required:
                continue
            if isinstance(r_props.get(name), dict) and "default" in r_props[name]:
                continue
            kind = (
                "REQUIRED_ATTRIBUTE_ADDED"
                if name in w_props
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
            )
            yield message(
                kind,
                f"The property '{name}' at path '{path}/properties/{name}' is required in the "
                f"{self.r} schema and not in the {self.w} schema",
            )
        if r_extra is False and w_extra is not False:
            yield message(
                "ADDITIONAL_PROPERTIES_REMOVED",
                f"The {self.r} schema at path '{path}' closes the content model that is open in "
                f"the {self.w} schema",
            )
        elif (
            r_extra is not False
            and w_extra is not False
            and not self._accepts(r_extra, w_extra, f"{path}/additionalProperties")
        ):
            yield message(
                "ADDITIONAL_PROPERTIES_NARROWED",
                f"The additionalProperties at path '{path}' in the {self.r} schema accept "
                f"less than those of the {self.w} schema",
            )


def incompatibilities(
    reader: JsonSchema, writer: JsonSchema, reader_label: str, writer_label: str
) -> list[str]:
    """The documents ``writer`` accepts that ``reader`` does not, as problems (none: [])."""
    comparer = _Comparer(reader, writer, reader_label, writer_label)
    problems: list[str] = []
    for problem in comparer.check(reader.document, writer.document, "#"):
        if problem not in problems:
            problems.append(problem)
    return problems
