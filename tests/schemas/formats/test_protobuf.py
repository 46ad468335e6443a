"""Protobuf: .proto text and base64 descriptors, references, and the registry's rules."""

from __future__ import annotations

import base64
import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType

import grpc_tools
import pytest
from confluent_kafka.schema_registry.common.protobuf import _schema_to_str
from google.protobuf import descriptor_pb2, timestamp_pb2
from grpc_tools import protoc

from seglog.schemas.formats import InvalidSchemaError, check_compatibility, parse_schema
from seglog.schemas.formats.protobuf import ProtobufSchema


def proto(text: str, references: dict[str, str] | None = None) -> ProtobufSchema:
    parsed = parse_schema("PROTOBUF", text, references or {})
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def nameless(fdp: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(fdp)
    copy.ClearField("name")
    return copy


def problems(level: str, new: str, old: str) -> list[str]:
    return check_compatibility(level, proto(new), [proto(old)])


def error_types(found: list[str]) -> list[str]:
    return [p.split("'")[1] for p in found]


USER = """
syntax = "proto3";
package acme;

import "google/protobuf/timestamp.proto";

// A user of the system.
message User {
  int64 id = 1;
  string name = 2;
  repeated string tags = 3;
  map<string, int32> counts = 4;
  google.protobuf.Timestamp created = 5;
  Kind kind = 6;
  oneof contact { string email = 7; string phone = 8; }
  enum Kind { KIND_UNSPECIFIED = 0; ADMIN = 1; }
}
"""


# --- parsing ------------------------------------------------------------------------------


def test_text_and_the_well_known_types_own_descriptor_are_equal() -> None:
    """protoc's text of timestamp.proto compiles to the descriptor protobuf's module carries."""
    text = Path(grpc_tools.__file__).parent.joinpath("_proto/google/protobuf/timestamp.proto")
    from_text = proto(text.read_text(encoding="utf-8"))
    from_module = proto(base64.b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode())
    assert nameless(from_text.file_descriptor) == nameless(from_module.file_descriptor)
    assert from_module.file_descriptor.name == "google/protobuf/timestamp.proto"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ModuleType]:
    """A user's .proto compiled by protoc into a _pb2 module, imported as a user would."""
    root = tmp_path_factory.mktemp("generated")
    stem = f"user_{uuid.uuid4().hex}"
    # A package of its own: the module registers its file in the process's default pool.
    text = USER.replace("package acme;", f"package {stem};")
    (root / f"{stem}.proto").write_text(text, encoding="utf-8")
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    assert (
        protoc.main(
            ["protoc", f"-I{root}", f"-I{include}", f"--python_out={root}", f"{stem}.proto"]
        )
        == 0
    )
    spec = importlib.util.spec_from_file_location(f"{stem}_pb2", root / f"{stem}_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return text, module


def test_text_and_what_the_python_serializer_registers_are_equal(
    generated: tuple[str, ModuleType],
) -> None:
    text, module = generated
    # What confluent-kafka's ProtobufSerializer sends for a message of this module.
    registered = _schema_to_str(module.DESCRIPTOR)
    from_base64 = proto(registered)
    from_text = proto(text)
    assert nameless(from_base64.file_descriptor) == nameless(from_text.file_descriptor)
    assert list(from_text.file_descriptor.dependency) == ["google/protobuf/timestamp.proto"]
    # serialized() of the text is, but for the file's name, what the serializer sent.
    assert from_base64.serialized() == registered
    renamed = nameless(
        descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(from_text.serialized()))
    )
    assert renamed == nameless(from_base64.file_descriptor)


def test_canonical_text_ignores_whitespace() -> None:
    tight = 'syntax="proto3";package acme;message A{int32 f=1;string s=2;}'
    spaced = (
        '\n  syntax = "proto3" ;\n\n package  acme;\n'
        "message A {\n  int32 f = 1;\n  string s = 2;\n}\n"
    )
    assert proto(spaced).canonical() == proto(tight).canonical() == tight
    assert proto(proto(USER).canonical()).canonical() == proto(USER).canonical()


def test_base64_split_over_lines_is_the_same_schema() -> None:
    encoded = proto(V1).serialized()
    wrapped = "\n".join(encoded[i : i + 20] for i in range(0, len(encoded), 20))
    assert proto(wrapped).canonical() == proto(encoded).canonical() == encoded
    assert proto(wrapped).file_descriptor == proto(V1).file_descriptor


def test_canonical_text_keeps_string_literals_and_comments() -> None:
    text = 'syntax = "proto3";\n// one  comment\nmessage A { string s = 1 [json_name = "a  b"]; }'
    canonical = proto(text).canonical()
    assert '"a  b"' in canonical
    assert "// one  comment\n" in canonical
    assert proto(canonical).file_descriptor == proto(text).file_descriptor


