"""Compilation of a field list, at one version, into closures that read and write it.

:class:`StructCodec` walks the fields once and builds, per struct, a tuple of
decode operations ``(view, pos, out_dict) -> pos`` and encode operations
``(buf, value_dict, holes) -> None``, plus the tagged-field section handling
of flexible versions. Everything the version decides (presence, nullability,
compact or fixed lengths, tags) is decided here, once; the closures only move
bytes. Consecutive fixed-width fields share one precompiled ``struct.Struct``.

Decoding raises :class:`DecodeError` for what it checks (lengths, counts,
nulls, tagged-field sizes) and lets ``struct.error``/``IndexError`` escape
from fixed-width reads past the end; :func:`seglog.protocol.schema.decode`
turns those into :class:`DecodeError`. Encoding appends to one ``bytearray``;
records objects that are not copied are recorded as ``(offset, object)``
holes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any, Final, TypeAlias

from seglog.protocol import primitives as p
from seglog.protocol._fields import FIXED_CODES, INLINE_RECORDS_LIMIT, MISSING, Field
from seglog.protocol.errors import DecodeError, EncodeError

_IMMUTABLE: Final = (int, float, str, bytes, type(None), type(p.ZERO_UUID))


ValueReader: TypeAlias = Callable[[memoryview, int], tuple[Any, int]]
ValueWriter: TypeAlias = Callable[[bytearray, Any, list[tuple[int, Sized]]], None]
DecodeOp: TypeAlias = Callable[[memoryview, int, dict[str, Any]], int]
EncodeOp: TypeAlias = Callable[[bytearray, Mapping[str, Any], list[tuple[int, Sized]]], None]

_INT16_UNPACK = p.INT16.unpack_from
_INT32_UNPACK = p.INT32.unpack_from
_INT8_UNPACK = p.INT8.unpack_from
_INT16_PACK = p.INT16.pack
_INT32_PACK = p.INT32.pack
_read_uvarint = p.read_uvarint
_write_uvarint = p.write_uvarint


def _read_len(view: memoryview, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length (-1 = null): inline fast path for one-byte compact lengths."""
    if compact:
        n = view[pos]
        if n < 0x80:
            return n - 1, pos + 1
        n, pos = _read_uvarint(view, pos)
        return n - 1, pos
    if wide:
        return _INT32_UNPACK(view, pos)[0], pos + 4
    return _INT16_UNPACK(view, pos)[0], pos + 2


def _write_len(buf: bytearray, n: int, compact: bool, wide: bool) -> None:
    if compact:
        if n < 0x7F:
            buf.append(n + 1)
        else:
            _write_uvarint(buf, n + 1)
    elif wide:
        buf += _INT32_PACK(n)
    else:
        buf += _INT16_PACK(n)


def _null(what: str, pos: int) -> DecodeError:
    return DecodeError(f"{what}: null or negative length at position {pos}")


def _overrun(what: str, n: int, pos: int) -> DecodeError:
    return DecodeError(f"{what}: {n} bytes at position {pos} run past the end")


def _min_size(f: Field, compact: bool, codec: StructCodec | None) -> int:
    """A lower bound of the encoded size of one value of ``f``'s item type."""
    kind = f.item_type
    if kind in FIXED_CODES:
        return struct.calcsize(">" + FIXED_CODES[kind])
    if kind == "uuid":
        return 16
    if kind == "struct":
        assert codec is not None
        return codec.min_size
    return 1 if compact else (2 if kind == "string" else 4)


