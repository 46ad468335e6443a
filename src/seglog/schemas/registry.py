"""The registry's operations, as Confluent Schema Registry defines them, over its state.

Reads (:class:`RegistryReads`) answer from a state; writes
(:class:`RegistryWrites`) check a request against the state and give the
``_schemas`` records that carry it out, which the caller appends and then
folds back into the state: the state only ever changes by records, so every
reader of the topic ends with the same one. Errors are
:class:`RegistryError`, with Confluent's HTTP status, error code and message.
Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seglog.schemas import json_text, log_records
from seglog.schemas.formats import (
    LEVELS,
    InvalidSchemaError,
    ParsedSchema,
    check_compatibility,
    parse_schema,
)
from seglog.schemas.log_records import Reference, RegistryKey, StoredSchema
from seglog.schemas.registry_state import DEFAULT_COMPATIBILITY, DEFAULT_MODE, RegistryState

__all__ = [
    "MODES",
    "SCHEMA_TYPES",
    "Record",
    "RegistryError",
    "RegistryReads",
    "RegistryWrites",
    "schema_json",
]

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")
"""The schema types served, in the order Confluent lists them."""
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")

Record = tuple[bytes, bytes | None]
"""A ``_schemas`` record: key and value (None: a tombstone)."""


class RegistryError(Exception):
    """A refusal, as Confluent's registry answers it."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer."""
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: object | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, 40403, "Schema not found")
    return RegistryError(404, 40403, f"Schema {schema_id} not found")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(text: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def schema_json(stored: StoredSchema, *, with_subject: bool = True) -> dict[str, Any]:
    """A version as ``GET /subjects/{s}/versions/{v}`` answers it."""
    return log_records.schema_fields(stored, with_subject=with_subject)


@dataclass(frozen=True)
class SchemaRequest:
    """The body of a register, lookup or compatibility request."""

    schema: str
    schema_type: str
    references: tuple[Reference, ...]
    metadata: Mapping[str, Any] | None
    rule_set: Mapping[str, Any] | None
    id: int | None
    version: int | None

    @classmethod
    def from_json(cls, body: Any) -> SchemaRequest:
        """The request in ``body`` (422 42201 when it is not one)."""
        if not isinstance(body, dict):
            raise RegistryError(422, 42201, "Invalid schema: the request body is not an object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema:
            raise invalid_schema("Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise invalid_schema(f"Unknown schema type {schema_type!r}")
        refs = []
        for ref in body.get("references") or ():
            if not isinstance(ref, dict):
                raise invalid_schema("Invalid schema: a reference is not an object")
            try:
                refs.append(Reference(str(ref["name"]), str(ref["subject"]), int(ref["version"])))
            except (KeyError, TypeError, ValueError) as exc:
                raise invalid_schema(f"Invalid schema: malformed reference {ref}: {exc}") from exc
        schema_id = body.get("id")
        version = body.get("version")
        for name, number in (("id", schema_id), ("version", version)):
            if json_text.is_integer(number) and number > log_records.MAX_INT:
                raise invalid_schema(f"Invalid schema: {name} {number} is not a 32-bit integer")
        return cls(
            schema=schema,
            schema_type=schema_type,
            references=tuple(refs),
            metadata=body.get("metadata") or None,
            rule_set=body.get("ruleSet") or None,
            id=schema_id if json_text.is_integer(schema_id) and schema_id >= 0 else None,
            version=version if json_text.is_integer(version) and version > 0 else None,
        )


class RegistryReads:
    """The questions of the REST API, answered from a state."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state

    # ---------------------------------------------------------------- helpers

    def parse(self, request: SchemaRequest, *, normalize: bool) -> ParsedSchema:
        """The request's schema parsed with its references (422 42201 when invalid)."""
        try:
            references = self.state.resolved_references(request.references)
        except KeyError as exc:
            raise invalid_schema(f"Invalid schema: {exc.args[0]}") from exc
        try:
            parsed = parse_schema(request.schema_type, request.schema, references)
        except InvalidSchemaError as exc:
            raise invalid_schema(
                f"Invalid schema {request.schema!r} with refs {list(request.references)} "
                f"of type {request.schema_type}, details: {exc}"
            ) from exc
        return parsed.normalize() if normalize else parsed

    def parsed(self, stored: StoredSchema) -> ParsedSchema:
        """A stored schema parsed.

        Valid when this registry registered it; a record another writer put in
        ``_schemas`` may hold one that is not, or refer to a version that is gone:
        said as such (50001), not as a failure of the request's own.
        """
        try:
            references = self.state.resolved_references(stored.references)
            return parse_schema(stored.schema_type, stored.schema, references)
        except (KeyError, InvalidSchemaError) as exc:
            raise RegistryError(
                500,
                50001,
                f"Error in the backend data store: subject '{stored.subject}' version "
                f"{stored.version} (id {stored.id}) holds a schema that cannot be read: "
                f"{exc.args[0] if exc.args else exc}",
            ) from exc

    def normalizes(self, subject: str, asked: bool) -> bool:
        """Whether ``subject``'s schemas are normalized (asked, or its config says so)."""
        if asked:
            return True
        for scope in (subject, None):
            config = self.state.config(scope)
            if config is not None and isinstance(config.get("normalize"), bool):
                return bool(config["normalize"])
        return False

    def live_subject(self, subject: str, *, deleted: bool = False) -> list[int]:
        """``subject``'s versions (40401 when it has none)."""
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:
            raise subject_not_found(subject)
        return versions

    def resolve_version(self, subject: str, text: str, *, deleted: bool = False) -> StoredSchema:
        """The version ``text`` (a number, ``latest`` or -1) of ``subject``."""
        versions = self.live_subject(subject, deleted=deleted)
        if text in ("latest", "-1"):
            found = self.state.version(subject, versions[-1], deleted=deleted)
            assert found is not None
            return found
        number = _version_number(text)
        found = self.state.version(subject, number, deleted=deleted)
        if found is None:
            raise version_not_found(number)
        return found

    def find(
        self, subject: str, parsed: ParsedSchema, request: SchemaRequest, *, deleted: bool = False
    ) -> StoredSchema | None:
        """The version of ``subject`` holding this very schema, newest first.

        The same text (whitespace aside) first; else the same schema once both are
        normalized (an Avro record with its properties in another order), as
        Confluent's registry compares the forms its parsers write back.
        """
        candidates = [
            stored
            for version in reversed(self.state.versions(subject, deleted=deleted))
            if (stored := self.state.version(subject, version, deleted=deleted)) is not None
            and stored.schema_type == request.schema_type
            and stored.references == request.references
        ]
        canonical = parsed.canonical()
        for stored in candidates:
            if stored.schema == canonical or self._canonical(stored) == canonical:
                return stored
        normalized = parsed.normalize().canonical()
        for stored in candidates:
            if self._canonical(stored, normalized=True) == normalized:
                return stored
        return None

    def _canonical(self, stored: StoredSchema, *, normalized: bool = False) -> str:
        """``stored``'s canonical text, ``normalized`` or not (its own text when it does
        not parse).

        Remembered in the state: finding a schema's id compares it with every schema
        stored, and parsing them all again for each registration made it quadratic
        (a cache of parsed schemas, bounded, is no help once they outnumber it: the
        comparisons go through them all in turn).
        """
        try:
            references = self.state.resolved_references(stored.references)
        except KeyError:
            return stored.schema
        key = (stored.schema_type, stored.schema, tuple(references.items()), normalized)
        canonical = self.state.canonical_texts.get(key)
        if canonical is None:
            try:
                parsed = parse_schema(stored.schema_type, stored.schema, references)
                canonical = str((parsed.normalize() if normalized else parsed).canonical())
            except InvalidSchemaError:
                canonical = stored.schema
            self.state.canonical_texts[key] = canonical
        return canonical

    def previous(self, subject: str, level: str) -> list[ParsedSchema]:
        """The live versions of ``subject`` that ``level`` compares a new one with, oldest
        first: none for NONE, the latest for a level that is not transitive, else all."""
        if level == "NONE":
            return []
        versions = self.state.versions(subject)
        if not level.endswith("_TRANSITIVE"):
            versions = versions[-1:]
        return [
            self.parsed(stored)
            for v in versions
            if (stored := self.state.version(subject, v)) is not None
        ]

    # ---------------------------------------------------------------- routes

    def lookup(self, subject: str, body: Any, *, normalize: bool, deleted: bool) -> dict[str, Any]:
        """``POST /subjects/{s}``: the version of ``subject`` holding the schema sent."""
        request = SchemaRequest.from_json(body)
        if not self.state.versions(subject, deleted=deleted):
            raise subject_not_found(subject)
        parsed = self.parse(request, normalize=self.normalizes(subject, normalize))
        found = self.find(subject, parsed, request, deleted=deleted)
        if found is None:
            raise schema_not_found()
        return schema_json(found)

    def compatibility(
        self, subject: str, version: str | None, body: Any, *, normalize: bool, verbose: bool
    ) -> dict[str, Any]:
        """``POST /compatibility/subjects/{s}/versions[/{v}]``."""
        request = SchemaRequest.from_json(body)
        parsed = self.parse(request, normalize=self.normalizes(subject, normalize))
        level = self.state.effective_compatibility(subject)
        if version is None:
            previous = self.previous(subject, level)
        else:
            if not self.state.versions(subject):
                raise subject_not_found(subject)
            stored = self.resolve_version(subject, version)
            previous = [self.parsed(stored)]
            level = level.removesuffix("_TRANSITIVE")
        messages = check_compatibility(level, parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    def config(self, subject: str | None, *, default_to_global: bool) -> dict[str, Any]:
        """``GET /config[/{s}]``."""
        config = self.state.config(subject)
        if config is None and subject is not None and default_to_global:
            config = self.state.config(None)
        if config is None:
            if subject is not None and not default_to_global:
                raise RegistryError(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            config = {"compatibilityLevel": DEFAULT_COMPATIBILITY}
        return {k: v for k, v in config.items() if k != "subject"}

    def mode(self, subject: str | None, *, default_to_global: bool) -> dict[str, Any]:
        """``GET /mode[/{s}]``."""
        mode = self.state.mode(subject)
        if mode is None and subject is not None:
            if not default_to_global:
                raise RegistryError(
                    404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
                )
            mode = self.state.mode(None)
        return {"mode": mode or DEFAULT_MODE}


class RegistryWrites(RegistryReads):
    """The changes of the REST API: checked against the state, answered with the records to
    append (and the answer to give once they are)."""

    def _set(self, key: RegistryKey, value: bytes | None) -> list[Record]:
        """The records that give ``key`` ``value`` (None: delete it), in this registry's
        spelling of the key, each other spelling of it in the topic first made a tombstone.

        Kafka compacts by the key's bytes, and a key another registry wrote (Confluent's
        older ones put the fields in another order, or magic 0) is the same key spelled
        otherwise: left alone, its record would outlive this one's tombstone in the
        compacted topic, and a version deleted for good would come back on a restart.
        """
        own = log_records.encode_key(key)
        others: list[Record] = [(k, None) for k in self.state.spellings(key) if k != own]
        return [*others, (own, value)]

    def _writable(self, subject: str | None, *, importing: bool = False) -> str:
        mode = self.state.effective_mode(subject)
        if mode.startswith("READONLY"):
            where = f"Subject {subject}" if subject is not None else "The registry"
            raise RegistryError(422, 42205, f"{where} is in read-only mode")
        if importing and mode != "IMPORT":
            raise RegistryError(
                422,
                42205,
                f"Subject {subject} is not in import mode: a schema id or version "
                "may only be given in IMPORT mode",
            )
        return mode

    def register(
        self, subject: str, body: Any, *, normalize: bool
    ) -> tuple[dict[str, Any], list[Record]]:
        """``POST /subjects/{s}/versions``: the id of the schema sent, registered if new."""
        request = SchemaRequest.from_json(body)
        if not subject or any(ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF for c in subject):
            raise RegistryError(422, 42208, f"The specified subject '{subject}' is not valid.")
        mode = self._writable(subject, importing=request.id is not None)
        parsed = self.parse(request, normalize=self.normalizes(subject, normalize))
        existing = self.find(subject, parsed, request)
        if existing is not None and (request.id is None or request.id == existing.id):
            return {"id": existing.id}, []
        if mode != "IMPORT":
            level = self.state.effective_compatibility(subject)
            messages = check_compatibility(level, parsed, self.previous(subject, level))
            if messages:
                raise RegistryError(
                    409,
                    409,
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: [{", ".join(messages)}]',
                )
        canonical = parsed.canonical()
        if request.id is not None:
            schema_id = request.id
            holder = self.state.by_id(request.id)
            if holder is not None and not self._same(holder, request, canonical):
                raise RegistryError(
                    422,
                    42207,
                    f"Schema already registered with id {request.id} instead of input id",
                )
        else:
            holder = self._holder_of(request, canonical)
            schema_id = holder.id if holder is not None else self.state.max_id + 1
            if schema_id > log_records.MAX_INT:
                raise RegistryError(500, 50001, "Error while registering: no schema id is left")
        if holder is not None:
            # An id names one text: the state takes in no record giving an id another text.
            canonical = holder.schema
        version = request.version or self.state.highest_version(subject) + 1
        if version > log_records.MAX_INT:
            raise RegistryError(
                500, 50001, f"Error while registering: {subject} has no version left"
            )
        stored = StoredSchema(
            subject=subject,
            version=version,
            id=schema_id,
            schema_type=request.schema_type,
            schema=canonical,
            references=request.references,
            metadata=request.metadata,
            rule_set=request.rule_set,
        )
        key = RegistryKey(log_records.SCHEMA, subject, version)
        return {"id": schema_id}, self._set(key, log_records.encode_schema(stored))

    def _holder_of(self, request: SchemaRequest, canonical: str) -> StoredSchema | None:
        """A version of any subject holding this very schema (so its id is this one's)."""
        for stored in self.state.all_schemas(deleted=True):
            if self._same(stored, request, canonical):
                return stored
        return None

    def _same(self, stored: StoredSchema, request: SchemaRequest, canonical: str) -> bool:
        return (
            stored.schema_type == request.schema_type
            and stored.references == request.references
            and (stored.schema == canonical or self._canonical(stored) == canonical)
        )

    def delete_version(
        self, subject: str, version: str, *, permanent: bool
    ) -> tuple[int, list[Record]]:
        """``DELETE /subjects/{s}/versions/{v}``: the version deleted."""
        self._writable(subject)
        stored = self.resolve_version(subject, version, deleted=permanent)
        if self.state.referenced_by(subject, stored.version, deleted=permanent):
            raise RegistryError(
                422,
                42206,
                f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                f"subject={subject},version={stored.version}}}.",
            )
        key = RegistryKey(log_records.SCHEMA, subject, stored.version)
        if not permanent:
            deleted = StoredSchema(
                subject=stored.subject,
                version=stored.version,
                id=stored.id,
                schema_type=stored.schema_type,
                schema=stored.schema,
                references=stored.references,
                deleted=True,
                metadata=stored.metadata,
                rule_set=stored.rule_set,
            )
            return stored.version, self._set(key, log_records.encode_schema(deleted))
        if not stored.deleted:
            raise RegistryError(
                404,
                40407,
                f"Subject '{subject}' Version {stored.version} was not deleted first before "
                "being permanently deleted",
            )
        records = self._set(key, None)
        if self.state.versions(subject, deleted=True) == [stored.version]:
            records += self._forget_subject_settings(subject)
        return stored.version, records

    def delete_subject(self, subject: str, *, permanent: bool) -> tuple[list[int], list[Record]]:
        """``DELETE /subjects/{s}``: the versions deleted."""
        self._writable(subject)
        versions = self.state.versions(subject, deleted=permanent)
        if not versions and not (not permanent and self.state.has_subject(subject)):
            raise subject_not_found(subject)
        if not permanent and not versions:
            raise RegistryError(
                404,
                40404,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        for version in versions:
            users = [
                s
                for schema_id in self.state.referenced_by(subject, version, deleted=permanent)
                for s in self.state.id_holders(schema_id, deleted=permanent)
                if s.subject != subject
            ]
            if users:
                raise RegistryError(
                    422,
                    42206,
                    f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                    f"subject={subject},version={version}}}.",
                )
        if not permanent:
            key = RegistryKey(log_records.DELETE_SUBJECT, subject)
            value = log_records.encode_value({"subject": subject, "version": versions[-1]})
            return versions, self._set(key, value)
        if self.state.versions(subject):
            raise RegistryError(
                404,
                40405,
                f"Subject '{subject}' was not deleted first before being permanently deleted",
            )
        records = [
            record
            for v in reversed(versions)
            for record in self._set(RegistryKey(log_records.SCHEMA, subject, v), None)
        ]
        return versions, records + self._forget_subject_settings(subject)

    def _forget_subject_settings(self, subject: str) -> list[Record]:
        out: list[Record] = []
        if self.state.mode(subject) is not None:
            out += self._set(RegistryKey(log_records.MODE, subject), None)
        if self.state.config(subject) is not None:
            out += self._set(RegistryKey(log_records.CONFIG, subject), None)
        return out

    def set_config(self, subject: str | None, body: Any) -> tuple[dict[str, Any], list[Record]]:
        """``PUT /config[/{s}]``: the level (and other settings) sent."""
        if not isinstance(body, dict):
            raise RegistryError(
                422, 42203, "Invalid compatibility level: the body is not an object"
            )
        level = body.get("compatibility") or body.get("compatibilityLevel")
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise RegistryError(
                422,
                42203,
                f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}",
            )
        self._writable(subject)
        value: dict[str, Any] = dict(self.state.config(subject) or {})
        if subject is not None:
            value["subject"] = subject
        if level is not None:
            value["compatibilityLevel"] = level.upper()
        for name in (
            "normalize",
            "alias",
            "compatibilityGroup",
            "defaultMetadata",
            "overrideMetadata",
            "defaultRuleSet",
            "overrideRuleSet",
        ):
            if name in body:
                value[name] = body[name]
        key = RegistryKey(log_records.CONFIG, subject)
        answer = {k: v for k, v in value.items() if k not in ("subject", "compatibilityLevel")}
        answer["compatibility"] = value.get("compatibilityLevel", DEFAULT_COMPATIBILITY)
        return answer, self._set(key, log_records.encode_value(value))

    def delete_config(self, subject: str | None) -> tuple[dict[str, Any], list[Record]]:
        """``DELETE /config[/{s}]``: the setting removed."""
        previous = self.state.config(subject)
        if previous is None and subject is not None and not self.state.has_subject(subject):
            raise subject_not_found(subject)
        self._writable(subject)
        answer = {k: v for k, v in (previous or {}).items() if k != "subject"}
        answer.setdefault("compatibilityLevel", DEFAULT_COMPATIBILITY)
        key = RegistryKey(log_records.CONFIG, subject)
        return answer, self._set(key, None) if previous is not None else []

    def set_mode(
        self, subject: str | None, body: Any, *, force: bool
    ) -> tuple[dict[str, Any], list[Record]]:
        """``PUT /mode[/{s}]``: the mode sent."""
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(422, 42204, f"Invalid mode. Valid values are: {', '.join(MODES)}")
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has_schemas = (
                self.state.has_subject(subject)
                if subject is not None
                else bool(self.state.subjects(deleted=True))
            )
            if has_schemas:
                raise RegistryError(
                    422,
                    42205,
                    "Cannot import since found existing subjects (use force=true to import anyway)",
                )
        key = RegistryKey(log_records.MODE, subject)
        value: dict[str, Any] = {"subject": subject, "mode": mode} if subject else {"mode": mode}
        return {"mode": mode}, self._set(key, log_records.encode_value(value))

    def delete_mode(self, subject: str) -> tuple[dict[str, Any], list[Record]]:
        """``DELETE /mode/{s}``: the mode removed."""
        previous = self.state.mode(subject)
        if previous is None:
            raise subject_not_found(subject)
        return {"mode": previous}, self._set(RegistryKey(log_records.MODE, subject), None)


def _version_number(text: str) -> int:
    try:
        number = int(text, 10)
    except ValueError:
        raise invalid_version(text) from None
    if not 1 <= number <= 2**31 - 1:
        raise invalid_version(text)
    return number


def versions_json(stored: Sequence[StoredSchema]) -> list[dict[str, Any]]:
    """``[{"subject", "version"}]`` as ``/schemas/ids/{id}/versions`` answers."""
    return [{"subject": s.subject, "version": s.version} for s in stored]
