"""The records of the ``_schemas`` topic, in Confluent Schema Registry's JSON layout.

A registry keeps its whole state in one compacted partition; each record's
key says what it is about, its value the new state (a null value deletes).
Keys are written field for field as Confluent's registry writes them (the
same fields, in the same order, compact), so that compaction folds seglog's
and Confluent's writes of one key together and a Confluent registry reads a
mirrored ``_schemas`` as its own:

- ``SCHEMA`` ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}``: a
  version of a subject; its value the schema (``deleted`` for a soft delete),
  a null value its permanent deletion;
- ``CONFIG`` / ``MODE`` ``{"keytype":..,"subject":s or null,"magic":0}``: the
  compatibility level or mode of a subject, or the global one (null subject);
- ``DELETE_SUBJECT``: a subject's soft deletion, up to a version;
- ``CLEAR_SUBJECT``: a subject's permanent deletion;
- ``NOOP``: nothing, written to learn how far the log has been read.

Other key types (Confluent's contexts, associations ...) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from seglog.schemas import json_text

__all__ = [
    "CLEAR_SUBJECT",
    "CONFIG",
    "DELETE_SUBJECT",
    "MAX_INT",
    "MODE",
    "NOOP",
    "SCHEMA",
    "SCHEMAS_TOPIC",
    "Reference",
    "RegistryKey",
    "StoredSchema",
    "decode_key",
    "decode_schema",
    "encode_key",
    "encode_schema",
    "encode_value",
]

SCHEMAS_TOPIC = "_schemas"
"""Confluent's default ``kafkastore.topic``."""

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
NOOP = "NOOP"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
_KNOWN = frozenset({SCHEMA, CONFIG, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT})

AVRO = "AVRO"
MAX_INT = 2**31 - 1
"""The largest id or version: both are 32-bit signed (a record's header holds 4 bytes of id)."""
SCHEMA_TYPES = frozenset({AVRO, "JSON", "PROTOBUF"})


@dataclass(frozen=True)
class RegistryKey:
    """The key of one ``_schemas`` record."""

    keytype: str
    subject: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class Reference:
    """A schema's use of another: by ``name`` in its text, the ``subject``'s ``version``."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        """As the registry's JSON writes it."""
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class StoredSchema:
    """One version of a subject, as ``_schemas`` holds it."""

    subject: str
    version: int
    id: int
    schema_type: str
    """``AVRO``, ``JSON`` or ``PROTOBUF``."""
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    metadata: Mapping[str, Any] | None = field(default=None, compare=False)
    """What the client sent as ``metadata`` (kept and answered, not interpreted)."""
    rule_set: Mapping[str, Any] | None = field(default=None, compare=False)
    """What the client sent as ``ruleSet`` (kept and answered, not interpreted)."""


def encode_key(key: RegistryKey) -> bytes:
    """``key`` in Confluent's field order (see the module docstring)."""
    if key.keytype == SCHEMA:
        doc: dict[str, Any] = {
            "keytype": SCHEMA,
            "subject": key.subject,
            "version": key.version,
            "magic": 1,
        }
    elif key.keytype == NOOP:
        doc = {"keytype": NOOP, "magic": 0}
    else:
        doc = {"keytype": key.keytype, "subject": key.subject, "magic": 0}
    return _compact(doc)


def decode_key(data: bytes) -> RegistryKey | None:
    """The key in ``data``; None for a key type this registry does not keep.

    ValueError for bytes that are not a registry key at all.
    """
    doc = _object(data, "key")
    keytype = doc.get("keytype")
    if keytype not in _KNOWN:
        return None
    subject = doc.get("subject")
    version = doc.get("version")
    if subject is not None and not isinstance(subject, str):
        raise ValueError(f"_schemas key: subject is not a string: {subject!r}")
    if keytype == SCHEMA and (
        not json_text.is_integer(version) or not 0 < version <= MAX_INT or subject is None
    ):
        raise ValueError(f"_schemas key: a SCHEMA key needs a subject and a version: {doc}")
    return RegistryKey(str(keytype), subject, version if keytype == SCHEMA else None)


def encode_schema(stored: StoredSchema) -> bytes:
    """The value of a SCHEMA record (``schemaType`` and ``references`` only when not default)."""
    doc = schema_fields(stored)
    doc["deleted"] = stored.deleted
    return _compact(doc)


def schema_fields(stored: StoredSchema, *, with_subject: bool = True) -> dict[str, Any]:
    """A version as the registry writes it, in its records and its answers (less ``deleted``)."""
    doc: dict[str, Any] = {}
    if with_subject:
        doc["subject"] = stored.subject
        doc["version"] = stored.version
    doc["id"] = stored.id
    if stored.schema_type != AVRO:
        doc["schemaType"] = stored.schema_type
    if stored.references:
        doc["references"] = [r.as_json() for r in stored.references]
    if stored.metadata:
        doc["metadata"] = stored.metadata
    if stored.rule_set:
        doc["ruleSet"] = stored.rule_set
    doc["schema"] = stored.schema
    return doc


def decode_schema(data: bytes) -> StoredSchema:
    """The SCHEMA record value in ``data`` (ValueError when malformed).

    Strict about types: a value that only a lenient conversion would read
    (an id of ``"5"`` or ``1.5``, a schema that is an object) was not written
    by a registry, and taken in it would break every request on its subject.
    """
    doc = _object(data, "schema value")
    subject, version, schema_id = doc.get("subject"), doc.get("version"), doc.get("id")
    schema, schema_type = doc.get("schema"), doc.get("schemaType") or AVRO
    if not isinstance(subject, str) or not isinstance(schema, str):
        raise ValueError("_schemas: malformed schema value: subject and schema are strings")
    if not (
        json_text.is_integer(version)
        and json_text.is_integer(schema_id)
        and 0 < version <= MAX_INT
        and 0 <= schema_id <= MAX_INT
    ):
        raise ValueError(
            f"_schemas: malformed schema value: version {version!r} and id {schema_id!r} "
            "are not integers (version above 0, id not negative, both 32-bit)"
        )
    if schema_type not in SCHEMA_TYPES:
        raise ValueError(f"_schemas: malformed schema value: schema type {schema_type!r}")
    try:
        references = tuple(
            Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in doc.get("references") or ()
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"_schemas: malformed schema value: references: {exc}") from exc
    return StoredSchema(
        subject=subject,
        version=version,
        id=schema_id,
        schema_type=schema_type,
        schema=schema,
        references=references,
        deleted=doc.get("deleted", False) is True,
        metadata=doc.get("metadata") or None,
        rule_set=doc.get("ruleSet") or None,
    )


def encode_value(doc: Mapping[str, Any]) -> bytes:
    """Another record's value (config, mode, subject deletion) as compact JSON."""
    return _compact(doc)


def decode_value(data: bytes) -> dict[str, Any]:
    """Another record's value as a JSON object (ValueError when it is not one)."""
    return _object(data, "value")


def _compact(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        # Leniently deep: a record is what a request body held, one level down at most, and
        # one written by another registry may nest more; too deep is still no RecursionError.
        doc = json_text.loads(data, max_depth=2 * json_text.MAX_DEPTH)
    except ValueError as exc:
        raise ValueError(f"_schemas: {what} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"_schemas: {what} is not a JSON object")
    return doc
