"""JSON Schema: documents checked by jsonschema, written canonically, compared for compatibility.

Parsing. The text is a JSON object (or ``true``/``false``), checked against its dialect's
metaschema (``validator_for(doc).check_schema(doc)``). A reference is reached by a ``$ref`` to
its name (``{"$ref": "address.json"}``), or by that name relative to the schema's ``$id``,
optionally with a fragment (``address.json#/$defs/x``).

Canonical text: compact JSON with sorted keys. Normalized: the same, with the arrays whose
order means nothing (``required``, a list of types) sorted too.

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
  ``patternProperties`` make a content model partially open, as a schema-valued
  ``additionalProperties`` does (PROPERTY_ADDED/REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_...);
  a property's dependencies may not grow (DEPENDENCY_ARRAY_ADDED/_EXTENDED,
  DEPENDENCY_SCHEMA_ADDED);
- limits may not tighten: ``maxLength``, ``maximum``, ``maxItems`` ... added or decreased,
  ``minLength``, ``minimum`` ... added or increased; ``pattern`` added or changed;
  ``multipleOf`` added or changed to a step that is no divisor; ``uniqueItems`` added;
- ``enum`` may not lose values (ENUM_ARRAY_NARROWED, or ENUM_ARRAY_CHANGED when it also gains
  some); arrays compare ``items`` (one schema, or a tuple position by position);
- ``oneOf``/``anyOf``: each writer branch must be accepted by some reader branch
  (COMBINED_TYPE_SUBSCHEMAS_CHANGED); ``allOf``: each part of the reader must accept all the
  writer does, the writer's parts taken together.

Everything else (``if``/``then``/``else``, ``not``, ``format`` ...) is not compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urljoin

from jsonschema import exceptions as _jsonschema_exceptions
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from seglog.schemas import json_text
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

    def reference(self, uri: str) -> Json | None:
        """The referenced document a ``$ref`` (without fragment) names, or None.

        A ``$ref`` is the reference's name, or that name relative to the schema's ``$id``.
        """
        if uri in self.references:
            return self.references[uri]
        base = self.document.get("$id") if isinstance(self.document, dict) else None
        if isinstance(base, str):
            for name, doc in self.references.items():
                if urljoin(base, name) == uri:
                    return doc
        return None

    def registry(self) -> Registry[Any]:
        """A ``referencing`` registry holding the references by name, for a validator."""
        base = self.document.get("$id") if isinstance(self.document, dict) else None
        resources = []
        for name, doc in self.references.items():
            resource = Resource.from_contents(doc, default_specification=DRAFT202012)
            resources.append((name, resource))
            if isinstance(base, str):
                resources.append((urljoin(base, name), resource))
        return Registry().with_resources(resources)

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
        document = json_text.loads(text)
    except json_text.TooDeepError as exc:
        raise InvalidSchemaError(f"Invalid JSON {what}: {exc}") from None
    except ValueError as exc:
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


def _undeclared(schema: dict[str, Json], name: str) -> tuple[Json, bool]:
    """The schema an object applies to ``name`` when its ``properties`` do not declare it.

    That of the first ``patternProperties`` entry matching the name (and True with it), else
    ``additionalProperties`` (true when absent).
    """
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern, pattern_schema in patterns.items():
            try:
                if re.search(pattern, name):
                    return pattern_schema, True
            except re.error:
                continue  # a pattern Python cannot read matches nothing here
    return schema.get("additionalProperties", True), False


def _without(schema: dict[str, Json], keyword: str) -> dict[str, Json]:
    return {k: v for k, v in schema.items() if k != keyword}


def _divides(step: float, other: Json) -> bool:
    """Whether every multiple of ``other`` is a multiple of ``step``."""
    if not isinstance(other, int | float) or isinstance(other, bool) or step == 0:
        return False
    ratio = other / step
    return abs(ratio - round(ratio)) < 1e-9


def _shown(path: str) -> str:
    """The root as the registry writes it, ``#/``."""
    return "#/" if path == "#" else path


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
            root = side.reference(target) if target else side.document
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

    def check(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        # Keyed by the nodes as written: a recursive schema meets the same "$ref" node again,
        # while what it resolves to may be built anew (a "$ref" with sibling keywords).
        key = (id(reader), id(writer))
        if key in self.in_progress:
            return
        reader = self._resolve(reader, self.reader)
        writer = self._resolve(writer, self.writer)
        if reader is True or reader == {} or self._accepts_nothing(writer):
            return
        if reader is False:
            yield message(
                "TYPE_CHANGED",
                f"The {self.r} schema accepts nothing at path '{_shown(path)}' where the "
                f"{self.w} schema accepts values",
            )
            return
        if writer is True:
            writer = {}
        self.in_progress.add(key)
        try:
            if "allOf" in reader:
                # A document the reader takes satisfies its base and each part: each must
                # accept all the writer does.
                yield from self.check(_without(reader, "allOf"), writer, path)
                for index, part in enumerate(reader["allOf"]):
                    yield from self.check(part, writer, f"{path}/allOf/{index}")
                return
            if "allOf" in writer:
                # The writer's documents satisfy each of its parts: a reader taking all that
                # one part takes is compatible. Else the parts are compared merged.
                parts = [_without(writer, "allOf"), *writer["allOf"]]
                if any(self._accepts(reader, part, path) for part in parts):
                    return
                writer = self._conjunction(writer)
                if writer is False:
                    return
            yield from self._combined(reader, writer, path)
            yield from self._type(reader, writer, path)
            yield from self._limits(reader, writer, path)
            yield from self._enum(reader, writer, path)
            yield from self._object(reader, writer, path)
            yield from self._dependencies(reader, writer, path)
            yield from self._items(reader, writer, path)
        finally:
            self.in_progress.discard(key)

    def _accepts_nothing(self, writer: Json) -> bool:
        """Whether the writer takes no document: ``false``, or an ``allOf`` with such a part."""
        if writer is False:
            return True
        if not isinstance(writer, dict) or not isinstance(writer.get("allOf"), list):
            return False
        return any(self._accepts_nothing(self._resolve(p, self.writer)) for p in writer["allOf"])

    def _dependencies(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        """A property's dependencies may not grow: more required beside it, or a schema."""
        r_deps = {**reader.get("dependencies", {}), **reader.get("dependentRequired", {})}
        w_deps = {**writer.get("dependencies", {}), **writer.get("dependentRequired", {})}
        r_deps.update({k: v for k, v in reader.get("dependentSchemas", {}).items()})
        w_deps.update({k: v for k, v in writer.get("dependentSchemas", {}).items()})
        for name, needs in r_deps.items():
            where = f"{path}/dependencies/{name}"
            has = w_deps.get(name)
            if isinstance(needs, list):
                if not isinstance(has, list):
                    kind = "DEPENDENCY_ARRAY_ADDED"
                elif any(n not in has for n in needs):
                    kind = "DEPENDENCY_ARRAY_EXTENDED"
                else:
                    continue
                yield message(
                    kind,
                    f"The {self.r} schema requires {json.dumps(needs)} beside '{name}' at path "
                    f"'{where}', more than the {self.w} schema does",
                )
            elif needs is True or needs == {}:
                continue
            elif not isinstance(has, dict | bool):
                yield message(
                    "DEPENDENCY_SCHEMA_ADDED",
                    f"The {self.r} schema adds a schema that objects with '{name}' must match "
                    f"at path '{where}', which the {self.w} schema does not have",
                )
            else:
                yield from self.check(needs, has, where)

    def _conjunction(self, writer: dict[str, Json]) -> Json:
        """The writer's ``allOf`` parts merged into one schema, near enough to compare.

        Properties are merged, required lists joined, type lists intersected; of any other
        keyword the first part's value stands. A document the writer takes satisfies every
        part, so a reader accepting the merged schema accepts the writer's documents whenever
        the parts do not constrain the same keyword differently.
        """
        merged: dict[str, Json] = _without(writer, "allOf")
        for part in writer["allOf"]:
            part = self._resolve(part, self.writer)
            if part is False:
                return False
            if not isinstance(part, dict):
                continue
            if "allOf" in part:
                part = self._conjunction(part)
                if not isinstance(part, dict):
                    return part
            for keyword, value in part.items():
                if keyword not in merged:
                    merged[keyword] = value
                elif keyword == "properties":
                    merged[keyword] = {**value, **merged[keyword]}
                elif keyword == "required":
                    merged[keyword] = [
                        *merged[keyword],
                        *(v for v in value if v not in merged[keyword]),
                    ]
                elif keyword == "type":
                    both = (_types(merged) or set()) & (_types(part) or set())
                    merged[keyword] = sorted(both)
        return merged

    def _items(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        r_items, w_items = reader.get("items"), writer.get("items", {})
        if isinstance(r_items, dict | bool):
            if isinstance(w_items, list):
                # Each position of the writer's tuple must be read by the reader's one schema.
                for index, item in enumerate(w_items):
                    yield from self.check(r_items, item, f"{path}/items/{index}")
            else:
                yield from self.check(r_items, w_items, f"{path}/items")
        elif isinstance(r_items, list) and isinstance(w_items, list):
            # Tuples (draft 7 and before) position by position; past the writer's end its
            # additionalItems (anything, if absent) hold.
            w_rest = writer.get("additionalItems", {})
            for index, item in enumerate(r_items):
                w_item = w_items[index] if index < len(w_items) else w_rest
                yield from self.check(item, w_item, f"{path}/items/{index}")

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
                    f"No subschema of '{r_key}' at path '{_shown(path)}' in the {self.r} schema "
                    "accepts "
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
                f"The type at path '{_shown(path)}' in the {self.r} schema is restricted to "
                f"{sorted(r_types)} where the {self.w} schema allows any",
            )
            return
        missing = _covered(w_types, r_types)
        if not missing:
            return
        # Narrowed: the reader still takes some of the writer's values (an integer of a number).
        narrowed = missing != w_types or ("number" in missing and "integer" in r_types)
        kind = "TYPE_NARROWED" if narrowed else "TYPE_CHANGED"
        yield message(
            kind,
            f"The type at path '{_shown(path)}' in the {self.r} schema ({sorted(r_types)}) does "
            f"not accept {sorted(missing)} of the {self.w} schema",
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
            # Whether one regular expression accepts all another does is not decided here.
            kind = "PATTERN_ADDED" if w_pattern is None else "PATTERN_CHANGED"
            yield self._limit(kind, "pattern", path, r_pattern, w_pattern)
        r_step, w_step = reader.get("multipleOf"), writer.get("multipleOf")
        if isinstance(r_step, int | float) and not isinstance(r_step, bool):
            if w_step is None:
                yield self._limit("MULTIPLE_OF_ADDED", "multipleOf", path, r_step, w_step)
            elif not _divides(r_step, w_step):
                yield self._limit("MULTIPLE_OF_CHANGED", "multipleOf", path, r_step, w_step)
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            yield self._limit("UNIQUE_ITEMS_ADDED", "uniqueItems", path, True, None)

    def _limit(self, kind: str, keyword: str, path: str, r_value: Json, w_value: Json) -> str:
        was = "none" if w_value is None else json.dumps(w_value)
        return message(
            kind,
            f"The '{keyword}' at path '{path}/{keyword}' is {json.dumps(r_value)} in the "
            f"{self.r} schema "
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
            # Narrowed: the reader only dropped values; changed: it has others instead.
            added = isinstance(w_enum, list) and any(v not in w_enum for v in r_enum)
            yield message(
                "ENUM_ARRAY_CHANGED" if added else "ENUM_ARRAY_NARROWED",
                f"The enum at path '{path}/enum' in the {self.r} schema does not accept {what} of "
                f"the {self.w} schema",
            )

    def _object(self, reader: Json, writer: Json, path: str) -> Iterator[str]:
        keys = ("properties", "required", "additionalProperties", "patternProperties")
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
                continue
            # What the writer may have written under this name, undeclared.
            w_schema, by_pattern = _undeclared(writer, name)
            if w_schema is False or self._accepts(schema, w_schema, where):
                continue
            open_model = not by_pattern and w_schema in (True, {})
            yield message(
                "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                if open_model
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                f"The property '{name}' at path '{where}' in the {self.r} schema does not accept "
                f"all that the {'open' if open_model else 'partially open'} content model of "
                f"the {self.w} schema allows under that name",
            )
        for name, schema in w_props.items():
            if name in r_props:
                continue
            where = f"{path}/properties/{name}"
            r_schema, _ = _undeclared(reader, name)
            if r_schema is False:
                yield message(
                    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                    f"The {self.r} schema has a closed content model and is missing the "
                    f"property '{name}' at path '{where}' in the {self.w} schema",
                )
            elif not self._accepts(r_schema, schema, where):
                yield message(
                    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                    f"The property '{name}' at path '{where}' in the {self.w} schema is "
                    f"missing in the {self.r} schema, whose partially open content model "
                    "does not accept it",
                )
        w_required = set(writer.get("required", ()))
        for name in reader.get("required", ()):
            if name in w_required:
                continue
            if isinstance(r_props.get(name), dict) and "default" in r_props[name]:
                continue
            # A new property a closed (or partly open) writer never wrote, now required; or a
            # property the writer knew or allowed, now required.
            kind = (
                "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                if name not in w_props and w_extra is not True
                else "REQUIRED_ATTRIBUTE_ADDED"
            )
            yield message(
                kind,
                f"The property '{name}' at path '{path}/properties/{name}' is required in the "
                f"{self.r} schema and not in the {self.w} schema",
            )
        if r_extra is False and w_extra is not False:
            yield message(
                "ADDITIONAL_PROPERTIES_REMOVED",
                f"The {self.r} schema at path '{path}/additionalProperties' closes the content "
                "model that is open in "
                f"the {self.w} schema",
            )
        elif (
            r_extra is not False
            and w_extra is not False
            and not self._accepts(r_extra, w_extra, f"{path}/additionalProperties")
        ):
            yield message(
                "ADDITIONAL_PROPERTIES_NARROWED",
                f"The additionalProperties at path '{path}/additionalProperties' in the {self.r} "
                "schema accept "
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
