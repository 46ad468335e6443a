"""The field model: what a message description is made of.

A :class:`Field` is one field of a message or struct; :func:`F` builds one
from the compact notation of the tables in ``messages/`` (version ranges as
strings, as in Kafka's specifications). Defaults follow Kafka's rules: a
declared default, else 0 / false / "" / empty bytes / the zero uuid / an empty
array / a struct of its fields' defaults, and empty records. See
:mod:`seglog.protocol.schema` for the theory of operation.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from seglog.protocol import primitives as p

MAX_VERSION: Final = 0x7FFF
"""The top of an open version range such as ``"3+"``."""

Versions: TypeAlias = tuple[int, int]
"""An inclusive (low, high) version range; (1, 0) is empty."""

NO_VERSIONS: Final[Versions] = (1, 0)

INLINE_RECORDS_LIMIT: Final = 4096
"""Bytes-like records at least this long become their own chunk instead of being copied."""

Chunk: TypeAlias = Sized
"""A piece of an encoded message: bytes-like, or a records object that fills a hole."""


def parse_versions(spec: str | None) -> Versions:
    """``"3+"`` → (3, MAX), ``"0-7"`` → (0, 7), ``"5"`` → (5, 5), ``"none"``/None → empty."""
    if spec is None or spec == "none":
        return NO_VERSIONS
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    low, sep, high = spec.partition("-")
    return (int(low), int(high)) if sep else (int(low), int(low))


@dataclass(frozen=True, slots=True)
class RecordsRef:
    """A placeholder for ``length`` bytes of records that the caller will send itself.

    Encoding leaves a hole of ``length`` bytes where it stands and hands the
    object back among the chunks; ``source`` is free for the caller (a file
    and offset, a cache key). Any other sized object works the same way.
    """

    length: int
    source: Any = None

    def __len__(self) -> int:
        return self.length


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""The default of a field whose table gives none: the type's own default applies."""

FIXED_CODES: Final[dict[str, str]] = {  # fixed-width types and their struct codes
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
}
_TYPES: Final = frozenset(FIXED_CODES) | {"string", "bytes", "uuid", "records", "struct"}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct.

    ``name`` is the snake_case key of the decoded dict; ``type`` one of
    ``bool int8 int16 uint16 int32 int64 float64 string bytes uuid records
    struct`` or an array ``[]T`` of those; ``versions`` the versions that carry
    the field; ``nullable`` those where it may be null; ``tag``/``tagged`` its
    tag and the versions where it lives in the tagged-field section;
    ``default`` its declared default (:data:`MISSING`: the type's);
    ``failed`` the value the field takes in an entry that failed, where Kafka's
    differs from the default (its ``INVALID_*`` constants: a high watermark or
    a base offset of -1; :data:`MISSING`: the default);
    ``ignorable`` whether a value may be dropped silently for a version that
    lacks the field; ``never_flexible`` keeps non-compact encodings in flexible
    versions (``RequestHeader.client_id``); ``fields`` the members of a struct.
    """

    name: str
    type: str
    versions: Versions = (0, MAX_VERSION)
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    tagged: Versions = NO_VERSIONS
    default: Any = MISSING
    ignorable: bool = False
    never_flexible: bool = False
    fields: tuple[Field, ...] = ()
    failed: Any = MISSING

    def __post_init__(self) -> None:
        kind = self.item_type
        if kind not in _TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        if (kind == "struct") != bool(self.fields):
            raise ValueError(f"field {self.name}: struct types need fields, others none")
        if self.tag is not None and self.tagged == NO_VERSIONS:
            raise ValueError(f"field {self.name}: a tag needs tagged versions")

    @property
    def is_array(self) -> bool:
        """True for ``[]T`` types."""
        return self.type.startswith("[]")

    @property
    def item_type(self) -> str:
        """``T`` for ``[]T``, else the type itself."""
        return self.type[2:] if self.type.startswith("[]") else self.type

    def present(self, version: int) -> bool:
        """True when ``version`` carries this field."""
        return self.versions[0] <= version <= self.versions[1]

    def is_nullable(self, version: int) -> bool:
        """True when the field may be null in ``version``."""
        return self.nullable[0] <= version <= self.nullable[1]

    def tagged_in(self, version: int) -> bool:
        """True when the field is a tagged field in ``version``."""
        return self.tag is not None and self.tagged[0] <= version <= self.tagged[1]

    def default_value(self, version: int) -> Any:
        """The field's default at ``version`` (a fresh object for lists and dicts)."""
        if self.default is not MISSING:
            return self.default
        if self.is_array:
            return []
        kind = self.type
        if kind == "struct":
            return {f.name: f.default_value(version) for f in self.fields}
        if kind == "bool":
            return False
        if kind == "float64":
            return 0.0
        if kind in FIXED_CODES:
            return 0
        if kind == "string":
            return ""
        if kind == "bytes":
            return b""
        if kind == "uuid":
            return p.ZERO_UUID
        # Records: empty, never null. Kafka's generated default is null, but every
        # Kafka answer sets empty records, and clients reject null ones (librdkafka:
        # "invalid MessageSetSize -1"): an entry that leaves them out stays readable.
        return b""

    def failed_value(self, version: int) -> Any:
        """The field's value in an entry that failed (its default unless declared)."""
        if self.failed is not MISSING:
            return self.failed
        return self.default_value(version)


def F(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = MISSING,
    ignorable: bool = False,
    never_flexible: bool = False,
    fields: tuple[Field, ...] = (),
    failed: Any = MISSING,
) -> Field:
    """A :class:`Field` from the compact notation of the tables.

    Version ranges are strings as in Kafka's specifications (``"3+"``,
    ``"0-7"``); ``tagged`` defaults to ``versions`` when a ``tag`` is given.
    """
    return Field(
        name=name,
        type=type,
        versions=parse_versions(versions),
        nullable=parse_versions(nullable),
        tag=tag,
        tagged=parse_versions(tagged or versions) if tag is not None else NO_VERSIONS,
        default=default,
        ignorable=ignorable,
        never_flexible=never_flexible,
        fields=fields,
        failed=failed,
    )


__all__ = [
    "FIXED_CODES",
    "INLINE_RECORDS_LIMIT",
    "MAX_VERSION",
    "MISSING",
    "NO_VERSIONS",
    "Chunk",
    "F",
    "Field",
    "RecordsRef",
    "Versions",
    "parse_versions",
]