def _sized_reader(kind: str, compact: bool, nullable: bool, what: str) -> ValueReader:
    """Reader of a string, bytes or records value: length checked, then sliced."""
    as_str = kind == "string"
    as_bytes = kind == "bytes"
    width = 2 if as_str else 4
    unpack = _INT16_UNPACK if as_str else _INT32_UNPACK

    def read_sized(view: memoryview, pos: int) -> tuple[Any, int]:
        if compact:
            n = view[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = _read_uvarint(view, pos)
            n -= 1
        else:
            n = unpack(view, pos)[0]
            pos += width
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise _null(what, pos)
        end = pos + n
        if end > len(view):
            raise _overrun(what, n, pos)
        if as_str:
            return str(view[pos:end], "utf-8"), end
        if as_bytes:
            return bytes(view[pos:end]), end
        return view[pos:end], end  # records: a view into the frame, never a copy

    return read_sized


def _scalar_reader(kind: str, compact: bool, nullable: bool, what: str) -> ValueReader:
    """``(view, pos) -> (value, pos)`` for a non-struct, non-array type."""
    if kind in FIXED_CODES:
        fmt = struct.Struct(">" + FIXED_CODES[kind])
        unpack, size = fmt.unpack_from, fmt.size

        def read_fixed(view: memoryview, pos: int) -> tuple[Any, int]:
            return unpack(view, pos)[0], pos + size

        return read_fixed
    if kind == "uuid":
        return p.read_uuid
    return _sized_reader(kind, compact, nullable, what)


def _string_writer(compact: bool, nullable: bool, what: str) -> ValueWriter:
    def write_string(buf: bytearray, value: Any, holes: list[tuple[int, Sized]]) -> None:
        if value is None:
            if not nullable:
                raise EncodeError(f"{what} is not nullable")
            _write_len(buf, -1, compact, False)
            return
        data = value.encode("utf-8")
        n = len(data)
        if compact:
            if n < 0x7F:
                buf.append(n + 1)
            else:
                _write_uvarint(buf, n + 1)
        elif n <= 0x7FFF:
            buf += _INT16_PACK(n)
        else:
            raise EncodeError(f"{what}: {n} bytes do not fit an int16 length")
        buf += data

    return write_string


def _bytes_writer(records: bool, compact: bool, nullable: bool, what: str) -> ValueWriter:
    def write_bytes(buf: bytearray, value: Any, holes: list[tuple[int, Sized]]) -> None:
        if value is None:
            if not nullable:
                raise EncodeError(f"{what} is not nullable")
            _write_len(buf, -1, compact, True)
            return
        if isinstance(value, (bytes, bytearray)):
            n = len(value)
        elif isinstance(value, memoryview):
            n = value.nbytes
        elif records:
            # A hole: the object itself becomes a chunk, sent by the caller.
            _write_len(buf, len(value), compact, True)
            holes.append((len(buf), value))
            return
        else:
            raise EncodeError(f"{what}: expected bytes, got {type(value).__name__}")
        if compact:
            if n < 0x7F:
                buf.append(n + 1)
            else:
                _write_uvarint(buf, n + 1)
        else:
            buf += _INT32_PACK(n)
        if records and n >= INLINE_RECORDS_LIMIT:
            holes.append((len(buf), value))
        else:
            buf += value

    return write_bytes


def _scalar_writer(kind: str, compact: bool, nullable: bool, what: str) -> ValueWriter:
    """``(buf, value, holes)`` for a non-struct, non-array type."""
    if kind in FIXED_CODES:
        pack = struct.Struct(">" + FIXED_CODES[kind]).pack

        def write_fixed(buf: bytearray, value: Any, holes: list[tuple[int, Sized]]) -> None:
            buf += pack(value)

        return write_fixed
    if kind == "uuid":

        def write_uuid(buf: bytearray, value: Any, holes: list[tuple[int, Sized]]) -> None:
            buf += value.bytes

        return write_uuid
    if kind == "string":
        return _string_writer(compact, nullable, what)
    return _bytes_writer(kind == "records", compact, nullable, what)


class StructCodec:
    """The compiled reader and writer of one struct (or message body) at one version."""

    __slots__ = (
        "decode",
        "encode_into",
        "fields",
        "flexible",
        "is_default",
        "min_size",
        "name",
        "version",
    )

    def __init__(self, fields: Sequence[Field], version: int, flexible: bool, name: str) -> None:
        self.fields = tuple(fields)
        self.version = version
        self.flexible = flexible
        self.name = name
        template: dict[str, Any] = {}
        factories: list[tuple[str, Field]] = []
        decode_ops: list[DecodeOp] = []
        encode_ops: list[EncodeOp] = []
        tag_readers: dict[int, tuple[str, ValueReader]] = {}
        tag_writers: list[tuple[int, str, ValueWriter, Callable[[Any], bool]]] = []
        run: list[tuple[str, str, Any]] = []  # pending fixed-width fields (name, code, default)
        min_size = 1 if flexible else 0
        defaults_check: list[tuple[str, Callable[[Any], bool]]] = []

        def flush_run() -> None:
            if run:
                decode_ops.append(_decode_run(run))
                encode_ops.append(_encode_run(run))
                run.clear()

        for f in self.fields:
            default = f.default_value(version)
            on_wire = f.present(version)
            tagged = on_wire and flexible and f.tagged_in(version)
            if not on_wire or tagged:
                if isinstance(default, _IMMUTABLE):
                    template[f.name] = default
                else:
                    factories.append((f.name, f))
            if not on_wire:
                continue
            what = f"{name}.{f.name}"
            compact = flexible and not f.never_flexible
            nullable = f.is_nullable(version)
            nested = (
                StructCodec(f.fields, version, compact, what) if f.item_type == "struct" else None
            )
            is_default = _default_predicate(f, version, nested)
            if tagged:
                # Only in the trailing tagged-field section, and only when not at its default.
                assert f.tag is not None
                reader, writer = _value_codec(f, compact, nullable, nested, what)
                tag_readers[f.tag] = (f.name, reader)
                tag_writers.append((f.tag, f.name, writer, is_default))
                continue
            defaults_check.append((f.name, is_default))
            if f.is_array:
                min_size += 1 if compact else 4
            elif f.type == "struct" and nullable:
                min_size += 1
            else:
                min_size += _min_size(f, compact, nested)
            if f.type in FIXED_CODES:
                run.append((f.name, FIXED_CODES[f.type], default))
                continue
            flush_run()
            decode_ops.append(_decode_op(f, compact, nullable, nested, what))
            encode_ops.append(_encode_op(f, compact, nullable, nested, what, default))
        flush_run()
        tag_writers.sort(key=lambda item: item[0])
        self.min_size = min_size
        self.decode = _struct_decoder(
            template, factories, version, decode_ops, flexible, tag_readers, name
        )
        self.encode_into = _struct_encoder(encode_ops, flexible, tag_writers, name)
        self.is_default = _struct_default_predicate(defaults_check, tag_writers)


def _decode_run(run: list[tuple[str, str, Any]]) -> DecodeOp:
    fmt = struct.Struct(">" + "".join(code for _, code, _ in run))
    unpack, size = fmt.unpack_from, fmt.size
    if len(run) == 1:
        key = run[0][0]

        def read_one(view: memoryview, pos: int, d: dict[str, Any]) -> int:
            d[key] = unpack(view, pos)[0]
            return pos + size

        return read_one
    keys = tuple(name for name, _, _ in run)

    def read_run(view: memoryview, pos: int, d: dict[str, Any]) -> int:
        d.update(zip(keys, unpack(view, pos), strict=True))
        return pos + size

    return read_run


def _encode_run(run: list[tuple[str, str, Any]]) -> EncodeOp:
    pack = struct.Struct(">" + "".join(code for _, code, _ in run)).pack
    keys = tuple(name for name, _, _ in run)
    defaults = tuple(default for _, _, default in run)
    if len(run) == 1:
        key, default = keys[0], defaults[0]

        def write_one(buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]) -> None:
            buf += pack(d.get(key, default))

        return write_one

    def write_run(buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]) -> None:
        buf += pack(*map(d.get, keys, defaults))

    return write_run