def test_normalize_orders_fields_by_number() -> None:
    one = (
        'syntax = "proto3"; message A { int32 b = 2; int32 a = 1; enum E { X = 0; Z = 2; Y = 1; } }'
    )
    two = (
        'syntax = "proto3"; message A { int32 a = 1; int32 b = 2; enum E { X = 0; Y = 1; Z = 2; } }'
    )
    assert proto(one).canonical() != proto(two).canonical()
    assert proto(one).normalize().canonical() == proto(two).normalize().canonical()
    normalized = proto(proto(one).normalize().canonical())
    assert [f.number for f in normalized.file_descriptor.message_type[0].field] == [1, 2]


def test_a_text_reference_is_imported() -> None:
    address = 'syntax = "proto3"; package acme; message Address { string street = 1; }'
    user = (
        'syntax = "proto3"; package acme; import "acme/address.proto";'
        " message User { Address home = 1; }"
    )
    parsed = proto(user, {"acme/address.proto": address})
    assert list(parsed.file_descriptor.dependency) == ["acme/address.proto"]
    assert parsed.file_descriptor.message_type[0].field[0].type_name == ".acme.Address"
    assert parsed.pool.FindMessageTypeByName("acme.User").fields[0].message_type.full_name == (
        "acme.Address"
    )


def test_a_base64_reference_is_imported_by_text_and_by_base64() -> None:
    address = proto('syntax = "proto3"; package acme; message Address { string street = 1; }')
    refs = {"address.proto": address.serialized()}
    user = (
        'syntax = "proto3"; package acme; import "address.proto"; message User { Address a = 1; }'
    )
    from_text = proto(user, refs)
    assert from_text.file_descriptor.message_type[0].field[0].type_name == ".acme.Address"
    from_base64 = proto(from_text.serialized(), refs)
    assert nameless(from_base64.file_descriptor) == nameless(from_text.file_descriptor)


def test_references_chain_dependencies_first() -> None:
    refs = {
        "a.proto": 'syntax = "proto3"; package p; message A { int32 x = 1; }',
        "b.proto": 'syntax = "proto3"; package p; import "a.proto"; message B { A a = 1; }',
    }
    parsed = proto('syntax = "proto3"; package p; import "b.proto"; message C { B b = 1; }', refs)
    assert set(parsed.dependencies) == {"a.proto", "b.proto"}


def test_a_builtin_without_text_in_protoc_is_imported() -> None:
    parsed = proto(
        'syntax = "proto3"; import "google/type/date.proto"; message A { google.type.Date d = 1; }'
    )
    assert list(parsed.file_descriptor.dependency) == ["google/type/date.proto"]


def test_a_text_reference_importing_a_builtin_without_text() -> None:
    refs = {
        "when.proto": 'syntax = "proto3"; import "google/type/date.proto";'
        " message W { google.type.Date d = 1; }"
    }
    parsed = proto('syntax = "proto3"; import "when.proto"; message A { W w = 1; }', refs)
    assert list(parsed.file_descriptor.dependency) == ["when.proto"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('syntax = "proto3"; message A { int32 f = 1 }', "schema.proto:1:"),
        ('syntax = "proto3"; message A { Nope f = 1; }', '"Nope" is not defined'),
        ('syntax = "proto3"; message A { int32 f = 1; int32 g = 1; }', "already been used"),
        ('syntax = "proto3"; import "missing.proto"; message A { int32 f = 1; }', "missing.proto"),
    ],
)
def test_invalid_text_says_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid Protobuf schema") as caught:
        proto(text)
    assert words in str(caught.value)


def test_an_invalid_descriptor_says_what_is_wrong() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    msg = fdp.message_type.add(name="A")
    msg.field.add(name="f", number=1, type=11, type_name=".nowhere.B", label=1)
    with pytest.raises(InvalidSchemaError, match=r"nowhere\.B"):
        proto(base64.b64encode(fdp.SerializeToString()).decode())


def test_a_missing_reference_of_a_descriptor_is_named() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto", dependency=["other.proto"])
    with pytest.raises(InvalidSchemaError, match=r"imports 'other\.proto'"):
        proto(base64.b64encode(fdp.SerializeToString()).decode())


def test_an_invalid_reference_is_named() -> None:
    with pytest.raises(InvalidSchemaError, match=r"reference 'a\.proto'"):
        proto('syntax = "proto3"; message B { int32 f = 1; }', {"a.proto": "message {"})


