"""Protobuf compatibility: what a reader's descriptor cannot read of a writer's data.

The registry's rules, following Protobuf's own advice on updating a message type. Messages are
matched by their name within their package (``Outer.Inner``), so moving a schema to another
package is no change by itself; fields by number, so renaming one is none either. What breaks
a reader, each with the registry's difference type:

- MESSAGE_REMOVED: a message of the writer is missing in the reader;
- FIELD_KIND_CHANGED: a field changes between scalar (enums count as scalars), message and map;
- FIELD_SCALAR_KIND_CHANGED: a scalar leaves its wire-compatible group. The groups:
  int32/int64/uint32/uint64/bool/enums, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64,
  string/bytes; float and double stand alone;
- FIELD_NUMERIC_LABEL_CHANGED: a numeric field becomes repeated or stops being (packed
  encodings differ); string and bytes may, as may messages;
- FIELD_NAMED_TYPE_CHANGED: a message field names another message;
- REQUIRED_FIELD_ADDED, REQUIRED_FIELD_REMOVED: proto2 ``required`` fields, which a reader
  insists on;
- ONEOF_FIELD_REMOVED: a field of a oneof is missing in the reader;
- MULTIPLE_FIELDS_MOVED_TO_ONEOF, FIELD_MOVED_TO_EXISTING_ONEOF: fields join a oneof, where
  setting one clears the others.

A map compares its key and value types by the same rules. A message a field takes from a
reference is compared too, as the two schemas' references define it. Adding or removing an optional
field, adding a message or an enum constant, removing an enum constant: all fine.

Paths are ``#/<message>`` and ``#/<message>/<field number>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)

from seglog.schemas.formats._base import message
from seglog.schemas.formats.protobuf import ProtobufSchema

_F = FieldDescriptorProto

# Scalar types by the group whose members read each other's encoding.
_SCALAR_KIND: dict[int, str] = {
    _F.TYPE_INT32: "GENERAL_NUMBER",
    _F.TYPE_INT64: "GENERAL_NUMBER",
    _F.TYPE_UINT32: "GENERAL_NUMBER",
    _F.TYPE_UINT64: "GENERAL_NUMBER",
    _F.TYPE_BOOL: "GENERAL_NUMBER",
    _F.TYPE_ENUM: "GENERAL_NUMBER",
    _F.TYPE_SINT32: "SIGNED_NUMBER",
    _F.TYPE_SINT64: "SIGNED_NUMBER",
    _F.TYPE_FIXED32: "FIXED32",
    _F.TYPE_SFIXED32: "FIXED32",
    _F.TYPE_FIXED64: "FIXED64",
    _F.TYPE_SFIXED64: "FIXED64",
    _F.TYPE_FLOAT: "FLOAT",
    _F.TYPE_DOUBLE: "DOUBLE",
    _F.TYPE_STRING: "STRING_OR_BYTES",
    _F.TYPE_BYTES: "STRING_OR_BYTES",
}


@dataclass(frozen=True)
class _Type:
    """A field's type as the rules see it."""

    kind: str  # SCALAR, MESSAGE or MAP
    scalar: str = ""  # SCALAR: the group
    name: str = ""  # MESSAGE: the message's name within its package
    full: str = ""  # MESSAGE: its full name
    key: _Type | None = None  # MAP
    value: _Type | None = None  # MAP


