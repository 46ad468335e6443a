"""Hypothesis: every JSON Schema is compatible with itself, and its texts are stable."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.schemas.formats import LEVELS, check_compatibility, parse_schema

TYPES = ["string", "integer", "number", "boolean", "null"]
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)

leaf = st.one_of(
    st.just({}),
    st.booleans(),
    st.builds(lambda t: {"type": t}, st.sampled_from(TYPES)),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(TYPES), min_size=1, unique=True)),
    st.builds(
        lambda lo, hi: {"type": "string", "minLength": lo, "maxLength": lo + hi},
        st.integers(0, 5),
        st.integers(0, 5),
    ),
    st.builds(lambda lo: {"type": "number", "minimum": lo, "multipleOf": 0.5}, st.integers(-9, 9)),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a", "b$", "[0-9]+"])),
    st.builds(
        lambda vs: {"enum": vs},
        st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), min_size=1, unique=True),
    ),
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = st.builds(
        lambda props, required, extra, patterns: {
            "type": "object",
            "properties": props,
            "required": [n for n in props if n in required],
            **({} if extra is None else {"additionalProperties": extra}),
            **({"patternProperties": patterns} if patterns else {}),
        },
        st.dictionaries(NAMES, children, max_size=4),
        st.sets(NAMES, max_size=3),
        st.one_of(st.none(), st.booleans(), children),
        st.dictionaries(st.sampled_from(["^a", "_x$", "[0-9]"]), children, max_size=2),
    )
    arrays = st.builds(
        lambda items, unique: {"type": "array", "items": items, "uniqueItems": unique},
        children,
        st.booleans(),
    )
    combined = st.builds(
        lambda kind, branches: {kind: branches},
        st.sampled_from(["oneOf", "anyOf", "allOf"]),
        st.lists(children, min_size=1, max_size=3),
    )
    return st.one_of(objects, arrays, combined)


schemas = st.recursive(leaf, _extend, max_leaves=10)


@settings(max_examples=150)
@given(schemas)
def test_every_schema_is_compatible_with_itself_at_every_level(document: Any) -> None:
    schema = parse_schema("JSON", json.dumps(document))
    for level in LEVELS:
        assert check_compatibility(level, schema, [schema, schema]) == []


@settings(max_examples=150)
@given(schemas)
def test_canonical_and_normalized_texts_are_stable(document: Any) -> None:
    schema = parse_schema("JSON", json.dumps(document))
    canonical = schema.canonical()
    assert parse_schema("JSON", canonical).canonical() == canonical
    normalized = schema.normalize().canonical()
    assert parse_schema("JSON", normalized).normalize().canonical() == normalized
    assert check_compatibility("FULL", parse_schema("JSON", normalized), [schema]) == []