# --- compatibility ---------------------------------------------------------------------------

V1 = 'syntax = "proto3"; package acme; message A { int32 id = 1; string name = 2; }'


@pytest.mark.parametrize("level", ["BACKWARD", "FORWARD", "FULL_TRANSITIVE"])
def test_adding_and_removing_an_optional_field_is_compatible(level: str) -> None:
    added = (
        'syntax = "proto3"; package acme; message A { int32 id = 1; string name = 2; bool x = 3; }'
    )
    removed = 'syntax = "proto3"; package acme; message A { int32 id = 1; }'
    assert problems(level, added, V1) == []
    assert problems(level, removed, V1) == []
    renamed = 'syntax = "proto3"; package acme; message A { int32 key = 1; string label = 2; }'
    assert problems(level, renamed, V1) == []


def test_changing_a_scalar_type_across_wire_groups() -> None:
    new = 'syntax = "proto3"; package acme; message A { string id = 1; string name = 2; }'
    found = problems("BACKWARD", new, V1)
    assert found == [
        "{errorType:'FIELD_SCALAR_KIND_CHANGED', description:'The kind of a SCALAR field at path "
        "'#/A/1' in the new schema does not match its kind in the old schema'}"
    ]


@pytest.mark.parametrize(
    ("old_type", "new_type"),
    [
        ("int32", "int64"),
        ("uint32", "bool"),
        ("string", "bytes"),
        ("sint32", "sint64"),
        ("fixed32", "sfixed32"),
    ],
)
def test_changing_a_scalar_type_within_a_wire_group(old_type: str, new_type: str) -> None:
    old = f'syntax = "proto3"; message A {{ {old_type} f = 1; }}'
    new = f'syntax = "proto3"; message A {{ {new_type} f = 1; }}'
    assert problems("FULL", new, old) == []


def test_changing_the_kind_of_a_field() -> None:
    old = 'syntax = "proto3"; message A { int32 f = 1; } message B { int32 g = 1; }'
    to_message = 'syntax = "proto3"; message A { B f = 1; } message B { int32 g = 1; }'
    assert error_types(problems("BACKWARD", to_message, old)) == ["FIELD_KIND_CHANGED"]


def test_changing_the_message_type_of_a_field() -> None:
    old = 'syntax = "proto3"; message A { B f = 1; } message B { int32 g = 1; } message C {}'
    new = 'syntax = "proto3"; message A { C f = 1; } message B { int32 g = 1; } message C {}'
    found = problems("BACKWARD", new, old)
    assert error_types(found) == ["FIELD_NAMED_TYPE_CHANGED"]
    assert "'C'" in found[0] and "'B'" in found[0]


def test_removing_a_message() -> None:
    old = 'syntax = "proto3"; message A { int32 f = 1; } message B { int32 g = 1; }'
    new = 'syntax = "proto3"; message A { int32 f = 1; }'
    found = problems("BACKWARD", new, old)
    assert found == [
        "{errorType:'MESSAGE_REMOVED', description:'The message at path '#/B' in the old schema "
        "is missing in the new schema'}"
    ]
    # Seen from the other side, the old schema lacks nothing of the new.
    assert problems("BACKWARD", old, new) == []


def test_changing_the_package_alone_changes_nothing() -> None:
    new = V1.replace("package acme;", "package other;")
    assert problems("FULL", new, V1) == []


def test_an_enum_reads_as_a_number() -> None:
    old = 'syntax = "proto3"; message A { int32 f = 1; }'
    new = 'syntax = "proto3"; message A { E f = 1; } enum E { Z = 0; O = 1; }'
    assert problems("FULL", new, old) == []
    fewer = 'syntax = "proto3"; message A { E f = 1; } enum E { Z = 0; }'
    assert problems("FULL", fewer, new) == []


def test_float_and_double_stand_alone() -> None:
    old = 'syntax = "proto3"; message A { float f = 1; }'
    new = 'syntax = "proto3"; message A { double f = 1; }'
    assert error_types(problems("BACKWARD", new, old)) == ["FIELD_SCALAR_KIND_CHANGED"]


def test_a_numeric_field_made_repeated() -> None:
    old = 'syntax = "proto3"; message A { int32 f = 1; string s = 2; M m = 3; } message M {}'
    numeric = (
        'syntax = "proto3"; message A { repeated int32 f = 1; string s = 2; M m = 3; } message M {}'
    )
    found = problems("BACKWARD", numeric, old)
    assert error_types(found) == ["FIELD_NUMERIC_LABEL_CHANGED"]
    assert "#/A/1" in found[0]
    others = (
        'syntax = "proto3";'
        " message A { int32 f = 1; repeated string s = 2; repeated M m = 3; } message M {}"
    )
    assert problems("FULL", others, old) == []