def _value_codec(
    f: Field, compact: bool, nullable: bool, nested: StructCodec | None, what: str
) -> tuple[ValueReader, ValueWriter]:
    """Reader and writer of one whole value of ``f`` (used for tagged fields)."""
    op_read = _decode_op(f, compact, nullable, nested, what)
    op_write = _encode_op(f, compact, nullable, nested, what, None)
    key = f.name

    def read(view: memoryview, pos: int) -> tuple[Any, int]:
        box: dict[str, Any] = {}
        pos = op_read(view, pos, box)
        return box[key], pos

    def write(buf: bytearray, value: Any, holes: list[tuple[int, Sized]]) -> None:
        op_write(buf, {key: value}, holes)

    return read, write


def _item_codec(
    f: Field, compact: bool, nested: StructCodec | None, what: str
) -> tuple[ValueReader, ValueWriter]:
    kind = f.item_type
    if kind != "struct":
        # Array elements are never null; only the array itself may be.
        return _scalar_reader(kind, compact, False, what), _scalar_writer(
            kind, compact, False, what
        )
    assert nested is not None
    return nested.decode, nested.encode_into


def _decode_op(
    f: Field, compact: bool, nullable: bool, nested: StructCodec | None, what: str
) -> DecodeOp:
    key = f.name
    kind = f.item_type
    if f.is_array:
        item_size = max(_min_size(f, compact, nested), 1)
        if kind in FIXED_CODES and kind != "bool":
            code = FIXED_CODES[kind]
            width = struct.calcsize(">" + code)

            def read_fixed_array(view: memoryview, pos: int, d: dict[str, Any]) -> int:
                n, pos = _read_len(view, pos, compact, True)
                if n < 0:
                    if n == -1 and nullable:
                        d[key] = None
                        return pos
                    raise _null(what, pos)
                if n * width > len(view) - pos:
                    raise _overrun(what, n * width, pos)
                d[key] = list(struct.unpack_from(f">{n}{code}", view, pos))
                return pos + n * width

            return read_fixed_array
        read_item = _item_codec(f, compact, nested, what)[0]

        def read_array(view: memoryview, pos: int, d: dict[str, Any]) -> int:
            n, pos = _read_len(view, pos, compact, True)
            if n < 0:
                if n == -1 and nullable:
                    d[key] = None
                    return pos
                raise _null(what, pos)
            if n * item_size > len(view) - pos:
                raise DecodeError(f"{what}: {n} elements at position {pos} cannot fit")
            items: list[Any] = []
            append = items.append
            for _ in range(n):
                item, pos = read_item(view, pos)
                append(item)
            d[key] = items
            return pos

        return read_array
    if kind == "struct":
        assert nested is not None
        read_struct = nested.decode
        if not nullable:

            def read_nested(view: memoryview, pos: int, d: dict[str, Any]) -> int:
                d[key], pos = read_struct(view, pos)
                return pos

            return read_nested

        def read_optional(view: memoryview, pos: int, d: dict[str, Any]) -> int:
            if _INT8_UNPACK(view, pos)[0] < 0:
                d[key] = None
                return pos + 1
            d[key], pos = read_struct(view, pos + 1)
            return pos

        return read_optional
    if kind in ("string", "records"):
        return _sized_op(key, kind == "string", compact, nullable, what)
    read = _scalar_reader(kind, compact, nullable, what)

    def read_scalar(view: memoryview, pos: int, d: dict[str, Any]) -> int:
        d[key], pos = read(view, pos)
        return pos

    return read_scalar


