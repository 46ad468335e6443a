"""The registry as a log directory holds it, read straight from ``_schemas``'s segments."""

from __future__ import annotations

import os

from seglog.schemas.log_records import SCHEMAS_TOPIC
from seglog.schemas.registry_state import RegistryState
from seglog.topic_source.base import UnknownPartitionError
from seglog.topic_source.files import FilesTopicSource

__all__ = ["read_registry"]


def read_registry(log_dir: str | os.PathLike[str]) -> RegistryState:
    """The registry's state in ``log_dir``'s ``_schemas`` (empty when it has none).

    Read-only, no broker needed: committed records only, as the registry
    itself reads its topic.
    """
    source = FilesTopicSource(log_dir, read_committed=True)
    state = RegistryState()
    try:
        start, end = source.bounds(SCHEMAS_TOPIC, 0)
    except UnknownPartitionError:
        return state
    for chunk in source.read(SCHEMAS_TOPIC, 0, start, end, headers=False):
        for record in chunk.records():
            state.apply(record.key, record.value)
    return state
