"""Codecs: round trips, the exact framings Kafka expects, and interop with other libraries.

python-snappy, lz4 (python-lz4) and zstandard are independent of cramjam, so
they serve as oracles here; kafka-python's codec module adds its xerial encoder.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import struct

import cramjam
import lz4.block  # type: ignore[import-untyped]
import lz4.frame  # type: ignore[import-untyped]
import pytest
import snappy  # type: ignore[import-untyped]
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from seglog.errors import CorruptRecordError
from seglog.records.compression import (
    LZ4_FRAME_MAGIC,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    Codec,
    _xxh32,
    compress,
    decompress,
)
from tests.records.legacy_encoder import old_kafka_lz4
from tests.records.strategies import codecs

# Compressible and incompressible parts, larger than every codec's block size.
BIG = os.urandom(70_000) + b"kafka " * 40_000 + bytes(range(256)) * 300
COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


@given(data=st.binary(max_size=5000), codec=codecs)
def test_round_trip(data: bytes, codec: Codec) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, bytearray(data)))) == data


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_large_and_empty(codec: Codec) -> None:
    for data in (BIG, b""):
        assert decompress(codec, compress(codec, memoryview(data))) == data


def test_codec_names() -> None:
    assert Codec.from_name("zstd") is Codec.ZSTD
    assert Codec.from_name(" GZIP ") is Codec.GZIP
    assert Codec.from_name("none") is Codec.NONE
    assert Codec.from_name("uncompressed") is Codec.NONE
    for name in ("brotli", "producer", ""):
        with pytest.raises(ValueError):
            Codec.from_name(name)


def test_unknown_codec_id() -> None:
    with pytest.raises(CorruptRecordError, match="codec id 5"):
        decompress(5, b"data")
    with pytest.raises(ValueError):
        compress(7, b"data")


# --- snappy --------------------------------------------------------------------------------


def _xerial_blocks(framed: bytes) -> list[bytes]:
    magic, version, compatible = struct.unpack_from(">8sii", framed, 0)
    assert (magic, version, compatible) == (XERIAL_MAGIC, 1, 1)
    blocks = []
    position = 16
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        blocks.append(framed[position + 4 : position + 4 + length])
        position += 4 + length
    assert position == len(framed)
    return blocks


def test_snappy_writes_xerial_with_32k_blocks() -> None:
    framed = compress(Codec.SNAPPY, BIG)
    blocks = [snappy.uncompress(b) for b in _xerial_blocks(framed)]  # python-snappy: raw
    assert b"".join(blocks) == BIG
    assert [len(b) for b in blocks[:-1]] == [XERIAL_BLOCK_SIZE] * (len(blocks) - 1)
    assert 0 < len(blocks[-1]) <= XERIAL_BLOCK_SIZE
    assert kafka_codec.snappy_decode(framed) == BIG
    assert compress(Codec.SNAPPY, b"") == XERIAL_MAGIC + bytes.fromhex("00000001 00000001")


def test_snappy_reads_raw_blocks_and_other_xerial_writers() -> None:
    assert decompress(Codec.SNAPPY, snappy.compress(BIG)) == BIG
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(b"x"))) == b"x"
    # kafka-python's xerial writer, with a block size other than ours.
    framed = kafka_codec.snappy_encode(BIG, xerial_compatible=True, xerial_blocksize=10_000)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(Codec.SNAPPY, framed) == BIG


def test_snappy_truncation_is_corrupt_except_at_block_boundaries() -> None:
    framed = compress(Codec.SNAPPY, b"record " * 10_000)
    boundaries = {16}
    position = 16
    for block in _xerial_blocks(framed):
        position += 4 + len(block)
        boundaries.add(position)
    for cut in range(len(framed)):
        if cut in boundaries:
            # A whole number of blocks is a valid, shorter stream: the record layer
            # notices the missing records.
            assert (b"record " * 10_000).startswith(decompress(Codec.SNAPPY, framed[:cut]))
            continue
        with pytest.raises(CorruptRecordError, match="snappy"):
            decompress(Codec.SNAPPY, framed[:cut])


# --- lz4 -----------------------------------------------------------------------------------


def test_lz4_writes_what_kafka_accepts() -> None:
    framed = compress(Codec.LZ4, BIG)
    # Magic, FLG 0x60 (version 1, independent blocks, no checksums), BD 0x40 (64 KiB),
    # header checksum 0x82: the header Kafka's Java client writes.
    assert framed[:7] == LZ4_FRAME_MAGIC + b"\x60\x40\x82"
    assert framed.endswith(b"\x00\x00\x00\x00")
    position = 7
    sizes = []
    while True:
        (size,) = struct.unpack_from("<I", framed, position)
        position += 4
        if size == 0:
            break
        stored = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        block = framed[position : position + size]
        raw = block if stored else lz4.block.decompress(block, uncompressed_size=65536)
        sizes.append(len(raw))
        position += size
    assert position == len(framed)
    assert sum(sizes) == len(BIG) and max(sizes) == 65536
    assert lz4.frame.decompress(framed) == BIG


@pytest.mark.parametrize(
    "options",
    [
        {},  # python-lz4's defaults: linked blocks, content size
        {"block_linked": False, "store_size": False},
        {"block_linked": False, "content_checksum": True, "block_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "compression_level": 9},
    ],
)
def test_lz4_reads_any_frame(options: dict[str, object]) -> None:
    assert decompress(Codec.LZ4, lz4.frame.compress(BIG, **options)) == BIG


@given(st.binary(max_size=100))
def test_xxh32_matches_lz4_content_checksum(data: bytes) -> None:
    framed = lz4.frame.compress(data, content_checksum=True)
    assert _xxh32(data) == struct.unpack("<I", framed[-4:])[0]


@pytest.mark.parametrize("content_size", [False, True])
def test_lz4_old_kafka_header_checksum(content_size: bool) -> None:
    framed = old_kafka_lz4(b"old lz4 " * 100, content_size)
    with pytest.raises(CorruptRecordError, match="lz4"):
        decompress(Codec.LZ4, framed)
    assert decompress(Codec.LZ4, framed, ignore_lz4_header_checksum=True) == b"old lz4 " * 100
    # Correct checksums are fine in that mode too.
    good = compress(Codec.LZ4, b"new")
    assert decompress(Codec.LZ4, good, ignore_lz4_header_checksum=True) == b"new"
    # So is garbage rejected, and a header cut short.
    for bad in (b"", b"\x04\x22\x4d\x18", framed[:6], b"not lz4 at all"):
        with pytest.raises(CorruptRecordError, match="lz4"):
            decompress(Codec.LZ4, bad, ignore_lz4_header_checksum=True)


# --- zstd and gzip -------------------------------------------------------------------------


def test_zstd_interop() -> None:
    assert zstandard.ZstdDecompressor().decompress(compress(Codec.ZSTD, BIG)) == BIG
    assert decompress(Codec.ZSTD, zstandard.ZstdCompressor().compress(BIG)) == BIG
    streamed = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    assert decompress(Codec.ZSTD, streamed.compress(BIG) + streamed.flush()) == BIG
    two_frames = compress(Codec.ZSTD, b"ab") + compress(Codec.ZSTD, b"cd")
    assert decompress(Codec.ZSTD, two_frames) == b"abcd"


def test_gzip_interop() -> None:
    assert gzip.decompress(compress(Codec.GZIP, BIG)) == BIG
    assert decompress(Codec.GZIP, gzip.compress(BIG, compresslevel=1)) == BIG
    assert decompress(Codec.GZIP, compress(Codec.GZIP, b"a") + compress(Codec.GZIP, b"b")) == b"ab"
    assert kafka_codec.gzip_decode(compress(Codec.GZIP, b"k" * 1000)) == b"k" * 1000


def test_gzip_rejects_empty_and_trailing_garbage() -> None:
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(Codec.GZIP, b"")
    with pytest.raises(CorruptRecordError, match="gzip"):
        decompress(Codec.GZIP, compress(Codec.GZIP, b"a") + b"junk")


# --- damage ----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_damaged_stream_is_a_clear_error(codec: Codec) -> None:
    blob = compress(codec, b"payload " * 1000)
    with pytest.raises(CorruptRecordError, match=codec.name.lower()):
        decompress(codec, blob[: len(blob) // 2] + b"\xff" * 7)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_truncated_at_every_byte_is_corrupt(codec: Codec) -> None:
    blob = compress(codec, os.urandom(200) + b"payload " * 200)
    for cut in range(len(blob)):
        with pytest.raises(CorruptRecordError, match=codec.name.lower()):
            decompress(codec, blob[:cut])


@given(codec=st.sampled_from(COMPRESSED), data=st.binary(max_size=200), flip=st.integers(0))
def test_any_damage_is_corrupt_or_decodes(codec: Codec, data: bytes, flip: int) -> None:
    blob = bytearray(compress(codec, data))
    blob[flip % len(blob)] ^= 1 + flip % 255
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, bytes(blob))


@given(data=st.binary(max_size=3000), block_size=st.integers(1, 4096))
def test_snappy_accepts_xerial_and_raw(data: bytes, block_size: int) -> None:
    raw = snappy.compress(data)  # python-snappy: a plain block, no framing
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(Codec.SNAPPY, raw) == data
    framed = kafka_codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=block_size)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(Codec.SNAPPY, framed) == data
    ours = compress(Codec.SNAPPY, data)
    assert ours.startswith(XERIAL_MAGIC)
    # kafka-python takes a bare 16-byte xerial header (empty input) for a raw block; a
    # batch's records block is never empty, so that case does not arise.
    if data:
        assert kafka_codec.snappy_decode(ours) == data


@given(data=st.binary(max_size=3000), codec=st.sampled_from(COMPRESSED))
def test_kafka_python_codecs_read_ours_and_we_read_theirs(data: bytes, codec: Codec) -> None:
    encode, decode = {
        Codec.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
        Codec.SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
        Codec.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
        Codec.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
    }[codec]
    if data or codec != Codec.SNAPPY:  # the empty xerial stream: see above
        assert decode(compress(codec, data)) == data
    assert decompress(codec, encode(data)) == data
