"""A minimal writer of legacy (magic 0 and 1) messages, for test fixtures only.

seglog itself never writes these formats. Real fixtures come from kafka-python's
LegacyRecordBatchBuilder; this encoder makes what it cannot: damaged or unusual
entries, LogAppendTime wrappers, and magic 0 LZ4 with the old header checksum.
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame  # type: ignore[import-untyped]

TS = 1_700_000_000_000


def _bytes(data: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if data is None else struct.pack(">i", len(data)) + data


def message(
    offset: int,
    key: bytes | None = None,
    value: bytes | None = None,
    *,
    magic: int = 1,
    timestamp: int = TS,
    attributes: int = 0,
    crc: int | None = None,
) -> bytes:
    """One legacy entry; ``crc`` overrides the computed CRC-32."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _bytes(key) + _bytes(value)
    checksum = zlib.crc32(body) if crc is None else crc
    return struct.pack(">qiI", offset, 4 + len(body), checksum) + body


def old_kafka_lz4(data: bytes, content_size: bool = False) -> bytes:
    """An LZ4 frame whose header checksum covers the magic too, as Kafka 0.8 clients wrote."""
    framed = bytearray(
        lz4.frame.compress(
            data, block_linked=False, store_size=content_size, content_checksum=False
        )
    )
    end = 6 + (8 if content_size else 0)
    # python-lz4's content checksum is xxHash32 of the content: an independent oracle.
    oracle = lz4.frame.compress(bytes(framed[:end]), content_checksum=True)
    framed[end] = (struct.unpack("<I", oracle[-4:])[0] >> 8) & 0xFF
    return bytes(framed)