class _Side:
    """One schema's messages by name within the package, and the names of its field types."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        fdp = schema.file_descriptor
        self.messages = _messages_of(fdp)
        # The messages of the references, by full name: a field may use one.
        self.imported: dict[str, DescriptorProto] = {}
        for dep in schema.dependencies.values():
            prefix = f"{dep.package}." if dep.package else ""
            for name, msg in _messages_of(dep).items():
                self.imported[prefix + name] = msg

    def local_name(self, type_name: str) -> str:
        """``.pkg.Outer.Inner`` -> ``Outer.Inner``, by the package of the file declaring it."""
        full = type_name.lstrip(".")
        try:
            package = self.schema.pool.FindMessageTypeByName(full).file.package
        except KeyError:
            package = self.schema.file_descriptor.package
        return full[len(package) + 1 :] if package and full.startswith(package + ".") else full

    def type_of(self, field: FieldDescriptorProto, container: DescriptorProto) -> _Type:
        if field.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            return _Type("SCALAR", scalar=_SCALAR_KIND[field.type])
        entry_name = field.type_name.rpartition(".")[2]
        entry = next(
            (n for n in container.nested_type if n.name == entry_name and n.options.map_entry),
            None,
        )
        if entry is not None and field.label == _F.LABEL_REPEATED:
            by_name = {f.name: f for f in entry.field}
            return _Type(
                "MAP",
                key=self.type_of(by_name["key"], entry),
                value=self.type_of(by_name["value"], entry),
            )
        return _Type(
            "MESSAGE", name=self.local_name(field.type_name), full=field.type_name.lstrip(".")
        )


def _messages_of(fdp: FileDescriptorProto) -> dict[str, DescriptorProto]:
    """A file's messages by name within its package (``Outer.Inner``), map entries left out."""
    found: dict[str, DescriptorProto] = {}

    def walk(msg: DescriptorProto, prefix: str) -> None:
        name = f"{prefix}.{msg.name}" if prefix else msg.name
        if not msg.options.map_entry:  # a map's entry is the map field's business
            found[name] = msg
        for nested in msg.nested_type:
            walk(nested, name)

    for msg in fdp.message_type:
        walk(msg, "")
    return found


def _label(field: FieldDescriptorProto) -> int:
    return int(field.label)


def _in_oneof(field: FieldDescriptorProto) -> bool:
    # proto3 ``optional`` puts a field in a oneof of its own, which no user wrote.
    return field.HasField("oneof_index") and not field.proto3_optional


