"""Where a typed column's schemas come from: a registry's REST API or a log directory.

:class:`SchemaLookup` answers the three questions the typed columns ask: the
schema of an id (a record's), the latest version of a subject (planning and
the sink), and registering a schema (the sink, when the subject has none).
:class:`RegistryLookup` asks a registry with confluent-kafka's
``SchemaRegistryClient`` (whose caches then serve a task's later questions);
:class:`LogDirLookup` reads the registry from a log directory's ``_schemas``
(files mode, no broker). A schema comes back with its references resolved
(name -> text, dependencies first), ready to parse.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from seglog.errors import SeglogError

__all__ = [
    "LogDirLookup",
    "RegisteredSchema",
    "RegistryError",
    "RegistryLookup",
    "SchemaLookup",
    "open_lookup",
]

T = TypeVar("T")


class RegistryError(SeglogError):
    """The registry could not be asked, or refused a request."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the typed columns use it."""

    id: int
    schema_type: str
    """``AVRO``, ``JSON`` or ``PROTOBUF``."""
    schema: str
    references: tuple[tuple[str, str], ...] = ()
    """(reference name, schema text), dependencies first."""


class SchemaLookup(ABC):
    """Schemas by id and subjects' latest versions."""

    @abstractmethod
    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema of ``schema_id``, or None when the registry has no such id."""

    @abstractmethod
    def latest(self, subject: str) -> RegisteredSchema | None:
        """The latest version of ``subject``, or None when it has none."""

    def register(self, subject: str, schema_type: str, schema: str) -> int:
        """Register ``schema`` under ``subject``; its id."""
        raise ValueError(f"Cannot register a schema for subject '{subject}' here: no registry URL")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class RegistryLookup(SchemaLookup):
    """A registry's REST API, through confluent-kafka's client (``conf``: its settings,
    ``url`` at least)."""

    def __init__(self, conf: Mapping[str, str]) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = conf.get("url", "")
        self.client = SchemaRegistryClient(dict(conf))

    def _ask(self, call: Callable[[], T], what: str, *, missing_ok: bool = True) -> T | None:
        """``call()``; None when the registry answers 404 (and ``missing_ok``), RegistryError
        naming the registry and ``what`` for any other failure."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return call()
        except SchemaRegistryError as exc:
            if missing_ok and exc.http_status_code == 404:
                return None
            raise RegistryError(f"Schema registry at {self.url}: {what}: {exc}") from None
        except Exception as exc:  # the HTTP client's own: connection refused, timeouts
            raise RegistryError(
                f"Schema registry at {self.url}: {what}: {type(exc).__name__}: {exc}"
            ) from None

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """GET /schemas/ids/{id}, references followed."""
        schema = self._ask(lambda: self.client.get_schema(schema_id), f"schema id {schema_id}")
        return None if schema is None else self._resolved(schema_id, schema)

    def latest(self, subject: str) -> RegisteredSchema | None:
        """GET /subjects/{subject}/versions/latest."""
        registered = self._ask(
            lambda: self.client.get_latest_version(subject), f"latest version of '{subject}'"
        )
        if registered is None:
            return None
        return self._resolved(int(registered.schema_id or 0), registered.schema)

    def register(self, subject: str, schema_type: str, schema: str) -> int:
        """POST /subjects/{subject}/versions."""
        from confluent_kafka.schema_registry import Schema

        found = self._ask(
            lambda: self.client.register_schema(subject, Schema(schema, schema_type)),
            f"registering a schema under '{subject}'",
            missing_ok=False,
        )
        return int(found or 0)

    def close(self) -> None:
        """Close the client's HTTP connections."""
        self.client.close()

    def _resolved(self, schema_id: int, schema: Any) -> RegisteredSchema:
        references: dict[str, str] = {}
        seen: set[tuple[str, int]] = set()

        def visit(refs: Any) -> None:
            for ref in refs or ():
                if ref.name in references or (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                version = self._ask(
                    functools.partial(self.client.get_version, ref.subject, ref.version),
                    f"reference '{ref.name}' ({ref.subject} version {ref.version})",
                    missing_ok=False,
                )
                assert version is not None
                target = version.schema
                visit(target.references)
                references[ref.name] = target.schema_str or ""

        visit(schema.references)
        return RegisteredSchema(
            schema_id,
            schema.schema_type or "AVRO",
            schema.schema_str,
            tuple(references.items()),
        )


class LogDirLookup(SchemaLookup):
    """The registry a log directory's ``_schemas`` holds, read once."""

    def __init__(self, path: str) -> None:
        from seglog.schemas.log_dir import read_registry

        self.state = read_registry(Path(path))

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The version holding ``schema_id``."""
        stored = self.state.by_id(schema_id)
        return None if stored is None else self._resolved(stored)

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's newest live version."""
        stored = self.state.latest(subject)
        return None if stored is None else self._resolved(stored)

    def _resolved(self, stored: Any) -> RegisteredSchema:
        references = self.state.resolved_references(stored.references)
        return RegisteredSchema(
            stored.id, stored.schema_type, stored.schema, tuple(references.items())
        )


def open_lookup(registry_conf: Mapping[str, str], path: str | None) -> SchemaLookup:
    """The registry given by URL when there is one, else the log directory's ``_schemas``."""
    if registry_conf.get("url"):
        return RegistryLookup(registry_conf)
    if path is None:
        raise ValueError("Option 'schema.registry.url' must be specified for a typed format")
    return LogDirLookup(path)
