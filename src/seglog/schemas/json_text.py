"""JSON as the registry reads it from strangers: bodies, schema texts, ``_schemas`` records.

Python's parser and every parser above it (fastavro, jsonschema, the
normalizers) recurse once per level of nesting, and a ``RecursionError``
raised deep in one of them is no answer to give: a request body of 100,000
``[`` would be a 500, a record of them in ``_schemas`` would stop every
reader of the topic at that record. So every JSON the registry takes in is
read here, and a document nested deeper than :data:`MAX_DEPTH` is refused
as malformed, the same way wherever it is read (a request thread or the
writer's, whose stacks differ), instead of failing at whatever depth a
given stack happens to run out.

JSON may also spell a lone UTF-16 surrogate (``"\\ud800"``), which Python
reads into a string that no UTF-8 text can hold: taken in, it would fail only
when the record is written. Such a document is refused here too.

Real schemas nest far less: an Avro record nested in a record adds three
levels (the record, its ``fields`` array, the field), a JSON Schema object
property two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeGuard

__all__ = ["MAX_DEPTH", "TooDeepError", "depth", "is_integer", "loads"]

_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects taken in (a scalar alone is depth 0).

Well inside what the schema parsers survive on a thread's stack: JSON
Schema's meta-schema check, the deepest, gives out near 190 levels."""


class TooDeepError(ValueError):
    """A JSON document nested deeper than the limit."""


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``data`` parsed; ValueError when it is not JSON, :class:`TooDeepError` when too deep.

    (``json.JSONDecodeError`` and ``UnicodeDecodeError`` are ValueErrors too.)
    """
    try:
        document = json.loads(data)
    except RecursionError:
        raise TooDeepError(
            f"JSON nested deeper than {max_depth} levels of arrays and objects"
        ) from None
    found = depth(document, strings=_no_surrogate)
    if found > max_depth:
        raise TooDeepError(
            f"JSON nested {found} levels deep, more than {max_depth} levels of arrays and objects"
        )
    return document


def depth(document: Any, *, strings: Callable[[str], None] | None = None) -> int:
    """How deep arrays and objects nest in ``document`` (walked without recursion).

    ``strings``, when given, is called with every string in it (keys too).
    """
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        node, level = pending.pop()
        if isinstance(node, dict):
            children: Any = node.values()
            if strings is not None:
                for name in node:
                    strings(name)
        elif isinstance(node, list):
            children = node
        else:
            if strings is not None and isinstance(node, str):
                strings(node)
            continue
        level += 1
        deepest = max(deepest, level)
        pending.extend((child, level) for child in children)
    return deepest


def _no_surrogate(text: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise ValueError(
            f"JSON holds a lone surrogate \\u{ord(found.group()):04x}, which is no character"
        )


def is_integer(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a JSON integer (``true`` is not one, though Python says so)."""
    return isinstance(value, int) and not isinstance(value, bool)
