"""The compression codecs of record batches: none, gzip, snappy, lz4, zstd.

All of them through ``cramjam`` (one Rust extension), except gzip, which uses
the standard library's zlib (also C, and it handles concatenated members).

Snappy comes in two forms on the wire: Kafka's Java client and librdkafka
write the *xerial* framing, and some clients send a plain snappy block.
Decoding accepts both; encoding writes xerial, as the Java client does::

    xerial  => magic:"\\x82SNAPPY\\x00" version:int32 compatible:int32 block*
    block   => length:int32 snappy_block:bytes[length]

LZ4 is the standard LZ4 frame format (Kafka's v2 batches; magic 0/1 used a
broken frame checksum, which legacy.py does not need to write).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")
_XERIAL_BLOCK = 32 * 1024


class Codec(IntEnum):
    """Codec ids as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Codec:
        """The codec called ``name`` (``none``/``uncompressed``, ``gzip``, ...)."""
        key = name.strip().lower()
        if key in ("uncompressed", "none", "producer"):
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise ValueError(f"unknown compression codec {name!r}") from None


def _snappy_compress(data: BytesLike) -> bytes:
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: BytesLike) -> bytes:
    view = memoryview(data)
    if len(view) >= 16 and bytes(view[:8]) == XERIAL_MAGIC:
        out = bytearray()
        position = 16
        while position < len(view):
            if position + 4 > len(view):
                raise CorruptRecordError("truncated xerial snappy block length")
            (length,) = _INT32.unpack_from(view, position)
            position += 4
            if length < 0 or position + length > len(view):
                raise CorruptRecordError("truncated xerial snappy block")
            out += bytes(cramjam.snappy.decompress_raw(view[position : position + length]))
            position += length
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(view))


def _gzip_decompress(data: BytesLike) -> bytes:
    out = bytearray()
    view = memoryview(data)
    while len(view):
        decoder = zlib.decompressobj(wbits=31)
        out += decoder.decompress(view)
        if not decoder.eof:
            raise CorruptRecordError("truncated gzip stream")
        view = memoryview(decoder.unused_data)
    return bytes(out)


def compress(codec: Codec | int, data: BytesLike) -> bytes:
    """Compress ``data`` with ``codec``."""
    match Codec(codec):
        case Codec.NONE:
            return bytes(data)
        case Codec.GZIP:
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
            return compressor.compress(data) + compressor.flush()
        case Codec.SNAPPY:
            return _snappy_compress(data)
        case Codec.LZ4:
            return bytes(cramjam.lz4.compress(data))
        case Codec.ZSTD:
            return bytes(cramjam.zstd.compress(data, level=3))
    raise ValueError(f"unknown codec {codec}")


def decompress(codec: Codec | int, data: BytesLike) -> bytes:
    """Decompress ``data``; a damaged stream is a CorruptRecordError naming the codec."""
    try:
        kind = Codec(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec}") from None
    try:
        match kind:
            case Codec.NONE:
                return bytes(data)
            case Codec.GZIP:
                return _gzip_decompress(data)
            case Codec.SNAPPY:
                return _snappy_decompress(data)
            case Codec.LZ4:
                return bytes(cramjam.lz4.decompress(data))
            case Codec.ZSTD:
                return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # each backend raises its own error type
        raise CorruptRecordError(f"cannot decompress {kind.name.lower()} data: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")
