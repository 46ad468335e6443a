"""The seven compatibility levels, over Avro schemas whose compatibility the specification fixes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from seglog.schemas.formats import LEVELS, ParsedSchema, check_compatibility, parse_schema


def avro(*fields: dict[str, Any]) -> ParsedSchema:
    return parse_schema("AVRO", json.dumps({"type": "record", "name": "R", "fields": list(fields)}))


A = {"name": "a", "type": "int"}
B_REQUIRED = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}


def compatible(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> bool:
    return check_compatibility(level, new, previous) == []


def test_levels_are_the_registrys_seven() -> None:
    assert set(LEVELS) == {
        "NONE",
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
    }


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="SIDEWAYS"):
        check_compatibility("SIDEWAYS", avro(A), [avro(A)])


@pytest.mark.parametrize("level", LEVELS)
def test_no_previous_version_is_always_compatible(level: str) -> None:
    assert check_compatibility(level, avro(A), []) == []


def test_adding_a_required_field() -> None:
    old, new = avro(A), avro(A, B_REQUIRED)
    # The new reader finds no b in old data; the old reader skips b in new data.
    assert {level: compatible(level, new, [old]) for level in LEVELS} == {
        "NONE": True,
        "BACKWARD": False,
        "BACKWARD_TRANSITIVE": False,
        "FORWARD": True,
        "FORWARD_TRANSITIVE": True,
        "FULL": False,
        "FULL_TRANSITIVE": False,
    }


def test_removing_a_required_field() -> None:
    old, new = avro(A, B_REQUIRED), avro(A)
    assert {level: compatible(level, new, [old]) for level in LEVELS} == {
        "NONE": True,
        "BACKWARD": True,
        "BACKWARD_TRANSITIVE": True,
        "FORWARD": False,
        "FORWARD_TRANSITIVE": False,
        "FULL": False,
        "FULL_TRANSITIVE": False,
    }


def test_adding_and_removing_a_field_with_a_default_is_fully_compatible() -> None:
    for old, new in [(avro(A), avro(A, B_DEFAULT)), (avro(A, B_DEFAULT), avro(A))]:
        assert all(compatible(level, new, [old]) for level in LEVELS)


def test_backward_transitive_sees_past_the_bridge() -> None:
    # v2 adds b with a default, v3 drops the default: v3 reads v2's data (it has b) but not
    # v1's (no b, and no default to fill it in).
    v1, v2, v3 = avro(A), avro(A, B_DEFAULT), avro(A, B_REQUIRED)
    assert compatible("BACKWARD", v3, [v1, v2])
    problems = check_compatibility("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert len(problems) == 1
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in problems[0]
    assert "in the new schema has no default value and is missing in the old schema" in problems[0]
    assert compatible("BACKWARD_TRANSITIVE", v3, [v2])


def test_forward_transitive_sees_past_the_bridge() -> None:
    # v1 requires b, v2 gives it a default, v3 drops it: v2 reads v3's data (default), v1 not.
    v1, v2, v3 = avro(A, B_REQUIRED), avro(A, B_DEFAULT), avro(A)
    assert compatible("FORWARD", v3, [v1, v2])
    problems = check_compatibility("FORWARD_TRANSITIVE", v3, [v1, v2])
    assert len(problems) == 1
    assert "in the old schema has no default value and is missing in the new schema" in problems[0]


def test_full_transitive_sees_past_the_bridge() -> None:
    v1, v2, v3 = avro(A), avro(A, B_DEFAULT), avro(A, B_REQUIRED)
    assert compatible("FULL", v3, [v1, v2])
    assert not compatible("FULL_TRANSITIVE", v3, [v1, v2])


def test_non_transitive_levels_ignore_all_but_the_last() -> None:
    v1 = avro({"name": "a", "type": "string"})
    v2, v3 = avro(A), avro(A)
    for level in ("BACKWARD", "FORWARD", "FULL"):
        assert compatible(level, v3, [v1, v2])
        assert not compatible(f"{level}_TRANSITIVE", v3, [v1, v2])


def test_full_reports_both_directions() -> None:
    old = avro(A, {"name": "c", "type": "long"})
    new = avro({"name": "a", "type": "long"}, B_REQUIRED)
    problems = check_compatibility("FULL", new, [old])
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in p and "'b'" in p for p in problems)
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in p and "'c'" in p for p in problems)
    assert any("TYPE_MISMATCH" in p for p in problems)


def test_schemas_of_different_types_are_incompatible() -> None:
    json_schema = parse_schema("JSON", '{"type": "object"}')
    problems = check_compatibility("BACKWARD", json_schema, [avro(A)])
    assert len(problems) == 1
    assert "JSON" in problems[0] and "AVRO" in problems[0]
    assert check_compatibility("NONE", json_schema, [avro(A)]) == []
