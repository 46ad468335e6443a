"""The data-driven message model, and one generic codec compiled from it.

Theory of operation
-------------------
Every API is described once, declaratively, in ``messages/``: an :class:`Api`
holds a request and a response :class:`Message`, each a tuple of
:class:`Field`\\ s. A field has a name (snake_case, the key of the decoded
dict), a type, the versions that carry it, the versions where it may be null,
an optional tag (tagged fields live in the trailing tagged-field section of
their struct in flexible versions, and are written only when not at their
default), a default, an ``ignorable`` flag, and for struct types the fields
inside. Types::

    bool int8 int16 uint16 int32 int64 float64 string bytes uuid records
    struct          one nested struct (``fields=``)
    []T             an array of any of the above, e.g. ``[]int32``, ``[]struct``

Nothing interprets this description per message at run time. The first use of
(message, version) compiles it into a :class:`StructCodec` — a list of small
closures per struct, cached on the message — so decoding a request is one
pass of closure calls with no lookups in the description:

* consecutive fixed-width fields are merged into one precompiled
  ``struct.Struct`` (Fetch's partition header ``int32 int16 int64 int64
  int64`` is one ``unpack_from`` and one ``pack``);
* strings, bytes and arrays check their length against the bytes that remain
  before slicing or looping; truncation inside a fixed run surfaces as
  ``struct.error``/``IndexError`` and is turned into :class:`DecodeError` once,
  at the top, instead of being checked field by field;
* the version decides everything statically: absent fields are not read and
  get their defaults from a prebuilt template, non-flexible versions have no
  tagged-field code at all, flexible versions use compact lengths.

Values are plain dicts keyed by snake_case names; arrays are lists, nested
structs dicts. A decoded dict holds *every* field of its struct: those the
version lacks, and tagged fields that were not sent, hold their defaults
(fresh lists and dicts, never shared). On encode, missing keys take their
defaults, fields the version lacks are skipped, unknown keys are ignored (use
:func:`validate` to be told about them). Left out, records are empty, never
null (clients reject a null Fetch partition); entries that failed are built
whole by :mod:`seglog.protocol.entries`.

Records (zero copy)
-------------------
A ``records`` field decodes to a ``memoryview`` into the request frame: the
record batches are never copied or parsed here.

On encode a records value may be ``None``, bytes-like, or **any other object
with a** ``__len__`` (the storage layer's ``FileRegion``, or a
:class:`RecordsRef`). Such an object is not serialised: the encoder writes its
length prefix and leaves a *hole* of ``len(obj)`` bytes. :func:`encode_chunks`
therefore returns a list of chunks: bytes-like pieces of the encoded message
alternating with the very objects that fill the holes, in wire order. The sum
of ``len(chunk)`` is the message size, so a size prefix can be computed
before any record byte is read, and a broker can ``sendfile`` each hole
straight from the page cache. Large bytes-like records (from
:data:`INLINE_RECORDS_LIMIT` bytes on) are handed back the same way instead of
being copied into the buffer. :func:`encode` joins the chunks into ``bytes``
and accepts only bytes-like holes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence, Sized
from typing import Any

from seglog.protocol._codec import StructCodec
from seglog.protocol._fields import (
    INLINE_RECORDS_LIMIT,
    MAX_VERSION,
    MISSING,
    NO_VERSIONS,
    Chunk,
    F,
    Field,
    RecordsRef,
    Versions,
    parse_versions,
)
from seglog.protocol.errors import DecodeError, EncodeError

# -- messages ---------------------------------------------------------------------------------


class Message:
    """One direction of an API (its request or its response) across versions."""

    __slots__ = ("_codecs", "api_key", "fields", "flexible", "name", "versions")

    def __init__(
        self,
        api_key: int,
        name: str,
        versions: Versions,
        flexible: int | None,
        fields: Sequence[Field],
    ) -> None:
        self.api_key = api_key
        self.name = name
        self.versions = versions
        self.flexible = flexible
        self.fields = tuple(fields)
        self._codecs: dict[int, StructCodec] = {}

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.versions[0]}-{self.versions[1]}>"

    def is_flexible(self, version: int) -> bool:
        """True when ``version`` uses compact encodings and tagged fields."""
        return self.flexible is not None and version >= self.flexible

    def supports(self, version: int) -> bool:
        """True when ``version`` is described."""
        return self.versions[0] <= version <= self.versions[1]

    def codec(self, version: int) -> StructCodec:
        """The compiled codec of ``version`` (compiled on first use, then cached)."""
        codec = self._codecs.get(version)
        if codec is None:
            if not self.supports(version):
                low, high = self.versions
                raise ValueError(f"{self.name} has no version {version} (described: {low}-{high})")
            codec = StructCodec(self.fields, version, self.is_flexible(version), self.name)
            self._codecs[version] = codec
        return codec


class Api:
    """An API: key, name, described versions, first flexible version, request and response."""

    __slots__ = ("flexible", "key", "name", "request", "response", "versions")

    def __init__(
        self,
        key: int,
        name: str,
        versions: str,
        *,
        flexible: int | None,
        request: Sequence[Field],
        response: Sequence[Field],
    ) -> None:
        self.key = key
        self.name = name
        self.versions = parse_versions(versions)
        self.flexible = flexible
        self.request = Message(key, name + "Request", self.versions, flexible, request)
        self.response = Message(key, name + "Response", self.versions, flexible, response)

    def __repr__(self) -> str:
        return f"<Api {self.key} {self.name} v{self.versions[0]}-{self.versions[1]}>"

    @property
    def min_version(self) -> int:
        """The lowest described version."""
        return self.versions[0]

    @property
    def max_version(self) -> int:
        """The highest described version."""
        return self.versions[1]

    def is_flexible(self, version: int) -> bool:
        """True when ``version`` uses compact encodings and tagged fields."""
        return self.flexible is not None and version >= self.flexible

    def supports(self, version: int) -> bool:
        """True when ``version`` is described."""
        return self.versions[0] <= version <= self.versions[1]


def encode_chunks(
    message: Message,
    version: int,
    value: Mapping[str, Any],
    *,
    head: bytearray | None = None,
) -> list[Chunk]:
    """Encode ``value`` as ``message`` at ``version`` into chunks (see "Records").

    ``head``, if given, is a bytearray the encoding is appended to (a header
    written first), so that header and body share one buffer. Without holes
    the result is one chunk: that bytearray.
    """
    codec = message.codec(version)
    buf = bytearray() if head is None else head
    holes: list[tuple[int, Sized]] = []
    try:
        codec.encode_into(buf, value, holes)
    except EncodeError:
        raise
    except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"{message.name} v{version}: cannot encode: {exc}") from exc
    if not holes:
        return [buf]
    view = memoryview(buf)
    chunks: list[Chunk] = []
    start = 0
    for offset, obj in holes:
        if offset > start:
            chunks.append(view[start:offset])
        chunks.append(obj)
        start = offset
    if start < len(buf):
        chunks.append(view[start:])
    return chunks


def encode(message: Message, version: int, value: Mapping[str, Any]) -> bytes:
    """Encode ``value`` into bytes; records holes must be bytes-like here."""
    chunks = encode_chunks(message, version, value)
    parts: list[bytes | bytearray | memoryview] = []
    for chunk in chunks:
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise EncodeError(f"{type(chunk).__name__} records cannot be joined into bytes")
        parts.append(chunk)
    return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)


def decode(
    message: Message,
    version: int,
    data: bytes | bytearray | memoryview,
    *,
    exact: bool = True,
) -> dict[str, Any]:
    """Decode a whole ``message`` body at ``version``.

    With ``exact`` (the default) the body must fill ``data``; without it,
    trailing bytes are ignored (Kafka brokers tolerate them in requests).
    Raises :class:`DecodeError` for anything malformed, and nothing else.
    """
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    codec = message.codec(version)
    try:
        value, end = codec.decode(view, 0)
    except DecodeError as exc:
        raise DecodeError(f"{message.name} v{version}: {exc}") from None
    except (struct.error, IndexError, ValueError) as exc:
        raise DecodeError(f"{message.name} v{version}: truncated or malformed: {exc}") from None
    if exact and end != len(view):
        raise DecodeError(f"{message.name} v{version}: {len(view) - end} bytes after the message")
    return value


def decode_from(
    message: Message, version: int, view: memoryview, pos: int
) -> tuple[dict[str, Any], int]:
    """Decode ``message`` starting at ``pos``; returns (value, end position)."""
    try:
        return message.codec(version).decode(view, pos)
    except DecodeError as exc:
        raise DecodeError(f"{message.name} v{version}: {exc}") from None
    except (struct.error, IndexError, ValueError) as exc:
        raise DecodeError(f"{message.name} v{version}: truncated or malformed: {exc}") from None


# -- validation (slow, for tests and clients) -------------------------------------------------


def validate(message: Message, version: int, value: Mapping[str, Any]) -> None:
    """Raise :class:`EncodeError` for what :func:`encode` would silently accept.

    Checks unknown keys, null in non-nullable fields, and — as Kafka's
    generated code does — a non-default value in a field that ``version``
    lacks unless the field is ignorable. Not used on the hot path.
    """
    _validate(message.fields, version, value, message.name)


def _validate(fields: Sequence[Field], version: int, value: Any, where: str) -> None:
    if not isinstance(value, Mapping):
        raise EncodeError(f"{where}: expected a mapping, got {type(value).__name__}")
    known = {f.name: f for f in fields}
    for key in value:
        if key not in known:
            raise EncodeError(f"{where}: unknown field {key!r}")
    for f in fields:
        if f.name not in value:
            continue
        item = value[f.name]
        what = f"{where}.{f.name}"
        if not f.present(version):
            if not f.ignorable and item != f.default_value(version):
                raise EncodeError(f"{what} is not in version {version} and is not ignorable")
            continue
        if item is None:
            if not f.is_nullable(version):
                raise EncodeError(f"{what} is not nullable in version {version}")
            continue
        if f.item_type == "struct":
            for element in item if f.is_array else [item]:
                _validate(f.fields, version, element, what)


__all__ = [
    "INLINE_RECORDS_LIMIT",
    "MAX_VERSION",
    "MISSING",
    "NO_VERSIONS",
    "Api",
    "Chunk",
    "F",
    "Field",
    "Message",
    "RecordsRef",
    "StructCodec",
    "Versions",
    "decode",
    "decode_from",
    "encode",
    "encode_chunks",
    "parse_versions",
    "validate",
]