def _sized_op(key: str, as_str: bool, compact: bool, nullable: bool, what: str) -> DecodeOp:
    """A string or records field, read in place (the two hot variable-length cases)."""
    width = 2 if as_str else 4
    unpack = _INT16_UNPACK if as_str else _INT32_UNPACK

    def read_sized(view: memoryview, pos: int, d: dict[str, Any]) -> int:
        if compact:
            n = view[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = _read_uvarint(view, pos)
            n -= 1
        else:
            n = unpack(view, pos)[0]
            pos += width
        if n < 0:
            if n == -1 and nullable:
                d[key] = None
                return pos
            raise _null(what, pos)
        end = pos + n
        if end > len(view):
            raise _overrun(what, n, pos)
        d[key] = str(view[pos:end], "utf-8") if as_str else view[pos:end]
        return end

    return read_sized


def _encode_op(
    f: Field, compact: bool, nullable: bool, nested: StructCodec | None, what: str, default: Any
) -> EncodeOp:
    key = f.name
    kind = f.item_type
    if f.is_array:
        if kind in FIXED_CODES and kind != "bool":
            code = FIXED_CODES[kind]

            def write_fixed_array(
                buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]
            ) -> None:
                items = d.get(key, default)
                if items is None:
                    if not nullable:
                        raise EncodeError(f"{what} is not nullable")
                    _write_len(buf, -1, compact, True)
                    return
                _write_len(buf, len(items), compact, True)
                buf += struct.pack(f">{len(items)}{code}", *items)

            return write_fixed_array
        write_item = _item_codec(f, compact, nested, what)[1]
        null = b"\x00" if compact else b"\xff\xff\xff\xff"

        def write_array(
            buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]
        ) -> None:
            items = d.get(key, default)
            if items is None:
                if not nullable:
                    raise EncodeError(f"{what} is not nullable")
                buf += null
                return
            n = len(items)
            if not compact:
                buf += _INT32_PACK(n)
            elif n < 0x7F:
                buf.append(n + 1)
            else:
                _write_uvarint(buf, n + 1)
            for item in items:
                write_item(buf, item, holes)

        return write_array
    if kind == "struct":
        assert nested is not None
        encode_into = nested.encode_into

        def write_nested(
            buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]
        ) -> None:
            value = d.get(key, default)
            if value is None:
                if not nullable:
                    raise EncodeError(f"{what} is not nullable")
                buf.append(0xFF)  # int8 -1: absent
                return
            if nullable:
                buf.append(1)
            encode_into(buf, value, holes)

        return write_nested
    if kind == "records":
        return _records_op(key, default, compact, nullable, what)
    write = _scalar_writer(kind, compact, nullable, what)

    def write_scalar(buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]) -> None:
        write(buf, d.get(key, default), holes)

    return write_scalar