def test_maps_compare_their_keys_and_values() -> None:
    old = 'syntax = "proto3"; message A { map<string, int32> m = 1; }'
    wider = 'syntax = "proto3"; message A { map<string, int64> m = 1; }'
    assert problems("FULL", wider, old) == []
    changed = 'syntax = "proto3"; message A { map<string, string> m = 1; }'
    assert error_types(problems("BACKWARD", changed, old)) == ["FIELD_SCALAR_KIND_CHANGED"]
    not_a_map = 'syntax = "proto3"; message A { repeated string m = 1; }'
    assert error_types(problems("BACKWARD", not_a_map, old)) == ["FIELD_KIND_CHANGED"]


def test_nested_messages_are_compared_by_name_within_the_package() -> None:
    old = 'syntax = "proto3"; package p; message A { message B { int32 x = 1; } B b = 1; }'
    new = 'syntax = "proto3"; package p; message A { message B { string x = 1; } B b = 1; }'
    found = problems("BACKWARD", new, old)
    assert error_types(found) == ["FIELD_SCALAR_KIND_CHANGED"]
    assert "#/A.B/1" in found[0]


def test_removing_a_oneof_field() -> None:
    old = 'syntax = "proto3"; message A { oneof o { string a = 1; int32 b = 2; } }'
    new = 'syntax = "proto3"; message A { oneof o { string a = 1; } }'
    assert error_types(problems("BACKWARD", new, old)) == ["ONEOF_FIELD_REMOVED"]
    # A proto3 optional field is in a oneof of its own that nobody wrote.
    optional = 'syntax = "proto3"; message A { optional string a = 1; int32 b = 2; }'
    assert problems("BACKWARD", 'syntax = "proto3"; message A { int32 b = 2; }', optional) == []


def test_required_fields_in_proto2() -> None:
    old = 'syntax = "proto2"; message A { required int32 id = 1; }'
    added = 'syntax = "proto2"; message A { required int32 id = 1; required string s = 2; }'
    assert error_types(problems("BACKWARD", added, old)) == ["REQUIRED_FIELD_ADDED"]
    removed = 'syntax = "proto2"; message A { optional string s = 2; }'
    assert error_types(problems("BACKWARD", removed, old)) == ["REQUIRED_FIELD_REMOVED"]
    optional_added = (
        'syntax = "proto2"; message A { required int32 id = 1; optional string s = 2; }'
    )
    assert problems("FULL", optional_added, old) == []


def test_moving_fields_into_a_oneof() -> None:
    old = 'syntax = "proto3"; message A { string a = 1; string b = 2; oneof o { string c = 3; } }'
    one_new = (
        'syntax = "proto3"; message A { string b = 2; oneof o { string c = 3; string a = 1; } }'
    )
    assert error_types(problems("BACKWARD", one_new, old)) == ["FIELD_MOVED_TO_EXISTING_ONEOF"]
    two_new = (
        'syntax = "proto3"; message A {'
        " oneof n { string a = 1; string b = 2; } oneof o { string c = 3; } }"
    )
    assert error_types(problems("BACKWARD", two_new, old)) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
    one_to_new = (
        'syntax = "proto3"; message A {'
        " string b = 2; oneof n { string a = 1; } oneof o { string c = 3; } }"
    )
    assert problems("BACKWARD", one_to_new, old) == []


def test_messages_from_references_are_compared() -> None:
    user = 'syntax = "proto3"; import "address.proto"; message User { acme.Address home = 1; }'
    v1 = 'syntax = "proto3"; package acme; message Address { string street = 1; }'
    v2 = 'syntax = "proto3"; package acme; message Address { string street = 1; int32 zip = 2; }'
    v3 = 'syntax = "proto3"; package acme; message Address { int64 street = 1; }'
    old = proto(user, {"address.proto": v1})
    assert check_compatibility("FULL", proto(user, {"address.proto": v2}), [old]) == []
    found = check_compatibility("BACKWARD", proto(user, {"address.proto": v3}), [old])
    assert error_types(found) == ["FIELD_SCALAR_KIND_CHANGED"]
    assert "#/Address/1" in found[0]


def test_a_schema_is_compatible_with_itself_and_its_base64(
    generated: tuple[str, ModuleType],
) -> None:
    text, module = generated
    as_text, as_base64 = proto(text), proto(_schema_to_str(module.DESCRIPTOR))
    for level in ("BACKWARD", "FORWARD", "FULL_TRANSITIVE"):
        assert check_compatibility(level, as_text, [as_base64, as_text]) == []
