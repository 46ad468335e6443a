"""The route table's entries, and the parsing of a route's query parameters from them.

A :class:`Route` is everything about one route: method, path, handler, its
parameters (:class:`Param`), the schema of its answer and the errors it may
give. The server registers the handlers from the table and
:mod:`~seglog.broker.http_api.openapi` documents the same table, so what is
served and what is documented cannot drift apart. Parameters are strict: an
unknown or repeated one is a 400, so that a misspelt ``form=`` is not
silently ignored.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from seglog.broker.http_api.auth import ConsoleSecurity
from seglog.broker.http_api.errors import bad_request
from seglog.broker.state import BrokerState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ParamKind = Literal["string", "integer", "boolean"]

STATE = web.AppKey("state", BrokerState)
"""The application's broker state."""
SECURITY = web.AppKey("security", ConsoleSecurity)
"""The application's users, ACLs and certificates."""


@dataclass(frozen=True)
class Param:
    """One parameter of a route: in its path or its query string."""

    name: str
    kind: ParamKind
    description: str
    location: Literal["query", "path"] = "query"
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None

    def parse(self, text: str) -> Any:
        """The value of ``text`` (400 ApiError when it is not one)."""
        if self.kind == "integer":
            try:
                value: Any = int(text, 10)
            except ValueError:
                raise bad_request(f"{self.name}: expected an integer, got {text!r}") from None
            if self.minimum is not None and value < self.minimum:
                raise bad_request(f"{self.name}: must be at least {self.minimum}, got {value}")
            return value
        if self.kind == "boolean":
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise bad_request(f"{self.name}: expected true or false, got {text!r}")
            return lowered == "true"
        if self.choices is not None and text not in self.choices:
            raise bad_request(f"{self.name}: expected one of {', '.join(self.choices)}")
        return text


@dataclass(frozen=True)
class Route:
    """One route of the API."""

    method: str
    path: str
    """aiohttp's form, which is also OpenAPI's: ``/v1/topics/{topic}/records``."""
    handler: Handler
    operation_id: str
    summary: str
    params: tuple[Param, ...] = ()
    response: Mapping[str, Any] = field(default_factory=dict)
    """The JSON schema of a 200 answer."""
    errors: tuple[int, ...] = ()
    """The error statuses it may answer (each with the error body)."""
    authenticated: bool = True
    """Whether it asks for credentials when the broker has SASL users."""
    content_type: str = "application/json"
    """The media type of a 200 answer (the console's page and assets are not JSON)."""

    def query(self, request: web.Request) -> dict[str, Any]:
        """The query parameters given, parsed; each absent one at its default.

        400 ApiError for a parameter the route does not take, one given twice,
        or a malformed value.
        """
        known = {p.name: p for p in self.params if p.location == "query"}
        values: dict[str, Any] = {p.name: p.default for p in known.values()}
        seen: set[str] = set()
        for name, text in request.query.items():
            param = known.get(name)
            if param is None:
                raise bad_request(
                    f"unknown parameter {name!r}; this route takes "
                    f"{', '.join(sorted(known)) or 'none'}"
                )
            if name in seen:
                raise bad_request(f"parameter {name!r} is given more than once")
            seen.add(name)
            values[name] = param.parse(text)
        return values


def json_response(body: Any, status: int = 200) -> web.Response:
    """``body`` as compact JSON."""
    return web.json_response(body, status=status, dumps=json_text)


def json_text(value: Any) -> str:
    """``value`` as compact JSON text, non-ASCII text as it is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
