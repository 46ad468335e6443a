"""JSON Schema: parsing, canonical text, references, and the registry's compatibility rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from seglog.schemas.formats import InvalidSchemaError, check_compatibility, parse_schema
from seglog.schemas.formats.json_schema import JsonSchema


def js(document: Any, references: dict[str, Any] | None = None) -> JsonSchema:
    refs = {name: json.dumps(doc) for name, doc in (references or {}).items()}
    parsed = parse_schema("JSON", json.dumps(document), refs)
    assert isinstance(parsed, JsonSchema)
    return parsed


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> Any:
    node: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        node["required"] = required
    return node


def problems(level: str, new: Any, old: Any) -> list[str]:
    return check_compatibility(level, js(new), [js(old)])


def error_types(found: list[str]) -> list[str]:
    return [p.split("'")[1] for p in found]


STRING = {"type": "string"}
INTEGER = {"type": "integer"}


# --- parsing ------------------------------------------------------------------------------


def test_canonical_text_is_compact_with_sorted_keys() -> None:
    a = (
        '{\n  "type": "object",\n'
        '  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}\n}'
    )
    b = '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    assert parse_schema("JSON", a).canonical() == parse_schema("JSON", b).canonical() == b


def test_normalize_sorts_required_and_type_lists() -> None:
    one = obj({"a": STRING, "b": {"type": ["string", "null"]}}, ["b", "a"])
    two = obj({"b": {"type": ["null", "string"]}, "a": STRING}, ["a", "b"])
    assert js(one).canonical() != js(two).canonical()
    assert js(one).normalize().canonical() == js(two).normalize().canonical()
    # Data keywords are not touched: an enum's order is the user's.
    three = {"enum": [{"required": ["b", "a"]}]}
    assert js(three).normalize().canonical() == js(three).canonical()


def test_a_boolean_schema_is_a_schema() -> None:
    assert parse_schema("JSON", "true").canonical() == "true"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{nope", "not JSON"),
        ('{"type": "nosuchtype"}', "nosuchtype"),
        ('{"type": "object", "properties": {"a": {"minLength": -1}}}', "properties/a/minLength"),
        ("[1, 2]", "an object or a boolean"),
    ],
)
def test_an_invalid_schema_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid JSON schema") as caught:
        parse_schema("JSON", text)
    assert words in str(caught.value)


def test_an_invalid_reference_is_named() -> None:
    with pytest.raises(InvalidSchemaError, match=r"reference 'address\.json'"):
        parse_schema("JSON", "{}", {"address.json": '{"type": 5}'})


def test_a_reference_is_reached_by_its_name() -> None:
    address = obj({"street": STRING}, ["street"])
    user = obj({"home": {"$ref": "address.json"}})
    parsed = js(user, {"address.json": address})
    validator = parsed.validator()
    assert validator.is_valid({"home": {"street": "Main"}})
    assert not validator.is_valid({"home": {"street": 5}})


def test_a_reference_is_reached_relative_to_the_schemas_id() -> None:
    address = obj({"street": STRING}, ["street"])
    user = {
        "$id": "https://example.com/schemas/user.json",
        **obj({"home": {"$ref": "address.json"}}),
    }
    parsed = js(user, {"address.json": address})
    assert not parsed.validator().is_valid({"home": {"street": 5}})
    other = js(
        {**user, "properties": {"home": {"$ref": "address.json"}}},
        {"address.json": obj({"street": INTEGER}, ["street"])},
    )
    assert error_types(check_compatibility("BACKWARD", other, [parsed])) == ["TYPE_CHANGED"]


def test_references_take_part_in_compatibility() -> None:
    user = obj({"home": {"$ref": "address.json"}}, additionalProperties=False)
    old = js(user, {"address.json": obj({"street": STRING}, additionalProperties=False)})
    new = js(user, {"address.json": obj({"street": INTEGER}, additionalProperties=False)})
    found = check_compatibility("BACKWARD", new, [old])
    assert error_types(found) == ["TYPE_CHANGED"]
    assert "#/properties/home" in found[0]


def test_local_refs_are_followed() -> None:
    old = {"$defs": {"n": INTEGER}, **obj({"a": {"$ref": "#/$defs/n"}})}
    new = {"$defs": {"n": STRING}, **obj({"a": {"$ref": "#/$defs/n"}})}
    assert error_types(problems("BACKWARD", new, old)) == ["TYPE_CHANGED"]


# --- compatibility ---------------------------------------------------------------------------


def test_adding_an_optional_property_to_a_closed_model_is_backward_compatible() -> None:
    old = obj({"a": STRING}, additionalProperties=False)
    new = obj({"a": STRING, "b": STRING}, additionalProperties=False)
    assert problems("BACKWARD", new, old) == []
    # An old reader, closed, refuses documents with b.
    assert error_types(problems("FORWARD", new, old)) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
    ]


def test_adding_a_typed_property_to_an_open_model_is_not_backward_compatible() -> None:
    # The old schema allowed any "b"; the new one only strings.
    old = obj({"a": STRING})
    new = obj({"a": STRING, "b": STRING})
    assert error_types(problems("BACKWARD", new, old)) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]
    assert problems("FORWARD", new, old) == []
    # A property of any value is fine.
    assert problems("BACKWARD", obj({"a": STRING, "b": {}}), old) == []


def test_removing_a_property() -> None:
    old = obj({"a": STRING, "b": STRING}, additionalProperties=False)
    closed = obj({"a": STRING}, additionalProperties=False)
    found = problems("BACKWARD", closed, old)
    assert found == [
        "{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL', description:'The new schema "
        "has a closed content model and is missing the property 'b' at path '#/properties/b' in "
        "the old schema'}"
    ]
    # Open, the new schema accepts b as an unknown property.
    open_new = obj({"a": STRING})
    assert problems("BACKWARD", open_new, obj({"a": STRING, "b": STRING})) == []
    # Partly open: additionalProperties must accept what b was.
    partial = obj({"a": STRING}, additionalProperties=INTEGER)
    assert error_types(problems("BACKWARD", partial, obj({"a": STRING, "b": STRING}))) == [
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ADDITIONAL_PROPERTIES_NARROWED",
    ]


def test_adding_a_required_property() -> None:
    old = obj({"a": STRING}, additionalProperties=False)
    new = obj({"a": STRING, "b": STRING}, ["b"], additionalProperties=False)
    found = problems("BACKWARD", new, old)
    assert error_types(found) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    assert "'b'" in found[0] and "#/properties/b" in found[0]
    with_default = obj(
        {"a": STRING, "b": {"type": "string", "default": ""}}, ["b"], additionalProperties=False
    )
    assert problems("BACKWARD", with_default, old) == []


def test_making_a_property_required() -> None:
    old = obj({"a": STRING})
    new = obj({"a": STRING}, ["a"])
    assert error_types(problems("BACKWARD", new, old)) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert problems("FORWARD", new, old) == []


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [
        (STRING, INTEGER, ["TYPE_CHANGED"], ["TYPE_CHANGED"]),
        (INTEGER, {"type": "number"}, [], ["TYPE_NARROWED"]),
        (STRING, {"type": ["string", "null"]}, [], ["TYPE_NARROWED"]),
        (STRING, {}, [], ["TYPE_NARROWED"]),
    ],
)
def test_changing_a_type(old: Any, new: Any, backward: list[str], forward: list[str]) -> None:
    assert error_types(problems("BACKWARD", obj({"a": new}), obj({"a": old}))) == backward
    assert error_types(problems("FORWARD", obj({"a": new}), obj({"a": old}))) == forward


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        (
            {"type": "string", "maxLength": 10},
            {"type": "string", "maxLength": 5},
            "MAX_LENGTH_DECREASED",
        ),
        (STRING, {"type": "string", "maxLength": 5}, "MAX_LENGTH_ADDED"),
        (
            {"type": "string", "minLength": 1},
            {"type": "string", "minLength": 2},
            "MIN_LENGTH_INCREASED",
        ),
        (
            {"type": "integer", "maximum": 10},
            {"type": "integer", "maximum": 9},
            "MAXIMUM_DECREASED",
        ),
        ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}, "MINIMUM_INCREASED"),
        (STRING, {"type": "string", "pattern": "^a"}, "PATTERN_ADDED"),
        ({"enum": ["a", "b"]}, {"enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    ],
)
def test_tightening_a_limit(old: Any, new: Any, kind: str) -> None:
    assert error_types(problems("BACKWARD", new, old)) == [kind]
    # Loosening it is fine.
    assert problems("BACKWARD", old, new) == []


def test_array_items_are_compared() -> None:
    old = {"type": "array", "items": INTEGER}
    assert problems("BACKWARD", {"type": "array", "items": {"type": "number"}}, old) == []
    found = problems("BACKWARD", {"type": "array", "items": STRING}, old)
    assert error_types(found) == ["TYPE_CHANGED"]
    assert "#/items" in found[0]


def test_each_writer_branch_must_be_accepted_by_some_reader_branch() -> None:
    old = {"oneOf": [STRING, INTEGER]}
    assert problems("BACKWARD", {"oneOf": [STRING, INTEGER, {"type": "null"}]}, old) == []
    found = problems("BACKWARD", {"oneOf": [STRING]}, old)
    assert error_types(found) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]
    assert problems("BACKWARD", {"anyOf": [STRING, INTEGER]}, STRING) == []


def test_nested_objects_report_their_path() -> None:
    old = obj({"inner": obj({"x": STRING}, additionalProperties=False)})
    new = obj({"inner": obj({"x": INTEGER}, additionalProperties=False)})
    found = problems("BACKWARD", new, old)
    assert error_types(found) == ["TYPE_CHANGED"]
    assert "#/properties/inner/properties/x" in found[0]


def test_a_schema_is_compatible_with_itself() -> None:
    schema = {
        "$defs": {"node": obj({"next": {"$ref": "#/$defs/node"}, "v": INTEGER})},
        **obj(
            {"a": STRING, "b": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            ["a"],
            additionalProperties=False,
        ),
    }
    for level in ("BACKWARD", "FORWARD", "FULL_TRANSITIVE"):
        assert problems(level, schema, schema) == []


# (reader, writer, the difference types expected); the reader must accept all the writer does.
VECTORS: list[tuple[Any, Any, list[str]]] = [
    (False, True, ["TYPE_CHANGED"]),
    (True, False, []),
    ({"type": ["integer", "string"]}, {"type": ["number", "string"]}, ["TYPE_NARROWED"]),
    ({"type": ["number", "null"]}, {"type": "integer"}, []),
    ({"type": "number", "multipleOf": 5}, {"type": "number", "multipleOf": 10}, []),
    (
        {"type": "number", "multipleOf": 10},
        {"type": "number", "multipleOf": 15},
        ["MULTIPLE_OF_CHANGED"],
    ),
    ({"type": "number", "multipleOf": 3}, {"type": "number"}, ["MULTIPLE_OF_ADDED"]),
    (
        {"type": "number", "exclusiveMaximum": 9},
        {"type": "number", "exclusiveMaximum": 10},
        ["EXCLUSIVE_MAXIMUM_DECREASED"],
    ),
    ({"type": "array", "uniqueItems": True}, {"type": "array"}, ["UNIQUE_ITEMS_ADDED"]),
    (
        {"type": "array", "minItems": 2, "maxItems": 10},
        {"type": "array", "maxItems": 11},
        ["MAX_ITEMS_DECREASED", "MIN_ITEMS_ADDED"],
    ),
    ({"type": "object", "maxProperties": 3}, {"type": "object"}, ["MAX_PROPERTIES_ADDED"]),
    ({"enum": [1, 2, 4]}, {"enum": [4, 1, 3]}, ["ENUM_ARRAY_CHANGED"]),
    ({"enum": [1, 2, 3]}, {"enum": [1, 2]}, []),
    (
        {"type": "object", "additionalProperties": False},
        {"type": "object", "additionalProperties": STRING},
        ["ADDITIONAL_PROPERTIES_REMOVED"],
    ),
    (
        {"type": "object", "additionalProperties": STRING},
        {"type": "object"},
        ["ADDITIONAL_PROPERTIES_NARROWED"],
    ),
    ({"type": "object"}, {"type": "object", "additionalProperties": STRING}, []),
]


@pytest.mark.parametrize(("reader", "writer", "expected"), VECTORS)
def test_vectors(reader: Any, writer: Any, expected: list[str]) -> None:
    assert sorted(error_types(problems("BACKWARD", reader, writer))) == sorted(expected)


def test_paths_name_the_keyword() -> None:
    found = problems("BACKWARD", {"type": "string", "maxLength": 3}, {"type": "string"})
    assert "path '#/maxLength'" in found[0]
    found = problems(
        "BACKWARD", {"type": "object", "additionalProperties": False}, {"type": "object"}
    )
    assert "path '#/additionalProperties'" in found[0]
    assert "path '#/'" in problems("BACKWARD", INTEGER, STRING)[0]


def test_tuples_compare_position_by_position() -> None:
    writer = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [STRING, INTEGER],
    }
    wider = {**writer, "items": [STRING, {"type": "number"}]}
    assert problems("BACKWARD", wider, writer) == []
    found = problems("BACKWARD", {**writer, "items": [STRING, STRING]}, writer)
    assert error_types(found) == ["TYPE_CHANGED"]
    assert "#/items/1" in found[0]
    # One schema for every item must read each position of the tuple.
    assert error_types(problems("BACKWARD", {"type": "array", "items": STRING}, writer)) == [
        "TYPE_CHANGED"
    ]


def test_a_recursive_ref_with_sibling_keywords_terminates() -> None:
    node = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/node", "description": "the next"}},
            }
        },
        "$ref": "#/$defs/node",
        "title": "a list",
    }
    assert problems("FULL", node, node) == []


def test_all_of_in_the_reader_checks_each_part() -> None:
    writer = obj({"a": STRING, "b": INTEGER}, additionalProperties=False)
    reader = {"allOf": [obj({"a": STRING}), obj({"b": INTEGER})]}
    assert problems("BACKWARD", reader, writer) == []
    stricter = {"allOf": [obj({"a": STRING}), obj({"b": STRING})]}
    found = problems("BACKWARD", stricter, writer)
    assert error_types(found) == ["TYPE_CHANGED"]
    assert "#/allOf/1/properties/b" in found[0]


def test_all_of_in_the_writer_is_taken_together() -> None:
    writer = {"allOf": [{"type": "string"}, {"maxLength": 5}]}
    assert problems("BACKWARD", {"type": "string", "maxLength": 5}, writer) == []
    assert problems("BACKWARD", {"type": "string"}, writer) == []
    found = problems("BACKWARD", {"type": "string", "maxLength": 3}, writer)
    assert error_types(found) == ["MAX_LENGTH_DECREASED"]
    merged_objects = {"allOf": [obj({"a": STRING}, ["a"]), obj({"b": INTEGER}, ["b"])]}
    assert problems("FULL", merged_objects, merged_objects) == []


def test_pattern_properties_make_a_partially_open_content_model() -> None:
    writer = {
        "type": "object",
        "patternProperties": {"^n_": INTEGER},
        "additionalProperties": False,
    }
    # A new property under the writer's pattern must take what the pattern allowed.
    number = {**writer, "properties": {"n_count": {"type": "number"}}}
    assert problems("BACKWARD", number, writer) == []
    text = {**writer, "properties": {"n_count": STRING}}
    assert error_types(problems("BACKWARD", text, writer)) == [
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
    ]
    # Outside every pattern, the closed writer never wrote it.
    assert problems("BACKWARD", {**writer, "properties": {"other": STRING}}, writer) == []
    # A property dropped must fall under a pattern of the reader that takes it.
    declared = {**writer, "properties": {"n_a": INTEGER, "x": STRING}}
    found = problems("BACKWARD", writer, declared)
    assert error_types(found) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    assert "'x'" in found[0]


def test_dependencies_may_not_grow() -> None:
    writer = {"type": "object", "dependentRequired": {"a": ["b"]}}
    more = {"type": "object", "dependentRequired": {"a": ["b", "c"]}}
    assert error_types(problems("BACKWARD", more, writer)) == ["DEPENDENCY_ARRAY_EXTENDED"]
    assert problems("BACKWARD", writer, more) == []
    new = {"type": "object", "dependentRequired": {"a": ["b"], "c": ["a"]}}
    assert error_types(problems("BACKWARD", new, writer)) == ["DEPENDENCY_ARRAY_ADDED"]
    schema = {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}
    assert error_types(problems("BACKWARD", schema, {"type": "object"})) == [
        "DEPENDENCY_SCHEMA_ADDED"
    ]
