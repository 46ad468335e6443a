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

Descriptors are kept as given but for each ``json_name`` equal to the one derived from the
field's name, which is dropped: some tools write them and some do not.

Canonical text: base64 as given, or the ``.proto`` text with runs of whitespace collapsed
(outside string literals and comments). Normalized: the descriptor with the fields of every
message ordered by number, the values of every enum ordered by number, written as base64 of
its deterministic serialization (options, being messages, serialize in field order).

Compatibility is in ``protobuf_diff``.
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
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.message import DecodeError

from seglog.schemas.formats._base import InvalidSchemaError, ParsedSchema

# The name given to a schema sent as text: text carries no file name of its own.
TEXT_FILE_NAME = "schema.proto"


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
        *,
        is_text: bool,
    ) -> None:
        self.text = text
        self.file_descriptor = file_descriptor
        self.dependencies = dict(dependencies)
        self.pool = pool
        # Whether ``text`` is .proto text (else base64 of the descriptor).
        self.is_text = is_text

    def canonical(self) -> str:
        """The .proto text with runs of whitespace collapsed; base64 without line breaks."""
        return _compact(self.text) if self.is_text else "".join(self.text.split())

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
        return ProtobufSchema(text, normalized, self.dependencies, self.pool, is_text=False)


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
    fdp, is_text = _to_descriptor(None, text, dependencies, texts)
    pool = _build_pool(fdp, dependencies)
    for file in [fdp, *dependencies.values()]:
        _drop_default_json_names(file)
    return ProtobufSchema(text, fdp, dependencies, pool, is_text=is_text)


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
    # Loose (it may match inside a comment): it only decides how to compile, not what.
    return re.findall(r'\bimport\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', text)


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
    written = [text, *(t for t in texts.values() if t is not None)]
    needs_descriptors = any(t is None for t in texts.values()) or any(
        imp not in texts and not Path(include, imp).is_file()
        for source in written
        for imp in _imports(source)
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


# One compilation at a time: protoc's library is not promised to be thread-safe, and
# catch_warnings changes process-wide state.
_PROTOC_LOCK = threading.Lock()


def _compile_in_process(root: Path, name: str, include: str, what: str) -> FileDescriptorProto:
    from grpc_tools import _protoc_compiler

    module = re.sub(r"\.proto$", "", name).replace("-", "_") + "_pb2.py"
    try:
        with _PROTOC_LOCK, warnings.catch_warnings():
            # protoc's warnings (an unused import) are no reason to refuse a schema.
            warnings.simplefilter("ignore")
            generated = _protoc_compiler.get_protos(
                name.encode(), [str(root).encode(), include.encode()]
            )
    except _protoc_compiler.ProtocErrors as exc:
        details = "; ".join(
            # protoc counts lines and columns from 0 here, and from 1 on its command line.
            f"{e.filename.decode()}:{e.line + 1}:{e.column + 1}: {e.message.decode()}"
            for e in exc.errors()
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
    fdp: FileDescriptorProto = out.file[-1]
    return fdp


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _drop_default_json_names(fdp: FileDescriptorProto) -> None:
    """Clear each json_name that is the one derived from the field's name.

    Whether a descriptor carries them depends on the tool that wrote it (protoc's descriptor
    sets do, its Python modules do not, protobuf's own modules do): without them, the same
    schema has one descriptor whichever way it came.
    """

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
