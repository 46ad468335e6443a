"""Avro: parsing, canonical and normalized text, and the specification's schema resolution."""

from __future__ import annotations

import json
from typing import Any

import pytest

from seglog.schemas.formats import InvalidSchemaError, check_compatibility, parse_schema
from seglog.schemas.formats.avro import AvroSchema


def avro(document: Any, references: dict[str, str] | None = None) -> AvroSchema:
    parsed = parse_schema("AVRO", json.dumps(document), references or {})
    assert isinstance(parsed, AvroSchema)
    return parsed


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def reads(reader: Any, writer: Any) -> list[str]:
    """The problems of a reader with ``reader`` on data written with ``writer``."""
    return check_compatibility("BACKWARD", avro(reader), [avro(writer)])


def error_types(problems: list[str]) -> list[str]:
    return [p.split("'")[1] for p in problems]


# --- parsing ------------------------------------------------------------------------------


def test_whitespace_does_not_change_the_canonical_text() -> None:
    doc = record("User", field("id", "long"), field("name", "string", doc="full name"))
    spaced = json.dumps(doc, indent=4)
    tight = json.dumps(doc, separators=(",", ":"))
    assert parse_schema("AVRO", spaced).canonical() == parse_schema("AVRO", tight).canonical()


def test_canonical_text_keeps_defaults_docs_and_aliases() -> None:
    doc = record(
        "User",
        field("id", "long", doc="the key", aliases=["key"]),
        field("tag", "string", default="none"),
        namespace="com.acme",
        doc="a user",
    )
    assert json.loads(avro(doc).canonical()) == doc


def test_normalize_qualifies_names_and_orders_attributes() -> None:
    written = {
        "fields": [
            {"type": {"symbols": ["A", "B"], "name": "Kind", "type": "enum"}, "name": "kind"},
            {"type": "Kind", "name": "other"},
            {"name": "n", "type": {"type": "int"}},
        ],
        "namespace": "com.acme",
        "name": "Thing",
        "type": "record",
    }
    qualified = {
        "type": "record",
        "name": "com.acme.Thing",
        "fields": [
            {
                "name": "kind",
                "type": {"type": "enum", "name": "com.acme.Kind", "symbols": ["A", "B"]},
            },
            {"name": "other", "type": "com.acme.Kind"},
            {"name": "n", "type": "int"},
        ],
    }
    assert avro(written).canonical() != avro(qualified).canonical()
    assert avro(written).normalize().canonical() == avro(qualified).normalize().canonical()
    assert avro(written).normalize().canonical() == json.dumps(qualified, separators=(",", ":"))


def test_normalized_text_parses_to_the_same_schema() -> None:
    doc = record(
        "Outer",
        field("inner", record("Inner", field("x", "int"), namespace="other.ns")),
        field("again", "other.ns.Inner"),
        namespace="com.acme",
    )
    normalized = avro(doc).normalize().canonical()
    assert avro(json.loads(normalized)).normalize().canonical() == normalized
    assert check_compatibility("FULL", avro(json.loads(normalized)), [avro(doc)]) == []


def test_a_name_in_the_null_namespace_stays_there_when_normalized() -> None:
    doc = record(
        "Outer",
        field("inner", record("Inner", field("x", "int"), namespace="")),
        namespace="com.acme",
    )
    normalized = avro(doc).normalize()
    assert "Inner" in normalized.names and "com.acme.Inner" not in normalized.names
    reparsed = avro(json.loads(normalized.canonical()))
    assert set(reparsed.names) == {"com.acme.Outer", "Inner"}


def test_a_reference_is_used_by_its_full_name() -> None:
    address = record("Address", field("street", "string"), namespace="com.acme")
    user = record("User", field("home", "com.acme.Address"), namespace="com.acme")
    parsed = avro(user, {"com.acme.Address": json.dumps(address)})
    assert "com.acme.Address" in parsed.fastavro["__named_schemas"]
    # Within the same namespace the short name resolves too.
    short = record("User", field("home", "Address"), namespace="com.acme")
    avro(short, {"com.acme.Address": json.dumps(address)})


def test_references_take_part_in_compatibility() -> None:
    v1 = json.dumps(record("Address", field("street", "string"), namespace="com.acme"))
    v2 = json.dumps(
        record("Address", field("street", "string"), field("zip", "int"), namespace="com.acme")
    )
    user = record("User", field("home", "com.acme.Address"), namespace="com.acme")
    old = avro(user, {"com.acme.Address": v1})
    new = avro(user, {"com.acme.Address": v2})
    problems = check_compatibility("BACKWARD", new, [old])
    assert error_types(problems) == ["READER_FIELD_MISSING_DEFAULT_VALUE"]
    assert "/fields/0/type/fields/1" in problems[0]
    assert check_compatibility("FORWARD", new, [old]) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not JSON"),
        ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}', "Nope"),
        ('{"type": "record", "name": "R"}', "no fields"),
        ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "E"),
        ('{"type": "fixed", "name": "F"}', "size"),
        (
            '{"type": "record", "name": "R", "fields": '
            '[{"name": "a", "type": "int", "default": "x"}]}',
            "Default value",
        ),
        ('"nosuchtype"', "nosuchtype"),
    ],
)
def test_an_invalid_schema_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid Avro schema") as caught:
        parse_schema("AVRO", text)
    assert words in str(caught.value)


