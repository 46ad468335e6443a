"""Response entries built whole from the schema, so that no field can be left out.

Theory of operation
-------------------
A handler or the authorization layer that answers "this partition failed"
(or this topic, group or resource) must still send every field of the
entry: clients read them all, and some reject what they did not expect —
librdkafka treats a Fetch partition with null records as a parse failure
and never reports the error code beside it. Kafka builds such entries from
its generated classes, where every field starts at the schema's default and
the error helpers (``FetchResponse.partitionResponse``,
``ProduceResponse.PartitionResponse(Errors)`` …) set the few values that
mean "unknown" (a high watermark of -1).

:func:`failed` is that one place here. It looks up the struct at ``path`` in
the response description of an API (``"responses.partitions"`` for Fetch's
partitions, ``""`` for the body itself), gives every field its value in an
entry that failed (the field's declared ``failed`` value, else its default:
empty records, -1 offsets and epochs, null messages), sets the struct's error
code, and lays the caller's values over it. A name the struct does not have
raises :class:`ValueError` at once, so a misspelt field is found by the first
test that reaches the call, never by a client. :func:`entry` is the same
without an error: every field at its default.

The encoder is the second line: a key missing from a dict is written as the
field's default (see :mod:`seglog.protocol.schema`), and records default to
empty, not null. Built entries make the values Kafka's, not merely readable.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from seglog.protocol.api_keys import description
from seglog.protocol.schema import MAX_VERSION, Field

_ERROR_FIELDS = ("error_code", "partition_error_code")
"""The names a struct's own error code goes by (AddPartitionsToTxn's is prefixed)."""


@cache
def struct_fields(api_key: int, path: str) -> tuple[Field, ...]:
    """The fields of the struct at ``path`` (dotted field names) in ``api_key``'s response."""
    api = description(api_key)
    if api is None:
        raise ValueError(f"api key {api_key} is not described")
    fields = api.response.fields
    where = api.response.name
    for name in path.split(".") if path else []:
        found = next((f for f in fields if f.name == name), None)
        if found is None or found.item_type != "struct":
            raise ValueError(f"{where} has no struct field {name!r}")
        fields = found.fields
        where = f"{where}.{name}"
    return fields


def error_field(api_key: int, path: str) -> str:
    """The name of the error code of the struct at ``path``."""
    names = {f.name for f in struct_fields(api_key, path)}
    for name in _ERROR_FIELDS:
        if name in names:
            return name
    raise ValueError(f"api key {api_key}: {path or 'the body'} has no error code")


@cache
def _template(api_key: int, path: str, failed: bool) -> tuple[dict[str, Any], tuple[Field, ...]]:
    """The immutable values of an entry, once; the fields whose values are built fresh."""
    template: dict[str, Any] = {}
    fresh = []
    for f in struct_fields(api_key, path):
        value = f.failed_value(MAX_VERSION) if failed else f.default_value(MAX_VERSION)
        if isinstance(value, (list, dict)):
            fresh.append(f)  # never shared between entries
        else:
            template[f.name] = value
    return template, tuple(fresh)


def _build(api_key: int, path: str, failed: bool, values: dict[str, Any]) -> dict[str, Any]:
    template, fresh = _template(api_key, path, failed)
    built = template.copy()
    for f in fresh:
        built[f.name] = f.failed_value(MAX_VERSION) if failed else f.default_value(MAX_VERSION)
    for key in values:
        if key not in built:
            raise ValueError(f"api key {api_key} {path or 'body'} has no field {key!r}")
    built.update(values)
    return built


def entry(api_key: int, path: str, **values: Any) -> dict[str, Any]:
    """The struct at ``path`` with every field at its default, then ``values``."""
    return _build(api_key, path, False, values)


def failed(api_key: int, path: str, error_code: int, **values: Any) -> dict[str, Any]:
    """The struct at ``path`` as an entry that failed with ``error_code``.

    Every field takes its value in a failed entry (Kafka's: empty records,
    -1 for offsets, watermarks and epochs, null messages), then ``values``
    (the partition index, the topic name, a message).
    """
    values[error_field(api_key, path)] = error_code
    return _build(api_key, path, True, values)


__all__ = ["entry", "error_field", "failed", "struct_fields"]
