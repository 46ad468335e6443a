"""CRC-32C (Castagnoli), the checksum of v2 record batches.

One wrapper over the ``crc32c`` package, which uses the SSE4.2 / ARMv8 CRC
instructions where the CPU has them and releases the GIL for large buffers.
"""

from __future__ import annotations

import crc32c as _crc32c

from seglog._typing import BytesLike

HARDWARE_ACCELERATED: bool = bool(getattr(_crc32c, "hardware_based", False))


def crc32c(data: BytesLike, value: int = 0) -> int:
    """The CRC-32C of ``data`` (any buffer, memoryviews included), continuing from ``value``."""
    return int(_crc32c.crc32c(data, value))


#: The package's own function, for the loops that call it once per batch: the
#: same CRC (an int), without the wrapper's call.
crc32c_raw = _crc32c.crc32c
