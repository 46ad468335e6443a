"""Protobuf schemas: ``.proto`` text or a base64 FileDescriptorProto, checked, compared.

Two forms of the same schema reach a registry. Java clients and ``seglog schemas register`` send
``.proto`` text; confluent-kafka's Python serializer sends the base64 of the file's serialized
``FileDescriptorProto`` (the bytes its generated ``_pb2`` module holds), and names each import
as a reference. Both parse to a ``FileDescriptorProto``:

- base64: decoded and parsed as it is;
- text: compiled by protoc (``grpcio-tools`` ships it as a Python extension) in a temporary
  directory holding the text and its references' texts, in process. protoc's Python generator
  gives the file's descriptor bytes as the serializer would register them, so a text and the
  serializer's base64 of the same ``.proto`` have equal descriptors (but for the file name).
  When a reference is only known as a descriptor (registered in base64) or is a built-in that
  protoc does not ship as text (``google/type/*``, ``confluent/*``), protoc runs as a
  subprocess with the references as a descriptor set.

Either way the file and its dependencies are then built into a fresh ``DescriptorPool``, which
checks that every type resolves. Imports of the well-known ``google/protobuf/*`` files and of the
registry's built-ins need no reference, as with the registry.

Canonical text: base64 as given, or the ``.proto`` text with runs of whitespace collapsed
(outside string literals and comments). Normalized: the descriptor with the fields of every
message ordered by number, the values of every enum ordered by number, written as base64 of
its deterministic serialization (options, being messages, serialize in field order).

Compatibility: the registry's rules, comparing the messages and enums of the file by full
name (writer against reader): MESSAGE_REMOVED, ENUM_REMOVED, PACKAGE_CHANGED, and per field
number FIELD_KIND_CHANGED (scalar, message, enum, repeated or not), FIELD_SCALAR_KIND_CHANGED
(outside the wire-compatible groups), FIELD_NAMED_TYPE_CHANGED, REQUIRED_FIELD_ADDED,
REQUIRED_FIELD_REMOVED, FIELD_MOVED_TO_EXISTING_ONEOF and MULTIPLE_FIELDS_MOVED_TO_ONEOF.
Adding or removing an optional field, renaming a field or adding an enum constant is fine.
"""

from __future__ import annotations

import ast
import base64
import binascii
import importlib
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto
from google.protobuf.message import DecodeError

from seglog.schemas.formats._base import InvalidSchemaError, ParsedSchema, message

# The name given to a schema sent as text: text carries no file name of its own.
TEXT_FILE_NAME = "schema.proto"

_LABEL_REQUIRED = FieldDescriptorProto.LABEL_REQUIRED
_LABEL_REPEATED = FieldDescriptorProto.LABEL_REPEATED
_TYPE_MESSAGE = FieldDescriptorProto.TYPE_MESSAGE
_TYPE_GROUP = FieldDescriptorProto.TYPE_GROUP
_TYPE_ENUM = FieldDescriptorProto.TYPE_ENUM

# Scalar types that read each other's bytes on the wire: a change inside a group is compatible.
_T = FieldDescriptorProto
_SCALAR_GROUPS: tuple[frozenset[int], ...] = (
    frozenset({_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_INT64, _T.TYPE_UINT64, _T.TYPE_BOOL}),
    frozenset({_T.TYPE_SINT32, _T.TYPE_SINT64}),
    frozenset({_T.TYPE_FIXED32, _T.TYPE_SFIXED32}),
    frozenset({_T.TYPE_FIXED64, _T.TYPE_SFIXED64}),
    frozenset({_T.TYPE_STRING, _T.TYPE_BYTES}),
)


