"""Type aliases shared across layers."""

from __future__ import annotations

from typing import TypeAlias

# Python 3.11 has no collections.abc.Buffer; these are the buffers seglog passes around.
# An mmap is handed over as memoryview(mmap).
BytesLike: TypeAlias = bytes | bytearray | memoryview
"""Any contiguous byte buffer seglog reads from."""
