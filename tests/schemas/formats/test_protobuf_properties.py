"""Hypothesis: generated .proto files keep their meaning through every form the registry uses."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.schemas.formats import LEVELS, check_compatibility, parse_schema
from seglog.schemas.formats.protobuf import ProtobufSchema

SCALARS = [
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
    "sfixed32", "sfixed64", "float", "double", "bool", "string", "bytes",
]  # fmt: skip
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@dataclass
class Message:
    name: str
    fields: list[tuple[str, str, str]]  # (label, type, name); numbered in order
    nested: list[Message]
    oneof: list[tuple[str, str]]  # (type, name)

    def render(self, gap: str) -> str:
        number = 0
        lines = []
        for label, type_, name in self.fields:
            number += 1
            lines.append(f"{label}{type_} f_{name}_{number} = {number};")
        if self.oneof:
            members = []
            for type_, name in self.oneof:
                number += 1
                members.append(f"{type_} o_{name}_{number} = {number};")
            lines.append(f"oneof choice {{{gap}{gap.join(members)}{gap}}}")
        lines.extend(n.render(gap) for n in self.nested)
        lines.append(
            f"enum Kind{self.name} {{{gap}K{self.name}_ZERO = 0;{gap}K{self.name}_ONE = 1;}}"
        )
        return f"message {self.name} {{{gap}{gap.join(lines)}{gap}}}"


def _messages(depth: int, prefix: str) -> st.SearchStrategy[Message]:
    field = st.tuples(
        st.sampled_from(["", "repeated ", "optional "]),
        st.one_of(st.sampled_from(SCALARS), st.just("map<string, int64>")),
        NAMES,
    ).map(lambda f: ("", *f[1:]) if f[1].startswith("map") else f)
    nested = st.lists(_messages(depth - 1, prefix + "N"), max_size=2) if depth > 0 else st.just([])
    return st.builds(
        lambda fields, children, oneof: Message(
            prefix,
            fields,
            [Message(f"{c.name}{i}", c.fields, c.nested, c.oneof) for i, c in enumerate(children)],
            oneof,
        ),
        st.lists(field, max_size=5),
        nested,
        st.lists(st.tuples(st.sampled_from(SCALARS), NAMES), max_size=3),
    )


files = st.builds(
    lambda package, messages, gap: (
        f'syntax = "proto3";{gap}package {package};{gap}'
        + gap.join(
            Message(f"{m.name}{i}", m.fields, m.nested, m.oneof).render(gap)
            for i, m in enumerate(messages)
        )
    ),
    NAMES,
    st.lists(_messages(2, "M"), min_size=1, max_size=3),
    st.sampled_from([" ", "\n", "\n  ", "\t\n\n "]),
)


def proto(text: str) -> ProtobufSchema:
    parsed = parse_schema("PROTOBUF", text)
    assert isinstance(parsed, ProtobufSchema)
    return parsed


@settings(max_examples=60)
@given(files)
def test_text_canonical_base64_and_normalized_forms_agree(text: str) -> None:
    schema = proto(text)
    canonical = proto(schema.canonical())
    assert canonical.canonical() == schema.canonical()
    assert canonical.file_descriptor == schema.file_descriptor
    # The same file with all its layout changed has the same canonical text.
    assert proto(" \n".join(text.split(" "))).canonical() == schema.canonical()
    from_base64 = proto(schema.serialized())
    assert from_base64.file_descriptor == schema.file_descriptor
    normalized = schema.normalize()
    assert proto(normalized.canonical()).normalize().canonical() == normalized.canonical()


@settings(max_examples=60)
@given(files)
def test_every_file_is_compatible_with_itself_at_every_level(text: str) -> None:
    schema = proto(text)
    as_base64 = proto(schema.serialized())
    for level in LEVELS:
        assert check_compatibility(level, schema, [as_base64, schema]) == []
        assert check_compatibility(level, schema.normalize(), [schema]) == []