class ProtobufSchema(ParsedSchema):
    """A parsed Protobuf schema.

    ``file_descriptor`` is its ``FileDescriptorProto``; ``dependencies`` those of its
    references, by name, dependencies first; ``pool`` a ``DescriptorPool`` holding them all.
    """

    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(
        self,
        text: str,
        file_descriptor: FileDescriptorProto,
        dependencies: Mapping[str, FileDescriptorProto],
        pool: descriptor_pool.DescriptorPool,
    ) -> None:
        self.text = text
        self.file_descriptor = file_descriptor
        self.dependencies = dict(dependencies)
        self.pool = pool

    def canonical(self) -> str:
        """The text as given, runs of whitespace collapsed; base64 as given."""
        return _compact(self.text)

    def serialized(self) -> str:
        """Base64 of the serialized FileDescriptorProto, as ``?format=serialized`` answers."""
        return base64.b64encode(self.file_descriptor.SerializeToString()).decode("ascii")

    def normalize(self) -> ProtobufSchema:
        """Fields and enum values ordered by number; written as base64."""
        normalized = FileDescriptorProto()
        normalized.CopyFrom(self.file_descriptor)
        for msg in normalized.message_type:
            _sort_message(msg)
        for enum in normalized.enum_type:
            _sort_enum(enum)
        text = base64.b64encode(normalized.SerializeToString(deterministic=True)).decode("ascii")
        return ProtobufSchema(text, normalized, self.dependencies, self.pool)


def _sort_message(msg: descriptor_pb2.DescriptorProto) -> None:
    fields = sorted(msg.field, key=lambda f: f.number)
    del msg.field[:]
    msg.field.extend(fields)
    for nested in msg.nested_type:
        _sort_message(nested)
    for enum in msg.enum_type:
        _sort_enum(enum)


def _sort_enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    # Stable: aliases (equal numbers) keep their written order, the first being the name used.
    values = sorted(enum.value, key=lambda v: v.number)
    del enum.value[:]
    enum.value.extend(values)


# --- parsing -------------------------------------------------------------------------------


def parse(text: str, references: Mapping[str, str]) -> ProtobufSchema:
    """Parse ``text`` (``.proto`` text or base64) with ``references`` (name -> text)."""
    dependencies: dict[str, FileDescriptorProto] = {}
    texts: dict[str, str | None] = {}  # name -> .proto text, None where only a descriptor
    for name, ref_text in references.items():
        fdp, is_text = _to_descriptor(name, ref_text, dependencies, texts)
        dependencies[name] = fdp
        texts[name] = ref_text if is_text else None
    fdp, _ = _to_descriptor(None, text, dependencies, texts)
    pool = _build_pool(fdp, dependencies)
    return ProtobufSchema(text, fdp, dependencies, pool)


def _to_descriptor(
    name: str | None,
    text: str,
    dependencies: Mapping[str, FileDescriptorProto],
    texts: Mapping[str, str | None],
) -> tuple[FileDescriptorProto, bool]:
    what = "schema" if name is None else f"reference '{name}'"
    decoded = _from_base64(text)
    if decoded is not None:
        if name is not None:
            # The reference's name is the name importers use, whatever the file called itself.
            decoded.name = name
        elif not decoded.name:
            decoded.name = TEXT_FILE_NAME
        return decoded, False
    return _compile(name or TEXT_FILE_NAME, text, dependencies, texts, what), True


def _from_base64(text: str) -> FileDescriptorProto | None:
    squeezed = "".join(text.split())
    if not squeezed or not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", squeezed):
        return None
    try:
        raw = base64.b64decode(squeezed, validate=True)
        fdp = FileDescriptorProto()
        fdp.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp


def _grpc_include() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto")


def _imports(text: str) -> list[str]:
    return re.findall(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', text, re.MULTILINE)


def _compile(
    name: str,
    text: str,
    dependencies: Mapping[str, FileDescriptorProto],
    texts: Mapping[str, str | None],
    what: str,
) -> FileDescriptorProto:
    include = _grpc_include()
    # protoc reads imports from files: the references' texts are written beside the schema.
    # A reference known only as a descriptor, or a built-in protoc does not ship, has no text.
    needs_descriptors = any(t is None for t in texts.values()) or any(
        imp not in texts and not Path(include, imp).is_file() for imp in _imports(text)
    )
    with tempfile.TemporaryDirectory(prefix="seglog-proto-") as tmp:
        root = Path(tmp, "src")
        for dep_name, dep_text in [*texts.items(), (name, text)]:
            if dep_text is None:
                continue
            path = root / dep_name
            if not path.resolve().is_relative_to(root.resolve()):
                raise InvalidSchemaError(f"Invalid Protobuf {what}: bad file name '{dep_name}'")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dep_text, encoding="utf-8")
        if needs_descriptors:
            return _compile_in_subprocess(Path(tmp), name, dependencies, what)
        return _compile_in_process(root, name, include, what)


