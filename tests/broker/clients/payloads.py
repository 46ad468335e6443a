"""The messages every client test produces and expects back byte for byte."""

from __future__ import annotations

import random

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


def messages(count: int = 50) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]]:
    """(key, value, headers, timestamp) tuples, with binary, empty and null keys."""
    out = []
    rng = random.Random(count)
    for i in range(count):
        key = None if i % 7 == 3 else (b"" if i % 11 == 5 else b"key-%d-\x00\xff" % i)
        value = rng.randbytes(i % 13) + b"value-%d" % i * (i % 5 + 1)
        headers = [(f"h{j}", b"v\x00%d" % j) for j in range(i % 3)]
        out.append((key, value, headers, BASE_TS + i * 17))
    return out
