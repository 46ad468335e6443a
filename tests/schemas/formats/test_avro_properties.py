"""Hypothesis: every Avro schema is compatible with itself, and its texts are stable."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.schemas.formats import LEVELS, check_compatibility, parse_schema
from seglog.schemas.formats.avro import AvroSchema

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
NAMESPACES = st.sampled_from([None, "com.acme", "org.example.deep", ""])
DOCS = st.one_of(st.none(), st.text(max_size=10))

# A default value for each primitive, so that some fields carry one.
DEFAULTS: dict[str, Any] = {
    "null": None,
    "boolean": False,
    "int": 1,
    "long": 2,
    "float": 1.5,
    "double": 2.5,
    "bytes": "\u00ff",
    "string": "x",
}


def _with(node: dict[str, Any], **maybe: Any) -> dict[str, Any]:
    return {**node, **{k: v for k, v in maybe.items() if v is not None}}


primitive = st.one_of(
    st.sampled_from(PRIMITIVES),
    st.sampled_from(PRIMITIVES).map(lambda p: {"type": p}),
    st.just({"type": "int", "logicalType": "date"}),
    st.just({"type": "long", "logicalType": "timestamp-millis"}),
)
enum = st.builds(
    lambda symbols, ns, doc, default: _with(
        {"type": "enum", "name": "?", "symbols": symbols},
        namespace=ns,
        doc=doc,
        default=symbols[0] if default else None,
    ),
    st.lists(
        st.from_regex(r"[A-Z][A-Z0-9_]{0,4}", fullmatch=True), min_size=1, max_size=4, unique=True
    ),
    NAMESPACES,
    DOCS,
    st.booleans(),
)
fixed = st.builds(
    lambda size, ns: _with({"type": "fixed", "name": "?", "size": size}, namespace=ns),
    st.integers(0, 16),
    NAMESPACES,
)


def _field(name: str, schema: Any, default: bool, doc: str | None) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name, "type": schema}
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if default and isinstance(kind, str) and kind in DEFAULTS:
        node["default"] = DEFAULTS[kind]
    return _with(node, doc=doc)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    non_union = children.filter(lambda c: not isinstance(c, list))
    records = st.builds(
        lambda fields, ns, doc: _with(
            {
                "type": "record",
                "name": "?",
                "fields": [_field(f"f{i}", s, d, fd) for i, (s, d, fd) in enumerate(fields)],
            },
            namespace=ns,
            doc=doc,
        ),
        st.lists(st.tuples(children, st.booleans(), DOCS), max_size=4),
        NAMESPACES,
        DOCS,
    )
    unions = st.builds(
        lambda prims, extra: [*prims, *extra],
        st.lists(st.sampled_from(PRIMITIVES), min_size=1, max_size=3, unique=True),
        st.lists(
            st.one_of(
                non_union.filter(lambda c: isinstance(c, dict) and c.get("type") == "record"),
                enum,
            ),
            max_size=2,
        ),
    )
    return st.one_of(
        records,
        st.builds(lambda items: {"type": "array", "items": items}, non_union),
        st.builds(lambda values: {"type": "map", "values": values}, non_union),
        unions,
    )


def _name_all(node: Any, counter: itertools.count[int]) -> Any:
    """Give every named type a name of its own (the strategies leave "?")."""
    if isinstance(node, list):
        return [_name_all(n, counter) for n in node]
    if not isinstance(node, dict):
        return node
    result = dict(node)
    if result.get("name") == "?":
        result["name"] = f"T{next(counter)}"
    for key in ("fields", "items", "values"):
        if key in result:
            result[key] = _name_all(result[key], counter)
    if "type" in result and not isinstance(result["type"], str):
        result["type"] = _name_all(result["type"], counter)
    return result


schemas = st.recursive(st.one_of(primitive, enum, fixed), _extend, max_leaves=12).map(
    lambda s: _name_all(s, itertools.count())
)


def parse(document: Any) -> AvroSchema:
    parsed = parse_schema("AVRO", json.dumps(document))
    assert isinstance(parsed, AvroSchema)
    return parsed


@settings(max_examples=150)
@given(schemas)
def test_every_schema_is_compatible_with_itself_at_every_level(document: Any) -> None:
    schema = parse(document)
    again = parse(document)
    for level in LEVELS:
        assert check_compatibility(level, schema, [again]) == []
        assert check_compatibility(level, schema, [again, again, schema]) == []


@settings(max_examples=150)
@given(schemas)
def test_canonical_text_is_stable(document: Any) -> None:
    schema = parse(document)
    canonical = schema.canonical()
    assert parse(json.loads(canonical)).canonical() == canonical


@settings(max_examples=150)
@given(schemas)
def test_normalized_text_is_stable_and_compatible(document: Any) -> None:
    schema = parse(document)
    normalized = schema.normalize().canonical()
    reparsed = parse(json.loads(normalized))
    assert reparsed.normalize().canonical() == normalized
    assert reparsed.canonical() == normalized
    assert check_compatibility("FULL", reparsed, [schema]) == []
