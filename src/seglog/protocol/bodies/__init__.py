"""Typed request and response bodies, one module per API family (generated).

Every module but this one is written by ``python -m seglog.gen_bodies`` from
:mod:`seglog.protocol.messages`; see :mod:`seglog.gen_bodies` for the rules. The
bodies are ``TypedDict`` classes: at run time they are the plain dicts the codec reads and
writes, so typing a handler's body costs nothing at run time.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import TypeAlias

RequestRecords: TypeAlias = bytes | bytearray | memoryview
"""Records in a request: a view of the frame when decoded, bytes when a client builds one."""

ResponseRecords: TypeAlias = Sized
"""Records in a response: bytes-like, or a sized object the sender fills (a file region)."""

FAMILIES = (
    "produce",
    "fetch",
    "offsets",
    "metadata",
    "groups",
    "sasl",
    "api_versions",
    "admin",
    "producer",
    "acls",
    "replicas",
    "quotas",
    "security",
    "forwarding",
    "share",
)
"""The generated modules, one per module of :mod:`seglog.protocol.messages`."""
