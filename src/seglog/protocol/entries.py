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

:func:`failed_as` and :func:`entry_as` do the same for a typed entry: given
one of the generated response types of :mod:`seglog.protocol.bodies`
(``failed_as(MetadataResponseTopics, code, name=name)``) they find the struct
from the type's name and return the entry as that type, so the code that
adds it to a typed response is checked by mypy.

The encoder is the second line: a key missing from a dict is written as the
field's default (see :mod:`seglog.protocol.schema`), and records default to
empty, not null. Built entries make the values Kafka's, not merely readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar, cast

from seglog.protocol.api_keys import description
from seglog.protocol.messages import ALL
from seglog.protocol.schema import MAX_VERSION, Field

T = TypeVar("T", bound=Mapping[str, Any])

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


def struct_name(api_name: str, direction: str, path: str) -> str:
    """The name of the generated type of a struct (see :mod:`seglog.gen_bodies`).

    ``<Api><Request|Response>`` for the body, then each field of ``path`` in
    CamelCase: ``struct_name("Produce", "response", "responses.partition_responses")``
    is ``ProduceResponseResponsesPartitionResponses``.
    """
    words = [api_name, direction] + [w for name in path.split(".") if path for w in name.split("_")]
    return "".join(w[:1].upper() + w[1:] for w in words)


@cache
def _response_structs() -> dict[str, tuple[int, str]]:
    """Each response struct's generated name → (api key, path)."""
    found: dict[str, tuple[int, str]] = {}

    def walk(api_name: str, key: int, path: str, fields: tuple[Field, ...]) -> None:
        found[struct_name(api_name, "response", path)] = (key, path)
        for f in fields:
            if f.item_type == "struct":
                walk(api_name, key, f"{path}.{f.name}" if path else f.name, f.fields)

    for api in ALL:
        walk(api.name, api.key, "", api.response.fields)
    return found


def _where(kind: type[Any]) -> tuple[int, str]:
    place = _response_structs().get(kind.__name__)
    if place is None:
        raise ValueError(f"{kind.__name__} is not a generated response type")
    return place


def entry_as(kind: type[T], /, **values: Any) -> T:
    """:func:`entry` of the response struct whose generated type is ``kind``."""
    api_key, path = _where(kind)
    return cast(T, _build(api_key, path, False, values))


def failed_as(kind: type[T], error_code: int, /, **values: Any) -> T:
    """:func:`failed` of the response struct whose generated type is ``kind``."""
    api_key, path = _where(kind)
    return cast(T, failed(api_key, path, error_code, **values))


__all__ = [
    "entry",
    "entry_as",
    "error_field",
    "failed",
    "failed_as",
    "struct_fields",
    "struct_name",
]