def _compile_in_process(root: Path, name: str, include: str, what: str) -> FileDescriptorProto:
    from grpc_tools import _protoc_compiler

    module = re.sub(r"\.proto$", "", name).replace("-", "_") + "_pb2.py"
    try:
        with warnings.catch_warnings():
            # protoc's warnings (an unused import) are no reason to refuse a schema.
            warnings.simplefilter("ignore")
            generated = _protoc_compiler.get_protos(
                name.encode(), [str(root).encode(), include.encode()]
            )
    except _protoc_compiler.ProtocErrors as exc:
        details = "; ".join(
            f"{e.filename.decode()}:{e.line}:{e.column}: {e.message.decode()}" for e in exc.errors()
        )
        raise InvalidSchemaError(f"Invalid Protobuf {what}: {details}") from None
    for module_name, code in generated:
        if module_name.decode() == module:
            return _descriptor_from_generated(code.decode("utf-8"))
    raise InvalidSchemaError(f"Invalid Protobuf {what}: protoc produced no module for '{name}'")


def _descriptor_from_generated(code: str) -> FileDescriptorProto:
    """The serialized file in a generated module's ``AddSerializedFile(b'...')`` call."""
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            fdp = FileDescriptorProto()
            fdp.ParseFromString(node.args[0].value)
            return fdp
    raise InvalidSchemaError("Invalid Protobuf schema: protoc's output holds no descriptor")


def _compile_in_subprocess(
    tmp: Path,
    name: str,
    dependencies: Mapping[str, FileDescriptorProto],
    what: str,
) -> FileDescriptorProto:
    # Every file the schema may import, as descriptors: the references and the built-ins
    # they or the schema import.
    known = descriptor_pb2.FileDescriptorSet()
    added: set[str] = set()

    def add(fdp: FileDescriptorProto) -> None:
        for dep in fdp.dependency:
            if dep not in added and dep not in dependencies:
                builtin = _builtin(dep)
                if builtin is not None:
                    add(builtin)
        if fdp.name not in added:
            added.add(fdp.name)
            known.file.append(fdp)

    for dep_fdp in dependencies.values():
        add(dep_fdp)
    text = (tmp / "src" / name).read_text(encoding="utf-8")
    for imp in _imports(text):
        builtin = _builtin(imp) if imp not in dependencies else None
        if builtin is not None:
            add(builtin)
    (tmp / "deps.pb").write_bytes(known.SerializeToString())
    # Only the schema's own file is given as text: its imports come from the descriptor set.
    alone = tmp / "alone"
    alone.mkdir()
    (alone / name).parent.mkdir(parents=True, exist_ok=True)
    (alone / name).write_text(text, encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{alone}",
        f"--descriptor_set_in={tmp / 'deps.pb'}",
        f"--descriptor_set_out={tmp / 'out.pb'}",
        name,
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        details = "; ".join(line for line in done.stderr.splitlines() if line.strip())
        raise InvalidSchemaError(f"Invalid Protobuf {what}: {details}")
    out = descriptor_pb2.FileDescriptorSet()
    out.ParseFromString((tmp / "out.pb").read_bytes())
    fdp = out.file[-1]
    _drop_default_json_names(fdp)
    return fdp


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _drop_default_json_names(fdp: FileDescriptorProto) -> None:
    """Clear the json_name protoc fills in, as the descriptor in generated code has none."""

    def walk(msg: descriptor_pb2.DescriptorProto) -> None:
        for field in msg.field:
            if field.json_name == _json_name(field.name):
                field.ClearField("json_name")
        for nested in msg.nested_type:
            walk(nested)

    for msg in fdp.message_type:
        walk(msg)


# The registry's built-in files: importable without a reference.
_BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


def _builtin(name: str) -> FileDescriptorProto | None:
    """A built-in file's descriptor, from the Python modules that carry it; None if not one."""
    if not name.startswith(_BUILTIN_PREFIXES):
        return None
    module = name.removesuffix(".proto").replace("/", ".") + "_pb2"
    if name.startswith("confluent/"):
        # confluent-kafka's registry support loads every file of its own it knows.
        importlib.import_module("confluent_kafka.schema_registry.common.protobuf")
    else:
        try:
            importlib.import_module(module)
        except ImportError:
            return None
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    fdp = FileDescriptorProto()
    found.CopyToProto(fdp)
    return fdp


def _build_pool(
    fdp: FileDescriptorProto, dependencies: Mapping[str, FileDescriptorProto]
) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: FileDescriptorProto, what: str) -> None:
        if file.name in added:
            return
        for dep in file.dependency:
            if dep in dependencies:
                add(dependencies[dep], f"reference '{dep}'")
                continue
            builtin = _builtin(dep)
            if builtin is None:
                raise InvalidSchemaError(
                    f"Invalid Protobuf {what}: imports '{dep}', which is no reference given"
                )
            add(builtin, f"built-in '{dep}'")
        try:
            pool.Add(file)
        except (TypeError, ValueError) as exc:
            raise InvalidSchemaError(f"Invalid Protobuf {what}: {exc}") from None
        added.add(file.name)

    add(fdp, "schema")
    return pool


