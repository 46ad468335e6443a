"""Hypothesis strategies built from the message descriptions themselves.

A generated value holds every field of its struct: random values for the
fields the version carries (tagged ones included), the field defaults for the
others. That is exactly what decoding returns, so ``decode(encode(x)) == x``
can be asserted as is (after :func:`normalise` turns record views into bytes).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence, Sized
from typing import Any

from hypothesis import strategies as st

from seglog.protocol.schema import Field, Message

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _interesting_ints(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [v for v in (low, high, -1, 0, 1) if low <= v <= high]
    return st.sampled_from(edges) | st.integers(low, high)


def _item(f: Field, version: int) -> st.SearchStrategy[Any]:
    kind = f.item_type
    if kind in _INTS:
        return _interesting_ints(*_INTS[kind])
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "bool":
        return st.booleans()
    if kind == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if kind == "string":
        return st.text(max_size=8)
    if kind in ("bytes", "records"):
        return st.binary(max_size=16)
    assert kind == "struct"
    return struct_strategy(f.fields, version)


def field_strategy(f: Field, version: int) -> st.SearchStrategy[Any]:
    """Values of one field at ``version`` (null included where allowed)."""
    if f.is_array:
        base: st.SearchStrategy[Any] = st.lists(_item(f, version), max_size=3)
    else:
        base = _item(f, version)
    if f.is_nullable(version):
        return st.none() | base
    return base


def struct_strategy(fields: Sequence[Field], version: int) -> st.SearchStrategy[dict[str, Any]]:
    """Complete dicts of a struct at ``version`` (absent fields at their defaults)."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if f.present(version):
            parts[f.name] = field_strategy(f, version)
        else:
            parts[f.name] = st.builds(f.default_value, st.just(version))
    return st.fixed_dictionaries(parts)


def message_strategy(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    """Complete bodies of ``message`` at ``version``."""
    return struct_strategy(message.fields, version)


def normalise(value: Any) -> Any:
    """Memoryviews (records) as bytes, recursively, for comparisons."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def joined(chunks: Sequence[Sized]) -> bytes:
    """Encoded chunks as bytes (all of them must be bytes-like: no records holes)."""
    parts = []
    for chunk in chunks:
        assert isinstance(chunk, (bytes, bytearray, memoryview)), chunk
        parts.append(bytes(chunk))
    return b"".join(parts)
