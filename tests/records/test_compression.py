from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.records.compression import XERIAL_MAGIC, Codec, compress, decompress


@given(data=st.binary(max_size=100_000), codec=st.sampled_from(list(Codec)))
def test_round_trip(data: bytes, codec: Codec) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_writes_xerial_and_reads_both_forms() -> None:
    data = b"kafka " * 20_000
    framed = compress(Codec.SNAPPY, data)
    assert framed.startswith(XERIAL_MAGIC)
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    assert decompress(Codec.SNAPPY, framed) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Codec.SNAPPY, raw) == data


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(Codec.GZIP, compress(Codec.GZIP, b"a") + compress(Codec.GZIP, b"b")) == b"ab"


def test_codec_names() -> None:
    assert Codec.from_name("zstd") is Codec.ZSTD
    assert Codec.from_name("uncompressed") is Codec.NONE
    with pytest.raises(ValueError):
        Codec.from_name("brotli")


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_damaged_stream_is_a_clear_error(codec: Codec) -> None:
    blob = bytearray(compress(codec, b"payload " * 1000))
    with pytest.raises(CorruptRecordError, match=codec.name.lower()):
        decompress(codec, bytes(blob[: len(blob) // 2]) + b"\xff" * 7)
