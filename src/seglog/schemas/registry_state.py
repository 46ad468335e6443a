"""The registry's whole state, rebuilt from ``_schemas`` record by record.

Every reader of the registry (the broker's REST API, Spark in files mode, a
tool over a log directory) folds the topic through :meth:`RegistryState.apply`
in offset order; the state is then what Confluent's registry would hold after
reading the same records: its subjects and their versions (soft-deleted ones
kept, marked), schema ids, compatibility levels and modes. Applying is
idempotent per key, so a compacted topic gives the same state as the full one
(save where two writers gave one id to two schemas: the first read keeps it,
and compaction may remove that one first).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

from seglog.schemas import log_records
from seglog.schemas.log_records import Reference, StoredSchema

__all__ = [
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_MODE",
    "RegistryState",
]

logger = logging.getLogger(__name__)

DEFAULT_COMPATIBILITY = "BACKWARD"
"""Confluent's ``schema.compatibility.level`` default."""
DEFAULT_MODE = "READWRITE"


class RegistryState:
    """Subjects, versions, ids, levels and modes, as the records applied so far say."""

    def __init__(self) -> None:
        self._versions: dict[str, dict[int, StoredSchema]] = {}
        self._ids: dict[int, list[tuple[str, int]]] = {}
        self._configs: dict[str | None, dict[str, object]] = {}
        self._modes: dict[str | None, str] = {}
        # Per key, the bytes it was written as whose last record is a value (not a
        # tombstone): each is a record compaction keeps (see RegistryWrites._set).
        self._spellings: dict[log_records.RegistryKey, set[bytes]] = {}
        self.canonical_texts: dict[tuple[str, str, tuple[tuple[str, str], ...], bool], str] = {}
        """Canonical texts of stored schemas as readers work them out, kept for the next:
        (type, text, resolved references, normalized) -> canonical text. Not state: never
        folded."""
        self.max_id = 0
        """The highest schema id ever seen (the next one is above it)."""
        self.records_applied = 0

    # ------------------------------------------------------------------ folding

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one ``_schemas`` record in; a malformed one is logged and skipped."""
        self.records_applied += 1
        if key is None:
            return
        try:
            parsed = log_records.decode_key(key)
            if parsed is None:
                return
            spellings = self._spellings.setdefault(parsed, set())
            if value is None:
                spellings.discard(key)
            else:
                spellings.add(key)
            if not spellings:
                del self._spellings[parsed]
            self._apply(parsed, value)
        except ValueError as exc:
            logger.warning("_schemas: skipping a record: %s", exc)

    def _apply(self, key: log_records.RegistryKey, value: bytes | None) -> None:
        if key.keytype == log_records.SCHEMA:
            assert key.subject is not None and key.version is not None
            if value is None:
                self._drop(key.subject, key.version)
            else:
                stored = log_records.decode_schema(value)
                if (stored.subject, stored.version) != (key.subject, key.version):
                    # Compaction keeps the last value per key: a value filed under another
                    # version's key would outlive or vanish with the wrong records.
                    raise ValueError(
                        f"a SCHEMA record for {key.subject!r} version {key.version} holds "
                        f"{stored.subject!r} version {stored.version}"
                    )
                self._put(stored)
        elif key.keytype == log_records.CONFIG:
            if value is None:
                self._configs.pop(key.subject, None)
            else:
                self._configs[key.subject] = log_records.decode_value(value)
        elif key.keytype == log_records.MODE:
            if value is None:
                self._modes.pop(key.subject, None)
            else:
                mode = log_records.decode_value(value).get("mode")
                if isinstance(mode, str):
                    self._modes[key.subject] = mode
        elif key.keytype == log_records.DELETE_SUBJECT and value is not None:
            doc = log_records.decode_value(value)
            subject, until = doc.get("subject"), doc.get("version")
            if isinstance(subject, str) and isinstance(until, int):
                for version, stored in self._versions.get(subject, {}).items():
                    if version <= until and not stored.deleted:
                        self._versions[subject][version] = replace(stored, deleted=True)
        elif key.keytype == log_records.CLEAR_SUBJECT and value is not None:
            subject = log_records.decode_value(value).get("subject")
            if isinstance(subject, str):
                for version in list(self._versions.get(subject, {})):
                    self._drop(subject, version)

    def _put(self, stored: StoredSchema) -> None:
        # An id names one schema. A record giving a schema an id that another schema holds
        # (written by hand, or by another registry into a mirrored topic) is skipped, as
        # Confluent's registry skips it: the schema registered first keeps its id, so what
        # a reader decodes with that id never changes under it. Ids are still never handed
        # out again.
        self.max_id = max(self.max_id, stored.id)
        for subject, version in self._ids.get(stored.id, ()):
            if (subject, version) == (stored.subject, stored.version):
                continue
            holder = self._versions[subject][version]
            if (holder.schema_type, holder.schema, holder.references) != (
                stored.schema_type,
                stored.schema,
                stored.references,
            ):
                raise ValueError(
                    f"{stored.subject!r} version {stored.version} has id {stored.id}, "
                    f"already the id of another schema ({subject!r} version {version})"
                )
        versions = self._versions.setdefault(stored.subject, {})
        old = versions.get(stored.version)
        if old is not None and old.id != stored.id:
            self._unlink(old)
        versions[stored.version] = stored
        holders = self._ids.setdefault(stored.id, [])
        if (stored.subject, stored.version) not in holders:
            holders.append((stored.subject, stored.version))

    def _drop(self, subject: str, version: int) -> None:
        versions = self._versions.get(subject)
        if versions is None:
            return
        old = versions.pop(version, None)
        if old is not None:
            self._unlink(old)
        if not versions:
            del self._versions[subject]

    def _unlink(self, stored: StoredSchema) -> None:
        holders = self._ids.get(stored.id, [])
        if (stored.subject, stored.version) in holders:
            holders.remove((stored.subject, stored.version))
        if not holders:
            self._ids.pop(stored.id, None)

    # ------------------------------------------------------------------ queries

    def spellings(self, key: log_records.RegistryKey) -> list[bytes]:
        """The bytes ``key`` was written as, each holding a value compaction keeps."""
        return sorted(self._spellings.get(key, ()))

    def subjects(self, *, deleted: bool = False) -> list[str]:
        """The subjects with a version (soft-deleted ones too when ``deleted``), sorted."""
        return sorted(s for s in self._versions if self.versions(s, deleted=deleted))

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        """``subject``'s version numbers, ascending."""
        return sorted(
            v for v, s in self._versions.get(subject, {}).items() if deleted or not s.deleted
        )

    def version(self, subject: str, version: int, *, deleted: bool = False) -> StoredSchema | None:
        """One version (None if absent, or soft-deleted unless ``deleted``)."""
        stored = self._versions.get(subject, {}).get(version)
        if stored is None or (stored.deleted and not deleted):
            return None
        return stored

    def latest(self, subject: str, *, deleted: bool = False) -> StoredSchema | None:
        """The newest version of ``subject`` (soft-deleted ones only when ``deleted``)."""
        numbers = self.versions(subject, deleted=deleted)
        return self._versions[subject][numbers[-1]] if numbers else None

    def highest_version(self, subject: str) -> int:
        """The highest version number ``subject`` has held (0 for none): the next is above."""
        return max(self._versions.get(subject, {0: None}), default=0)

    def has_subject(self, subject: str) -> bool:
        """Whether ``subject`` has any version, soft-deleted or not."""
        return bool(self._versions.get(subject))

    def by_id(self, schema_id: int) -> StoredSchema | None:
        """A version holding ``schema_id`` (a live one if there is), or None."""
        found = None
        for subject, version in self._ids.get(schema_id, ()):
            stored = self._versions[subject][version]
            if not stored.deleted:
                return stored
            found = found or stored
        return found

    def id_holders(self, schema_id: int, *, deleted: bool = False) -> list[StoredSchema]:
        """Every version holding ``schema_id``, by subject and version."""
        out = [self._versions[s][v] for s, v in self._ids.get(schema_id, ())]
        return sorted(
            (s for s in out if deleted or not s.deleted), key=lambda s: (s.subject, s.version)
        )

    def all_schemas(self, *, deleted: bool = False) -> Iterator[StoredSchema]:
        """Every version of every subject, by subject and version."""
        for subject in sorted(self._versions):
            for version in sorted(self._versions[subject]):
                stored = self._versions[subject][version]
                if deleted or not stored.deleted:
                    yield stored

    def referenced_by(self, subject: str, version: int, *, deleted: bool = False) -> list[int]:
        """The ids of the schemas referring to ``subject``'s ``version``, ascending."""
        ids = {
            stored.id
            for stored in self.all_schemas(deleted=deleted)
            if any(r.subject == subject and r.version == version for r in stored.references)
        }
        return sorted(ids)

    def resolved_references(self, references: tuple[Reference, ...]) -> dict[str, str]:
        """Reference name → schema text for ``references`` and theirs, dependencies first.

        KeyError naming the reference whose subject version does not exist.
        """
        out: dict[str, str] = {}
        visiting: set[tuple[str, int]] = set()

        def visit(refs: tuple[Reference, ...]) -> None:
            for ref in refs:
                if ref.name in out or (ref.subject, ref.version) in visiting:
                    continue
                target = self.version(ref.subject, ref.version, deleted=True)
                if target is None:
                    raise KeyError(
                        f"reference {ref.name!r}: subject {ref.subject!r} "
                        f"version {ref.version} not found"
                    )
                visiting.add((ref.subject, ref.version))
                visit(target.references)
                out[ref.name] = target.schema

        visit(references)
        return out

    def compatibility(self, subject: str | None) -> str | None:
        """The level set on ``subject`` (None: the global one), or None when unset."""
        level = self._configs.get(subject, {}).get("compatibilityLevel")
        return level if isinstance(level, str) else None

    def config(self, subject: str | None) -> dict[str, object] | None:
        """The whole config value set on ``subject`` (None: global), or None when unset."""
        return self._configs.get(subject)

    def effective_compatibility(self, subject: str) -> str:
        """The level that applies to ``subject``: its own, the global one, or the default."""
        return self.compatibility(subject) or self.compatibility(None) or DEFAULT_COMPATIBILITY

    def mode(self, subject: str | None) -> str | None:
        """The mode set on ``subject`` (None: the global one), or None when unset."""
        return self._modes.get(subject)

    def effective_mode(self, subject: str | None) -> str:
        """The mode that applies: the subject's, the global one, or READWRITE."""
        return (
            (self._modes.get(subject) if subject is not None else None)
            or self._modes.get(None)
            or DEFAULT_MODE
        )
