"""The data-driven message model, and one generic codec compiled from it.

Theory of operation
-------------------
Each API is described once (``messages/``) as an :class:`Api` holding the
fields of its request and response. A :class:`F` names a field, its type
(``int8`` … ``int64``, ``uint16``, ``float64``, ``bool``, ``string``,
``bytes``, ``uuid``, ``records``, ``struct``, or an array ``[]T``), the
versions that carry it, the versions where it may be null, an optional tag
(tagged fields live in the struct's trailing tagged section in flexible
versions) and, for structs, the fields inside.

For a given (fields, version, flexible) the description is compiled once into
a list of reader and writer closures and cached, so decoding a request is one
pass of closure calls with no per-field lookups of the description.

Values are plain dicts keyed by the snake_case field names; nested structs
are dicts and arrays are lists. Missing fields decode to their defaults and
are ignored on encode when the version lacks them.

``records`` fields decode to a memoryview into the frame (never copied).
On encode a records value may be bytes-like, or any other object with a
``__len__``: such an object is not serialised but handed back in the output
as a separate chunk with its length already written in front of it. The
broker uses this to ``sendfile`` file regions into a response.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from seglog.protocol import primitives as p
from seglog.protocol.errors import DecodeError

Versions = tuple[int, int]


@dataclass(frozen=True, slots=True)
class F:
    """One field of a message or struct."""

    name: str
    type: str
    versions: Versions
    nullable: Versions | None = None
    tag: int | None = None
    tagged: Versions | None = None
    default: Any = None
    never_flexible: bool = False
    fields: tuple[F, ...] | None = None

    def present(self, version: int) -> bool:
        """True when ``version`` carries this field."""
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        """True when the field may be null in ``version``."""
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def tagged_in(self, version: int) -> bool:
        """True when the field is a tagged field in ``version``."""
        return (
            self.tag is not None
            and self.tagged is not None
            and self.tagged[0] <= version <= self.tagged[1]
        )


@dataclass(frozen=True, slots=True)
class Api:
    """An API: key, name, supported versions, first flexible version, request and response."""

    key: int
    name: str
    versions: Versions
    flexible: int | None
    request: tuple[F, ...]
    response: tuple[F, ...]
    _cache: dict[tuple[bool, int], Codec] = field(default_factory=dict, compare=False)

    def is_flexible(self, version: int) -> bool:
        """True when ``version`` uses compact encodings and tagged fields."""
        return self.flexible is not None and version >= self.flexible

    def supports(self, version: int) -> bool:
        """True when ``version`` is within the supported range."""
        return self.versions[0] <= version <= self.versions[1]

    def codec(self, version: int, response: bool) -> Codec:
        """The compiled codec of the request or response at ``version``."""
        key = (response, version)
        codec = self._cache.get(key)
        if codec is None:
            fields = self.response if response else self.request
            codec = Codec(fields, version, self.is_flexible(version))
            self._cache[key] = codec
        return codec

    def decode_request(self, view: memoryview, version: int) -> dict[str, Any]:
        """Decode a request body at the start of ``view``.

        Bytes after the last field are ignored, as Kafka's brokers ignore them
        (a Metadata v12 request from librdkafka was seen here with three more).
        """
        return self.codec(version, False).decode_all(view, exact=False)

    def decode_response(self, view: memoryview, version: int) -> dict[str, Any]:
        """Decode a response body that fills ``view`` exactly."""
        return self.codec(version, True).decode_all(view)

    def encode_request(self, value: dict[str, Any], version: int) -> list[Any]:
        """Encode a request body into chunks."""
        return self.codec(version, False).encode(value)

    def encode_response(self, value: dict[str, Any], version: int) -> list[Any]:
        """Encode a response body into chunks (bytes, and any external records objects)."""
        return self.codec(version, True).encode(value)


class _Output:
    """A bytearray plus external chunks (records handed over by reference)."""

    __slots__ = ("buf", "chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chunks: list[Any] = []

    def external(self, obj: Any) -> None:
        if self.buf:
            self.chunks.append(bytes(self.buf))
            self.buf = bytearray()
        self.chunks.append(obj)

    def finish(self) -> list[Any]:
        if self.buf or not self.chunks:
            self.chunks.append(bytes(self.buf))
        return self.chunks


ReadFn = Callable[[memoryview, int], tuple[Any, int]]
WriteFn = Callable[[_Output, Any], None]

_FIXED: dict[str, tuple[struct.Struct, Any]] = {
    "int8": (p.INT8, 0),
    "int16": (p.INT16, 0),
    "uint16": (p.UINT16, 0),
    "int32": (p.INT32, 0),
    "int64": (p.INT64, 0),
    "float64": (p.FLOAT64, 0.0),
}


def _default(f: F, version: int) -> Any:
    if f.default is not None:
        return f.default
    kind = f.type
    if kind.startswith("[]"):
        return None if f.is_nullable(version) else []
    if kind in _FIXED:
        return _FIXED[kind][1]
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind == "string":
        return None if f.is_nullable(version) else ""
    if kind in ("bytes", "records"):
        return None if f.is_nullable(version) else b""
    if kind == "struct":
        return None
    return None


def _scalar(
    kind: str, flexible: bool, fields: tuple[F, ...] | None, version: int
) -> tuple[ReadFn, WriteFn]:
    if kind in _FIXED:
        fmt = _FIXED[kind][0]
        size, unpack, pack = fmt.size, fmt.unpack_from, fmt.pack

        def read_fixed(view: memoryview, pos: int) -> tuple[Any, int]:
            if pos + size > len(view):
                raise DecodeError(f"truncated {kind} at position {pos}")
            return unpack(view, pos)[0], pos + size

        def write_fixed(out: _Output, value: Any) -> None:
            out.buf += pack(value)

        return read_fixed, write_fixed
    if kind == "bool":
        return p.read_bool, lambda out, v: p.write_bool(out.buf, v)
    if kind == "uuid":
        return p.read_uuid, lambda out, v: p.write_uuid(out.buf, v)
    if kind == "string":
        return (
            lambda view, pos: p.read_string(view, pos, flexible),
            lambda out, v: p.write_string(out.buf, v, flexible),
        )
    if kind == "bytes":

        def read_bytes_copy(view: memoryview, pos: int) -> tuple[Any, int]:
            value, pos = p.read_bytes(view, pos, flexible)
            return (None if value is None else bytes(value)), pos

        def write_bytes(out: _Output, value: Any) -> None:
            if value is None:
                p.write_length(out.buf, -1, flexible, wide=True)
            else:
                p.write_length(out.buf, len(value), flexible, wide=True)
                out.buf += value

        return read_bytes_copy, write_bytes
    if kind == "records":

        def write_records(out: _Output, value: Any) -> None:
            if value is None:
                p.write_length(out.buf, -1, flexible, wide=True)
                return
            p.write_length(out.buf, len(value), flexible, wide=True)
            if isinstance(value, (bytes, bytearray, memoryview)):
                out.buf += value
            else:
                out.external(value)

        return (lambda view, pos: p.read_bytes(view, pos, flexible)), write_records
    if kind == "struct":
        assert fields is not None
        codec = Codec(fields, version, flexible)
        return codec.decode, codec.encode_into
    raise ValueError(f"unknown field type {kind}")


def _field_codec(f: F, version: int, flexible: bool) -> tuple[ReadFn, WriteFn]:
    field_flexible = flexible and not f.never_flexible
    if f.type.startswith("[]"):
        read_item, write_item = _scalar(f.type[2:], field_flexible, f.fields, version)

        def read_array(view: memoryview, pos: int) -> tuple[Any, int]:
            count, pos = p.read_length(view, pos, field_flexible, wide=True)
            if count < 0:
                return None, pos
            if count > len(view) - pos:
                raise DecodeError(f"array of {count} elements at position {pos} cannot fit")
            items = []
            for _ in range(count):
                item, pos = read_item(view, pos)
                items.append(item)
            return items, pos

        def write_array(out: _Output, value: Any) -> None:
            if value is None:
                p.write_length(out.buf, -1, field_flexible, wide=True)
                return
            p.write_length(out.buf, len(value), field_flexible, wide=True)
            for item in value:
                write_item(out, item)

        return read_array, write_array
    read, write = _scalar(f.type, field_flexible, f.fields, version)
    if f.type == "struct" and f.is_nullable(version):
        # Nullable structs carry a presence byte (-1 absent, 1 present).
        def read_opt(view: memoryview, pos: int) -> tuple[Any, int]:
            marker, pos = p.read_int8(view, pos)
            if marker < 0:
                return None, pos
            return read(view, pos)

        def write_opt(out: _Output, value: Any) -> None:
            if value is None:
                out.buf += b"\xff"
            else:
                out.buf += b"\x01"
                write(out, value)

        return read_opt, write_opt
    return read, write


class Codec:
    """The compiled reader and writer of one struct (or message body) at one version."""

    def __init__(self, fields: Sequence[F], version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.defaults: dict[str, Any] = {}
        self.positional: list[tuple[str, ReadFn, WriteFn, Any]] = []
        self.tagged: dict[int, tuple[str, ReadFn, WriteFn, Any]] = {}
        for f in fields:
            if not f.present(version):
                continue
            default = _default(f, version)
            read, write = _field_codec(f, version, flexible)
            if flexible and f.tagged_in(version):
                assert f.tag is not None
                self.tagged[f.tag] = (f.name, read, write, default)
            else:
                self.positional.append((f.name, read, write, default))
            self.defaults[f.name] = default
        self.tag_order = sorted(self.tagged)

    def decode(self, view: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        """Decode the struct at ``pos``; returns (value, next position)."""
        value: dict[str, Any] = {}
        for name, read, _, _ in self.positional:
            value[name], pos = read(view, pos)
        if self.flexible:
            raw, pos = p.skip_tagged_fields(view, pos)
            for name, _, _, default in self.tagged.values():
                value[name] = default
            for tag, data in raw.items():
                known = self.tagged.get(tag)
                if known is not None:
                    decoded, end = known[1](data, 0)
                    if end != len(data):
                        raise DecodeError(f"tagged field {tag} has {len(data) - end} extra bytes")
                    value[known[0]] = decoded
        return value, pos

    def decode_all(self, view: memoryview, *, exact: bool = True) -> dict[str, Any]:
        """Decode a body that fills ``view`` (exactly, unless ``exact`` is False)."""
        try:
            value, end = self.decode(view, 0)
        except DecodeError:
            raise
        except (struct.error, IndexError, ValueError, UnicodeDecodeError) as exc:
            raise DecodeError(f"malformed message: {exc}") from exc
        if exact and end != len(view):
            raise DecodeError(f"{len(view) - end} unexpected bytes after the message")
        return value

    def encode_into(self, out: _Output, value: dict[str, Any]) -> None:
        """Append the encoding of ``value`` to ``out``."""
        for name, _, write, default in self.positional:
            write(out, value.get(name, default))
        if self.flexible:
            present = []
            for tag in self.tag_order:
                name, _, write, default = self.tagged[tag]
                item = value.get(name, default)
                if item is not None and item != default and item != []:
                    present.append((tag, write, item))
            p.write_uvarint(out.buf, len(present))
            for tag, write, item in present:
                inner = _Output()
                write(inner, item)
                data = inner.buf
                p.write_uvarint(out.buf, tag)
                p.write_uvarint(out.buf, len(data))
                out.buf += data

    def encode(self, value: dict[str, Any]) -> list[Any]:
        """Encode ``value`` into chunks: bytes, and external records objects."""
        out = _Output()
        self.encode_into(out, value)
        return out.finish()


__all__ = ["Api", "Codec", "F"]
