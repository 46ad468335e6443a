"""The compression codecs of record batches: none, gzip, snappy, lz4, zstd.

Snappy, LZ4 and zstd go through ``cramjam`` (one Rust extension with wheels
everywhere); gzip uses the standard library's zlib, which is also C and
handles concatenated members. Each codec compresses a batch's whole records
block; what Kafka's Java client and librdkafka expect of each::

    gzip      := member+                        RFC 1952; Java writes one member
    snappy    := xerial | raw_block             Java and librdkafka write xerial
    xerial    := "\\x82SNAPPY\\x00" version:int32 compatible:int32 xblock*
    xblock    := length:int32 raw_block[length] each holds up to 32 KiB of input
    lz4       := "\\x04\\x22\\x4d\\x18" FLG BD [content_size:uint64le] HC lz4_block* end
    lz4_block := size:uint32le data             size's high bit set: data is stored as is
    end       := 00 00 00 00
    zstd      := zstd_frame+

Encoding writes xerial snappy with version 1 / compatible 1 and 32 KiB input
blocks, as snappy-java does. LZ4 frames are written as Kafka's Java client
writes them: FLG 0x60 (independent blocks, no checksums), BD 0x40 (64 KiB
blocks). Kafka's Java reader rejects linked blocks ("Dependent block stream is
unsupported"), which are the default of most LZ4 frame encoders, cramjam's
included.

Decoding is lenient where Kafka's readers are: raw snappy without the xerial
header, any valid LZ4 frame, and (for legacy magic 0 messages only) an LZ4
frame whose header checksum byte was computed the way Kafka 0.8 / 0.9 clients
did, over the magic number too (KIP-57).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")
_FOUR_UINT32_LE = struct.Struct("<4I")

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZE = 64 * 1024
# FLG 0x60: version 1, independent blocks, no checksums, no content size; BD 0x40:
# 64 KiB blocks; 0x82: the header checksum of those two bytes.
_LZ4_HEADER = LZ4_FRAME_MAGIC + b"\x60\x40\x82"
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01

GZIP_LEVEL = 6  # java.util.zip's default, which Kafka's GZIPOutputStream uses
ZSTD_LEVEL = 3  # Kafka's compression.zstd.level default


class Codec(IntEnum):
    """Codec ids as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Codec:
        """The codec called ``name``: ``none`` (or ``uncompressed``), ``gzip``, ``snappy``, ...

        Raises ValueError for anything else, including the topic-level value
        ``producer``, which names a policy, not a codec.
        """
        key = name.strip().lower()
        if key == "uncompressed":
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise ValueError(f"unknown compression codec {name!r}") from None


# --- xxHash32, for the one byte of an LZ4 frame header ------------------------------------
# cramjam does not expose xxHash; the legacy-LZ4 repair below needs it over at most 14
# bytes, so a plain implementation of the published algorithm is enough.

_XXH_P1 = 0x9E3779B1
_XXH_P2 = 0x85EBCA77
_XXH_P3 = 0xC2B2AE3D
_XXH_P4 = 0x27D4EB2F
_XXH_P5 = 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_round(acc: int, lane: int) -> int:
    return (_rotl32((acc + lane * _XXH_P2) & _M32, 13) * _XXH_P1) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the LZ4 frame format's checksum)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v1 = (seed + _XXH_P1 + _XXH_P2) & _M32
        v2 = (seed + _XXH_P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _XXH_P1) & _M32
        while pos + 16 <= n:
            a, b, c, d = _FOUR_UINT32_LE.unpack_from(data, pos)
            v1 = _xxh32_round(v1, a)
            v2 = _xxh32_round(v2, b)
            v3 = _xxh32_round(v3, c)
            v4 = _xxh32_round(v4, d)
            pos += 16
        acc = _rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)
    else:
        acc = seed + _XXH_P5
    acc = (acc + n) & _M32
    while pos + 4 <= n:
        (lane,) = _UINT32_LE.unpack_from(data, pos)
        acc = (_rotl32((acc + lane * _XXH_P3) & _M32, 17) * _XXH_P4) & _M32
        pos += 4
    while pos < n:
        acc = (_rotl32((acc + data[pos] * _XXH_P5) & _M32, 11) * _XXH_P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _XXH_P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _XXH_P3) & _M32
    acc ^= acc >> 16
    return acc


