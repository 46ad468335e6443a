"""Converters of nested values, built once per schema: the shapes every type mapping shares.

A converter turns one Python value into another (a decoded Avro record into
the shape Arrow takes, a row's struct into what an encoder takes ...). The
mappings of each schema type build theirs from these three, so that a
record, a list and a map are walked the same way everywhere: a null stays
null, a member that needs no conversion is not visited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["Converter", "fields", "items", "values"]

Converter = Callable[[Any], Any]


def fields(converting: Iterable[tuple[str, Converter]]) -> Converter:
    """A record (a mapping) with the named fields converted; anything else is null."""
    pairs = list(converting)

    def record(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return None
        out = dict(value)
        for name, convert in pairs:
            item = out.get(name)
            if item is not None:
                out[name] = convert(item)
        return out

    return record


def items(convert: Converter | None) -> Converter:
    """A list with each non-null item converted; anything else is null."""

    def array(value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return None
        if convert is None:
            return list(value)
        return [None if v is None else convert(v) for v in value]

    return array


def values(convert: Converter | None, *, from_pairs: bool = False) -> Converter:
    """A map (a mapping, or with ``from_pairs`` also a list of pairs, as Arrow gives maps)
    as a dict with each non-null value converted; anything else is null."""

    def mapping(value: Any) -> Any:
        if isinstance(value, Mapping):
            pairs: Iterable[tuple[Any, Any]] = value.items()
        elif from_pairs and isinstance(value, list | tuple):
            pairs = value
        else:
            return None
        if convert is None:
            return dict(pairs)
        return {k: None if v is None else convert(v) for k, v in pairs}

    return mapping