def _records_op(key: str, default: Any, compact: bool, nullable: bool, what: str) -> EncodeOp:
    """A records field: the hot path of Fetch responses, written in place.

    Small bytes-like values are copied into the buffer; large ones and any
    other sized object (a file region) are left as holes (see the schema).
    """
    null = b"\x00" if compact else b"\xff\xff\xff\xff"

    def write_records(buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]) -> None:
        value = d.get(key, default)
        if value is None:
            if not nullable:
                raise EncodeError(f"{what} is not nullable")
            buf += null
            return
        if isinstance(value, (bytes, bytearray)):
            n = len(value)
            copy = n < INLINE_RECORDS_LIMIT
        elif isinstance(value, memoryview):
            n = value.nbytes
            copy = n < INLINE_RECORDS_LIMIT
        else:
            n = len(value)
            copy = False
        if not compact:
            buf += _INT32_PACK(n)
        elif n < 0x7F:
            buf.append(n + 1)
        else:
            _write_uvarint(buf, n + 1)
        if copy:
            buf += value
        else:
            holes.append((len(buf), value))

    return write_records


def _default_predicate(f: Field, version: int, nested: StructCodec | None) -> Callable[[Any], bool]:
    """Whether a value equals the field's default (tagged fields are then not written)."""
    default = f.default_value(version)
    if default is None:
        return lambda value: value is None
    if f.is_array:
        return lambda value: value is not None and len(value) == 0
    if nested is not None:
        is_default = nested.is_default
        return lambda value: value is not None and is_default(value)
    return lambda value: bool(value == default)


def _struct_default_predicate(
    checks: list[tuple[str, Callable[[Any], bool]]],
    tag_writers: list[tuple[int, str, ValueWriter, Callable[[Any], bool]]],
) -> Callable[[Mapping[str, Any]], bool]:
    items = checks + [(name, predicate) for _, name, _, predicate in tag_writers]

    def is_default(value: Mapping[str, Any]) -> bool:
        return all(predicate(value[name]) for name, predicate in items if name in value)

    return is_default