def test_an_invalid_reference_is_named() -> None:
    with pytest.raises(InvalidSchemaError, match=r"reference 'com\.acme\.A'"):
        parse_schema("AVRO", '"string"', {"com.acme.A": '{"type": "record", "name": "A"}'})


def test_a_missing_reference_is_an_unknown_type() -> None:
    with pytest.raises(InvalidSchemaError, match=r"com\.acme\.Address"):
        avro(record("User", field("home", "com.acme.Address")))


# --- resolution: primitives ---------------------------------------------------------------

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}


@pytest.mark.parametrize("writer", PRIMITIVES)
@pytest.mark.parametrize("reader", PRIMITIVES)
def test_primitives_resolve_only_to_themselves_or_by_promotion(writer: str, reader: str) -> None:
    problems = reads(reader, writer)
    if reader == writer or (writer, reader) in PROMOTIONS:
        assert problems == []
    else:
        assert error_types(problems) == ["TYPE_MISMATCH"]
        assert (
            f"reader type: {reader.upper()} not compatible with writer type: {writer.upper()}"
            in (problems[0])
        )


@pytest.mark.parametrize(("writer", "reader"), sorted(PROMOTIONS))
def test_each_promotion_is_backward_but_not_forward_unless_both_ways(
    writer: str, reader: str
) -> None:
    old = avro(record("R", field("f", writer)))
    new = avro(record("R", field("f", reader)))
    assert check_compatibility("BACKWARD", new, [old]) == []
    forward = check_compatibility("FORWARD", new, [old])
    if (reader, writer) in PROMOTIONS:  # string <-> bytes
        assert forward == []
        assert check_compatibility("FULL", new, [old]) == []
    else:
        assert error_types(forward) == ["TYPE_MISMATCH"]
        assert "path '/fields/0/type'" in forward[0]
        assert "in the old schema does not match with the new schema" in forward[0]
        assert error_types(check_compatibility("FULL", new, [old])) == ["TYPE_MISMATCH"]


def test_a_logical_type_resolves_by_its_underlying_type() -> None:
    date = {"type": "int", "logicalType": "date"}
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    assert reads(millis, date) == []
    assert error_types(reads(date, millis)) == ["TYPE_MISMATCH"]


# --- resolution: records -------------------------------------------------------------------


def test_a_reader_field_missing_in_the_writer_needs_a_default() -> None:
    old = record("R", field("a", "int"))
    new = record("R", field("a", "int"), field("b", "string"))
    problems = reads(new, old)
    assert problems == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'b'}"
    ]
    with_default = record("R", field("a", "int"), field("b", "string", default=""))
    assert reads(with_default, old) == []


def test_a_writer_field_missing_in_the_reader_is_ignored() -> None:
    old = record("R", field("a", "int"), field("b", "string"))
    new = record("R", field("a", "int"))
    assert reads(new, old) == []
    # ... but the other way round the old reader misses it.
    problems = check_compatibility("FORWARD", avro(new), [avro(old)])
    assert problems == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path "
        "'/fields/1' in the old schema has no default value and is missing in the new schema', "
        "additionalInfo:'b'}"
    ]


def test_a_field_is_matched_by_the_readers_alias() -> None:
    old = record("R", field("old_name", "int"))
    new = record("R", field("new_name", "int", aliases=["old_name"]))
    assert reads(new, old) == []
    assert error_types(reads(record("R", field("new_name", "int")), old)) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE"
    ]


def test_field_types_are_checked_at_their_path() -> None:
    old = record("R", field("a", "int"), field("inner", record("I", field("x", "string"))))
    new = record("R", field("a", "int"), field("inner", record("I", field("x", "int"))))
    problems = reads(new, old)
    assert error_types(problems) == ["TYPE_MISMATCH"]
    assert "path '/fields/1/type/fields/0/type'" in problems[0]


def test_every_problem_is_reported() -> None:
    old = record("R", field("a", "int"), field("b", "string"))
    new = record("R", field("a", "string"), field("b", "int"), field("c", "long"))
    assert error_types(reads(new, old)) == [
        "TYPE_MISMATCH",
        "TYPE_MISMATCH",
        "READER_FIELD_MISSING_DEFAULT_VALUE",
    ]


