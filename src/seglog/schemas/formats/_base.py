"""What every parsed schema offers, whatever its type, and the one error parsing raises."""

from __future__ import annotations

import abc
from typing import ClassVar


class InvalidSchemaError(ValueError):
    """The text is not a valid schema of its type (or one of its references is not).

    The message says what is wrong in the words a registry answers with (error 42201).
    """


class ParsedSchema(abc.ABC):
    """A schema parsed and checked: its type, its canonical text and its normalized form."""

    schema_type: ClassVar[str]

    @abc.abstractmethod
    def canonical(self) -> str:
        """The text stored and compared for identity: the schema with only layout removed."""

    @abc.abstractmethod
    def normalize(self) -> ParsedSchema:
        """The same schema in a fixed form, so that equivalent schemas have equal canonical text."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParsedSchema):
            return NotImplemented
        return self.schema_type == other.schema_type and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash((self.schema_type, self.canonical()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.canonical()!r})"


def message(error_type: str, description: str, additional_info: str | None = None) -> str:
    """One incompatibility in the registry's style: ``{errorType:'…', description:'…'}``."""
    text = f"{{errorType:'{error_type}', description:'{description}'"
    if additional_info is not None:
        text += f", additionalInfo:'{additional_info}'"
    return text + "}"