def _struct_decoder(
    template: dict[str, Any],
    factories: list[tuple[str, Field]],
    version: int,
    ops: list[DecodeOp],
    flexible: bool,
    tag_readers: dict[int, tuple[str, ValueReader]],
    name: str,
) -> Callable[[memoryview, int], tuple[dict[str, Any], int]]:
    ops_t = tuple(ops)
    makers = tuple((key, f, version) for key, f in factories)

    def read_tags(view: memoryview, pos: int, d: dict[str, Any]) -> int:
        n = view[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = _read_uvarint(view, pos)
        if n == 0:
            return pos
        if n * 2 > len(view) - pos:
            raise DecodeError(f"{name}: {n} tagged fields at position {pos} cannot fit")
        for _ in range(n):
            tag, pos = _read_uvarint(view, pos)
            size, pos = _read_uvarint(view, pos)
            end = pos + size
            if end > len(view):
                raise _overrun(f"{name} tagged field {tag}", size, pos)
            known = tag_readers.get(tag)
            if known is not None:  # unknown tags are skipped, as Kafka does
                value, stop = known[1](view[:end], pos)
                if stop != end:
                    raise DecodeError(f"{name} tagged field {tag}: {end - stop} stray bytes")
                d[known[0]] = value
            pos = end
        return pos

    def decode(view: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        d = template.copy()
        for key, f, v in makers:
            d[key] = f.default_value(v)
        for op in ops_t:
            pos = op(view, pos, d)
        if flexible:
            pos = read_tags(view, pos, d)
        return d, pos

    if makers:
        return decode

    # The common cases without per-call defaults to build: specialised loops.
    if flexible:

        def decode_flexible(view: memoryview, pos: int) -> tuple[dict[str, Any], int]:
            d = template.copy()
            for op in ops_t:
                pos = op(view, pos, d)
            if view[pos] == 0:  # an empty tagged-field section, by far the most common
                return d, pos + 1
            return d, read_tags(view, pos, d)

        return decode_flexible

    def decode_plain(view: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        d = template.copy()
        for op in ops_t:
            pos = op(view, pos, d)
        return d, pos

    return decode_plain


def _struct_encoder(
    ops: list[EncodeOp],
    flexible: bool,
    tag_writers: list[tuple[int, str, ValueWriter, Callable[[Any], bool]]],
    name: str,
) -> Callable[[bytearray, Mapping[str, Any], list[tuple[int, Sized]]], None]:
    ops_t = tuple(ops)
    tags_t = tuple(tag_writers)

    def write_tags(buf: bytearray, d: Mapping[str, Any]) -> None:
        present: list[tuple[int, bytearray]] = []
        for tag, key, write, is_default in tags_t:
            value = d.get(key, MISSING)
            if value is MISSING or is_default(value):
                continue
            data = bytearray()
            holes: list[tuple[int, Sized]] = []
            write(data, value, holes)
            if holes:
                raise EncodeError(f"{name}.{key}: records cannot be a tagged field")
            present.append((tag, data))
        _write_uvarint(buf, len(present))
        for tag, data in present:
            _write_uvarint(buf, tag)
            _write_uvarint(buf, len(data))
            buf += data

    if not flexible:

        def encode_plain(
            buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]
        ) -> None:
            for op in ops_t:
                op(buf, d, holes)

        return encode_plain
    if not tags_t:

        def encode_untagged(
            buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]
        ) -> None:
            for op in ops_t:
                op(buf, d, holes)
            buf.append(0)  # an empty tagged-field section

        return encode_untagged

    tag_keys = frozenset(key for _, key, _, _ in tags_t)

    def encode(buf: bytearray, d: Mapping[str, Any], holes: list[tuple[int, Sized]]) -> None:
        for op in ops_t:
            op(buf, d, holes)
        if tag_keys.isdisjoint(d):
            buf.append(0)  # no tagged field given: an empty section
        else:
            write_tags(buf, d)

    return encode


__all__ = ["StructCodec"]