def test_a_recursive_record_is_compatible_with_itself() -> None:
    node = record("Node", field("value", "int"), field("next", ["null", "Node"], default=None))
    assert reads(node, node) == []
    grown = record(
        "Node",
        field("value", "int"),
        field("next", ["null", "Node"], default=None),
        field("label", "string", default=""),
    )
    assert reads(grown, node) == []
    assert error_types(reads(node, record("Node", field("value", "string")))) == ["TYPE_MISMATCH"]


# --- resolution: names ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["record", "enum", "fixed"])
def test_named_types_must_have_the_same_name(kind: str) -> None:
    def named(name: str) -> dict[str, Any]:
        if kind == "record":
            return record(name, field("a", "int"))
        if kind == "enum":
            return {"type": "enum", "name": name, "symbols": ["A"]}
        return {"type": "fixed", "name": name, "size": 4}

    problems = reads(named("New"), named("Old"))
    assert error_types(problems) == ["NAME_MISMATCH"]
    assert "The name of the schema has changed (path '/name')" in problems[0]
    assert "expected: Old" in problems[0]
    # An alias of the reader naming the writer resolves them.
    assert reads({**named("New"), "aliases": ["Old"]}, named("Old")) == []


def test_names_match_unqualified() -> None:
    old = record("R", field("a", "int"), namespace="com.old")
    new = record("R", field("a", "int"), namespace="com.new")
    assert reads(new, old) == []


def test_an_alias_is_qualified_by_the_types_namespace() -> None:
    old = record("Old", field("a", "int"), namespace="com.acme")
    new = record("New", field("a", "int"), namespace="com.acme", aliases=["Old"])
    assert reads(new, old) == []


# --- resolution: enums, fixed, arrays, maps -----------------------------------------------


def test_a_writer_symbol_missing_in_the_reader_enum() -> None:
    old = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    new = {"type": "enum", "name": "E", "symbols": ["A"]}
    problems = reads(new, old)
    assert problems == [
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols "
        "'[B, C]' at path '/symbols' in the old schema', additionalInfo:'[B, C]'}"
    ]
    # A symbol added is fine for a new reader; an old reader misses it.
    assert reads(old, new) == []
    assert error_types(check_compatibility("FORWARD", avro(old), [avro(new)])) == [
        "MISSING_ENUM_SYMBOLS"
    ]


def test_an_enum_default_covers_unknown_symbols() -> None:
    old = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
    new = {"type": "enum", "name": "E", "symbols": ["A", "UNKNOWN"], "default": "UNKNOWN"}
    assert reads(new, old) == []


def test_fixed_sizes_must_match() -> None:
    problems = reads(
        {"type": "fixed", "name": "F", "size": 8}, {"type": "fixed", "name": "F", "size": 4}
    )
    assert error_types(problems) == ["FIXED_SIZE_MISMATCH"]
    assert "path '/size'" in problems[0]
    assert "expected: 4, found: 8" in problems[0]


def test_arrays_resolve_by_items_and_maps_by_values() -> None:
    assert reads({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) == []
    problems = reads({"type": "array", "items": "int"}, {"type": "array", "items": "long"})
    assert error_types(problems) == ["TYPE_MISMATCH"]
    assert "path '/items'" in problems[0]
    assert reads({"type": "map", "values": "double"}, {"type": "map", "values": "float"}) == []
    problems = reads({"type": "map", "values": "int"}, {"type": "map", "values": "string"})
    assert "path '/values'" in problems[0]
    assert error_types(
        reads({"type": "map", "values": "int"}, {"type": "array", "items": "int"})
    ) == ["TYPE_MISMATCH"]


# --- resolution: unions --------------------------------------------------------------------


def test_each_writer_branch_must_resolve_in_the_reader_union() -> None:
    assert reads(["null", "string", "int"], ["null", "string"]) == []
    problems = reads(["null", "string"], ["null", "string", "int"])
    assert error_types(problems) == ["MISSING_UNION_BRANCH"]
    assert "reader union lacking writer type: INT" in problems[0]
    assert "path '/2'" in problems[0]


def test_a_union_branch_may_resolve_by_promotion() -> None:
    assert reads(["null", "long"], ["null", "int"]) == []
    assert reads(["null", "double"], "int") == []


def test_a_non_union_writer_must_match_a_reader_branch() -> None:
    assert reads(["null", "string"], "string") == []
    problems = reads(["null", "string"], "int")
    assert error_types(problems) == ["MISSING_UNION_BRANCH"]


def test_a_union_writer_against_a_non_union_reader() -> None:
    assert reads("long", ["int", "long"]) == []
    assert error_types(reads("string", ["null", "string"])) == ["MISSING_UNION_BRANCH"]


def test_making_a_field_optional() -> None:
    old = record("R", field("a", "string"))
    new = record("R", field("a", ["null", "string"], default=None))
    assert check_compatibility("BACKWARD", avro(new), [avro(old)]) == []
    assert error_types(check_compatibility("FORWARD", avro(new), [avro(old)])) == [
        "MISSING_UNION_BRANCH"
    ]