def _lz4_with_correct_header_checksum(view: memoryview) -> BytesLike:
    """``view`` with its frame header checksum byte recomputed, whatever it held.

    Kafka ignores that byte for magic 0 (old clients hashed the magic number
    too); cramjam always checks it, so the byte is rewritten instead. Anything
    that is not a recognisable frame header is returned unchanged for the
    decoder to reject.
    """
    if len(view) < 7 or bytes(view[:4]) != LZ4_FRAME_MAGIC:
        return view
    flg = view[4]
    end = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        end += 8
    if flg & _LZ4_FLG_DICT_ID:
        end += 4
    if len(view) <= end:
        return view
    checksum = (_xxh32(bytes(view[4:end])) >> 8) & 0xFF
    if view[end] == checksum:
        return view
    fixed = bytearray(view)
    fixed[end] = checksum
    return fixed


# --- the codecs ---------------------------------------------------------------------------


def _snappy_compress(data: BytesLike) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION))
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: BytesLike) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size or bytes(view[:8]) != XERIAL_MAGIC:
        # No xerial header: a plain snappy block, as snappy-java's reader also accepts.
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    position = _XERIAL_HEADER.size
    end = len(view)
    while position < end:
        if position + 4 > end:
            raise CorruptRecordError("snappy: truncated xerial block length")
        (length,) = _INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise CorruptRecordError(f"snappy: xerial block of {length} bytes runs past the data")
        out += cramjam.snappy.decompress_raw(view[position : position + length])
        position += length
    return bytes(out)


def _lz4_compress(data: BytesLike) -> bytes:
    # The frame is assembled here, as Kafka's Lz4BlockOutputStream lays it out, because
    # cramjam's frame encoder links blocks by default and Kafka's reader rejects that.
    view = memoryview(data)
    out = bytearray(_LZ4_HEADER)
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            # Incompressible: stored as is, flagged by the size's high bit.
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BLOCK)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)


def _gzip_compress(data: BytesLike) -> bytes:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip wrapper
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: BytesLike) -> bytes:
    view = memoryview(data)
    if not len(view):
        raise CorruptRecordError("gzip: empty stream")
    out = bytearray()
    while len(view):
        decoder = zlib.decompressobj(wbits=31)
        out += decoder.decompress(view)
        if not decoder.eof:
            raise CorruptRecordError("gzip: truncated stream")
        # Several members back to back are one valid stream (RFC 1952 section 2.2).
        view = memoryview(decoder.unused_data)
    return bytes(out)


def compress(codec: Codec | int, data: BytesLike) -> bytes:
    """Compress ``data`` with ``codec`` in the form Kafka's clients write."""
    match Codec(codec):
        case Codec.NONE:
            return bytes(data)
        case Codec.GZIP:
            return _gzip_compress(data)
        case Codec.SNAPPY:
            return _snappy_compress(data)
        case Codec.LZ4:
            return _lz4_compress(data)
        case Codec.ZSTD:
            return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    raise ValueError(f"unknown codec {codec}")  # pragma: no cover - Codec() raised already


def decompress(
    codec: Codec | int, data: BytesLike, *, ignore_lz4_header_checksum: bool = False
) -> bytes:
    """Decompress ``data``; a damaged stream is a CorruptRecordError naming the codec.

    ``ignore_lz4_header_checksum`` is for the values of legacy magic 0
    messages, whose LZ4 frame header checksum old clients computed wrongly.
    """
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
                if ignore_lz4_header_checksum:
                    data = _lz4_with_correct_header_checksum(memoryview(data))
                return bytes(cramjam.lz4.decompress(data))
            case Codec.ZSTD:
                return bytes(cramjam.zstd.decompress(data))
    except CorruptRecordError:
        raise
    except Exception as exc:  # zlib.error, cramjam.DecompressionError, ...: one error for callers
        raise CorruptRecordError(f"cannot decompress {kind.name.lower()} data: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")  # pragma: no cover