class _Comparer:
    def __init__(self, reader: _Side, writer: _Side, reader_label: str, writer_label: str) -> None:
        self.reader = reader
        self.writer = writer
        self.r = reader_label
        self.w = writer_label
        # Imported messages already compared (or being compared: they may be recursive).
        self.imported_seen: set[str] = set()

    def compare(self) -> Iterator[str]:
        for name, w_msg in self.writer.messages.items():
            r_msg = self.reader.messages.get(name)
            if r_msg is None:
                yield message(
                    "MESSAGE_REMOVED",
                    f"The message at path '#/{name}' in the {self.w} schema is missing in the "
                    f"{self.r} schema",
                )
            else:
                yield from self._message(r_msg, w_msg, f"#/{name}")

    def _message(self, r_msg: DescriptorProto, w_msg: DescriptorProto, path: str) -> Iterator[str]:
        r_fields = {f.number: f for f in r_msg.field}
        w_fields = {f.number: f for f in w_msg.field}
        for number, w_field in w_fields.items():
            if number in r_fields:
                continue
            where = f"{path}/{number}"
            if w_field.label == _F.LABEL_REQUIRED:
                yield message(
                    "REQUIRED_FIELD_REMOVED",
                    f"A required field at path '{where}' in the {self.w} schema is missing in "
                    f"the {self.r} schema",
                )
            elif _in_oneof(w_field):
                yield message(
                    "ONEOF_FIELD_REMOVED",
                    f"A oneof field at path '{where}' in the {self.w} schema is missing in the "
                    f"{self.r} schema",
                )
        for number, r_field in r_fields.items():
            where = f"{path}/{number}"
            w_field = w_fields.get(number)
            if w_field is None:
                if r_field.label == _F.LABEL_REQUIRED:
                    yield message(
                        "REQUIRED_FIELD_ADDED",
                        f"The {self.r} schema has a required field at path '{where}' that the "
                        f"{self.w} schema does not have",
                    )
                continue
            r_type = self.reader.type_of(r_field, r_msg)
            w_type = self.writer.type_of(w_field, w_msg)
            yield from self._types(r_type, w_type, _label(r_field), _label(w_field), where)
        yield from self._oneofs(r_msg, w_msg, path)

    def _types(self, r: _Type, w: _Type, r_label: int, w_label: int, where: str) -> Iterator[str]:
        if r.kind != w.kind:
            yield message(
                "FIELD_KIND_CHANGED",
                f"The kind of a field at path '{where}' in the {self.r} schema ({r.kind}) does "
                f"not match its kind in the {self.w} schema ({w.kind})",
            )
        elif r.kind == "SCALAR":
            if r.scalar != w.scalar:
                yield message(
                    "FIELD_SCALAR_KIND_CHANGED",
                    f"The kind of a SCALAR field at path '{where}' in the {self.r} schema does "
                    f"not match its kind in the {self.w} schema",
                )
            elif r_label != w_label and r.scalar != "STRING_OR_BYTES":
                yield message(
                    "FIELD_NUMERIC_LABEL_CHANGED",
                    f"The label of a NUMERIC field at path '{where}' in the {self.r} schema "
                    f"does not match its label in the {self.w} schema",
                )
        elif r.kind == "MESSAGE":
            if r.name != w.name:
                yield message(
                    "FIELD_NAMED_TYPE_CHANGED",
                    f"The type of a MESSAGE field at path '{where}' in the {self.r} schema "
                    f"('{r.name}') does not match its type in the {self.w} schema ('{w.name}')",
                )
            else:
                yield from self._imported(r, w)
        elif (
            r.key is not None and w.key is not None and r.value is not None and w.value is not None
        ):
            # Map keys and values carry no label of their own.
            yield from self._types(r.key, w.key, 0, 0, where)
            yield from self._types(r.value, w.value, 0, 0, where)

    def _imported(self, r: _Type, w: _Type) -> Iterator[str]:
        """Compare a message both sides import (from references that may differ)."""
        r_msg = self.reader.imported.get(r.full)
        w_msg = self.writer.imported.get(w.full)
        if r_msg is None or w_msg is None or r.full in self.imported_seen:
            return  # declared in the schema itself (compared already), or a built-in
        self.imported_seen.add(r.full)
        yield from self._message(r_msg, w_msg, f"#/{r.name}")

    def _oneofs(self, r_msg: DescriptorProto, w_msg: DescriptorProto, path: str) -> Iterator[str]:
        w_by_number = {f.number: f for f in w_msg.field}
        w_oneofs = {o.name for i, o in enumerate(w_msg.oneof_decl) if _real_oneof(w_msg, i)}
        # Fields outside any oneof in the writer, in a oneof in the reader, by that oneof.
        moved: dict[str, list[int]] = {}
        for field in r_msg.field:
            w_field = w_by_number.get(field.number)
            if w_field is not None and _in_oneof(field) and not _in_oneof(w_field):
                moved.setdefault(r_msg.oneof_decl[field.oneof_index].name, []).append(field.number)
        for oneof, numbers in moved.items():
            if oneof in w_oneofs:
                yield message(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    f"The fields {numbers} at path '{path}' were moved into the existing oneof "
                    f"'{oneof}' in the {self.r} schema",
                )
            elif len(numbers) > 1:
                yield message(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
                    f"Multiple fields {numbers} at path '{path}' were moved into the oneof "
                    f"'{oneof}' in the {self.r} schema",
                )


def _real_oneof(msg: DescriptorProto, index: int) -> bool:
    return any(
        f.oneof_index == index and _in_oneof(f) for f in msg.field if f.HasField("oneof_index")
    )


def incompatibilities(
    reader: ProtobufSchema, writer: ProtobufSchema, reader_label: str, writer_label: str
) -> list[str]:
    """What a reader with ``reader`` cannot read of data written with ``writer`` (none: [])."""
    comparer = _Comparer(_Side(reader), _Side(writer), reader_label, writer_label)
    return list(comparer.compare())
