"""The typed bodies of ``protocol/bodies/``: current with the tables, and true to the codec."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from seglog import gen_bodies
from seglog.protocol import entries, error_codes
from seglog.protocol.bodies import FAMILIES
from seglog.protocol.bodies.fetch import FetchResponseResponsesPartitions
from seglog.protocol.bodies.metadata import MetadataResponseTopics
from seglog.protocol.bodies.produce import (
    ProduceRequest,
    ProduceResponseResponsesPartitionResponses,
)
from seglog.protocol.messages import ALL
from seglog.protocol.schema import Field, decode, encode

BODIES = Path(gen_bodies.__file__).parent / "protocol" / "bodies"


def test_the_generated_bodies_match_the_tables() -> None:
    rendered = gen_bodies.render()
    on_disk = {path.name for path in BODIES.glob("*.py")}
    assert on_disk == set(rendered), f"run {gen_bodies.COMMAND}"
    for name, text in rendered.items():
        assert (BODIES / name).read_text(encoding="utf-8") == text, (
            f"protocol/bodies/{name} is out of date: run {gen_bodies.COMMAND}"
        )


def _types() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"seglog.protocol.bodies.{family}")
        found.update(
            (name, value)
            for name, value in vars(module).items()
            if isinstance(value, type) and hasattr(value, "__required_keys__")
        )
    return found


def _structs(direction: str) -> list[tuple[str, int, str, tuple[Field, ...]]]:
    """Every struct of every API in one direction: (generated name, key, path, fields)."""
    out = []

    def walk(name: str, key: int, path: str, fields: tuple[Field, ...]) -> None:
        out.append((entries.struct_name(name, direction, path), key, path, fields))
        for f in fields:
            if f.item_type == "struct":
                walk(name, key, f"{path}.{f.name}" if path else f.name, f.fields)

    for api in ALL:
        message = api.request if direction == "request" else api.response
        walk(api.name, api.key, "", message.fields)
    return out


@pytest.mark.parametrize("direction", ["request", "response"])
def test_every_struct_has_a_type_with_the_codec_keys(direction: str) -> None:
    types = _types()
    for name, _key, path, fields in _structs(direction):
        kind = types[name]
        keys = kind.__required_keys__ | kind.__optional_keys__
        assert keys <= {f.name for f in fields}, (name, path)
    for api in ALL:
        # A body's type has every field of some described version, under the codec's name.
        message = api.request if direction == "request" else api.response
        kind = types[entries.struct_name(api.name, direction, "")]
        low, high = api.versions
        names = {f.name for f in message.fields if f.versions[0] <= high and f.versions[1] >= low}
        assert kind.__required_keys__ | kind.__optional_keys__ == names, api.name


def test_a_decoded_body_holds_every_key_of_its_type() -> None:
    types = _types()
    for api in ALL:
        for version in range(api.min_version, api.max_version + 1):
            body = decode(api.request, version, encode(api.request, version, {}))
            kind = types[entries.struct_name(api.name, "request", "")]
            assert kind.__required_keys__ <= set(body), (api.name, version)


def test_fields_of_some_versions_only_are_not_required() -> None:
    # A field of every version must be given when an entry is built by hand: this is
    # how a Fetch partition without records is found by mypy rather than by a client.
    assert "records" in FetchResponseResponsesPartitions.__required_keys__
    assert ProduceResponseResponsesPartitionResponses.__required_keys__ == {
        "index",
        "error_code",
        "base_offset",
    }
    assert "log_start_offset" in ProduceResponseResponsesPartitionResponses.__optional_keys__
    # Tagged fields are sent only when not at their default.
    assert "current_leader" in ProduceResponseResponsesPartitionResponses.__optional_keys__
    assert ProduceRequest.__optional_keys__ == {"transactional_id"}


def test_failed_as_builds_the_entry_of_the_type() -> None:
    code = error_codes.code_for("TOPIC_AUTHORIZATION_FAILED")
    topic = entries.failed_as(MetadataResponseTopics, code, name="t")
    assert topic == entries.failed(3, "topics", code, name="t")
    partition = entries.failed_as(FetchResponseResponsesPartitions, code, partition_index=2)
    assert partition["records"] == b""
    assert partition["high_watermark"] == -1
    with pytest.raises(ValueError, match="no field"):
        entries.failed_as(MetadataResponseTopics, code, nmae="t")
    with pytest.raises(ValueError, match="not a generated response type"):
        entries.entry_as(ProduceRequest)


def test_every_response_type_is_found_by_failed_as() -> None:
    for name, key, path, _fields in _structs("response"):
        kind = _types()[name]
        assert entries.entry_as(kind) == entries.entry(key, path)