_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"|(?P<line_comment>//[^\n]*)"
    r"|(?P<block_comment>/\*.*?\*/)"
    r"|(?P<space>\s+)"
    r"|(?P<word>[A-Za-z0-9_.+-]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


# Token pairs that whitespace between them keeps apart: two words ("message A"), a word and
# a string ('import "a.proto"' needs none, but "option x = 'a' b" is kept as written).
_SPACED = frozenset(
    {("word", "word"), ("word", "string"), ("string", "word"), ("block_comment", "word")}
)


def _compact(text: str) -> str:
    """``.proto`` text with whitespace runs collapsed; needed only between two words."""
    out: list[str] = []
    pending_space = False
    last_kind = ""
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        token = match.group()
        if kind == "space":
            pending_space = True
            continue
        if last_kind == "line_comment":
            out.append("\n")
        elif pending_space and (last_kind, kind) in _SPACED:
            out.append(" ")
        out.append(token)
        last_kind = kind
        pending_space = False
    return "".join(out)


# --- compatibility -------------------------------------------------------------------------


def _messages(fdp: FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(msg: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        full = f"{prefix}.{msg.name}" if prefix else msg.name
        found[full] = msg
        for nested in msg.nested_type:
            walk(nested, full)

    for msg in fdp.message_type:
        walk(msg, fdp.package)
    return found


def _enums(fdp: FileDescriptorProto) -> dict[str, descriptor_pb2.EnumDescriptorProto]:
    found = {f"{fdp.package}.{e.name}" if fdp.package else e.name: e for e in fdp.enum_type}
    for full, msg in _messages(fdp).items():
        for enum in msg.enum_type:
            found[f"{full}.{enum.name}"] = enum
    return found


def _kind(field: FieldDescriptorProto) -> str:
    if field.type in (_TYPE_MESSAGE, _TYPE_GROUP):
        return "message"
    if field.type == _TYPE_ENUM:
        return "enum"
    return "scalar"


def _same_group(a: int, b: int) -> bool:
    return a == b or any(a in group and b in group for group in _SCALAR_GROUPS)


class _Comparer:
    def __init__(self, reader_label: str, writer_label: str) -> None:
        self.r = reader_label
        self.w = writer_label

    def compare(self, reader: FileDescriptorProto, writer: FileDescriptorProto) -> Iterator[str]:
        if reader.package != writer.package:
            yield message(
                "PACKAGE_CHANGED",
                f"The package of the {self.r} schema ('{reader.package}') differs from that of "
                f"the {self.w} schema ('{writer.package}')",
            )
            return
        r_messages, w_messages = _messages(reader), _messages(writer)
        for full, w_msg in w_messages.items():
            path = f"#/{full}"
            r_msg = r_messages.get(full)
            if r_msg is None:
                yield message(
                    "MESSAGE_REMOVED",
                    f"The message '{full}' of the {self.w} schema is missing in the {self.r} "
                    "schema",
                )
                continue
            yield from self._message(r_msg, w_msg, path)
        r_enums = _enums(reader)
        for full in _enums(writer):
            if full not in r_enums:
                yield message(
                    "ENUM_REMOVED",
                    f"The enum '{full}' of the {self.w} schema is missing in the {self.r} schema",
                )

    def _message(
        self,
        reader: descriptor_pb2.DescriptorProto,
        writer: descriptor_pb2.DescriptorProto,
        path: str,
    ) -> Iterator[str]:
        r_fields = {f.number: f for f in reader.field}
        w_fields = {f.number: f for f in writer.field}
        for number, w_field in w_fields.items():
            if number not in r_fields and w_field.label == _LABEL_REQUIRED:
                yield message(
                    "REQUIRED_FIELD_REMOVED",
                    f"The required field '{w_field.name}' at path '{path}/{number}' of the "
                    f"{self.w} schema is missing in the {self.r} schema",
                )
        for number, r_field in r_fields.items():
            where = f"{path}/{number}"
            w_field = w_fields.get(number)
            if w_field is None:
                if r_field.label == _LABEL_REQUIRED:
                    yield message(
                        "REQUIRED_FIELD_ADDED",
                        f"The required field '{r_field.name}' at path '{where}' in the {self.r} "
                        f"schema is missing in the {self.w} schema",
                    )
                continue
            yield from self._field(r_field, w_field, where)
        yield from self._oneofs(reader, writer, path)

    def _field(self, r: FieldDescriptorProto, w: FieldDescriptorProto, where: str) -> Iterator[str]:
        r_kind, w_kind = _kind(r), _kind(w)
        repeated_changed = (r.label == _LABEL_REPEATED) != (w.label == _LABEL_REPEATED)
        if r_kind != w_kind or repeated_changed:
            yield message(
                "FIELD_KIND_CHANGED",
                f"The kind of the field at path '{where}' in the {self.r} schema does not match "
                f"with the {self.w} schema",
            )
        elif r_kind == "scalar" and not _same_group(r.type, w.type):
            yield message(
                "FIELD_SCALAR_KIND_CHANGED",
                f"The scalar type of the field at path '{where}' in the {self.r} schema "
                f"({_type_name(r.type)}) does not read the {self.w} schema's "
                f"({_type_name(w.type)})",
            )
        elif r_kind != "scalar" and r.type_name != w.type_name:
            yield message(
                "FIELD_NAMED_TYPE_CHANGED",
                f"The type of the field at path '{where}' in the {self.r} schema "
                f"('{r.type_name.lstrip('.')}') differs from the {self.w} schema's "
                f"('{w.type_name.lstrip('.')}')",
            )

    def _oneofs(
        self,
        reader: descriptor_pb2.DescriptorProto,
        writer: descriptor_pb2.DescriptorProto,
        path: str,
    ) -> Iterator[str]:
        w_oneof_of = {
            f.number: writer.oneof_decl[f.oneof_index].name
            for f in writer.field
            if f.HasField("oneof_index") and not f.proto3_optional
        }
        w_oneof_names = {o.name for o in writer.oneof_decl}
        moved: dict[str, list[int]] = {}
        for field in reader.field:
            if not field.HasField("oneof_index") or field.proto3_optional:
                continue
            in_writer = any(f.number == field.number for f in writer.field)
            if in_writer and field.number not in w_oneof_of:
                moved.setdefault(reader.oneof_decl[field.oneof_index].name, []).append(field.number)
        for oneof, numbers in moved.items():
            if oneof in w_oneof_names:
                yield message(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    f"The fields {numbers} at path '{path}' were moved into the existing oneof "
                    f"'{oneof}' in the {self.r} schema",
                )
            elif len(numbers) > 1:
                yield message(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
                    f"The fields {numbers} at path '{path}' were moved into the new oneof "
                    f"'{oneof}' in the {self.r} schema",
                )


def _type_name(field_type: int) -> str:
    name: str = FieldDescriptorProto.Type.Name(field_type)
    return name.removeprefix("TYPE_").lower()


def incompatibilities(
    reader: ProtobufSchema, writer: ProtobufSchema, reader_label: str, writer_label: str
) -> list[str]:
    """What a reader with ``reader`` cannot read of data written with ``writer`` (none: [])."""
    comparer = _Comparer(reader_label, writer_label)
    return list(comparer.compare(reader.file_descriptor, writer.file_descriptor))
