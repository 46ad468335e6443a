"""``GET /openapi.json``: the OpenAPI 3 document of the route table.

Built from :data:`~seglog.broker.http_api.server.ROUTES` when asked, so it
lists exactly the routes served, each with its parameters, its answer's
schema and its errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seglog import __version__
from seglog.broker.http_api.routes import Param, Route

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error_code", "message"],
    "properties": {
        "error_code": {"type": "integer", "description": "Kafka's error code"},
        "message": {"type": "string"},
    },
}
_STATUS_TEXT = {
    400: "bad parameters, or a topic without key index",
    401: "authentication required or failed (HTTP Basic with a SASL user)",
    403: "not authorized by the ACLs",
    404: "unknown topic or partition",
    503: "a partition's leader or storage is unavailable; try again",
}


def _parameter(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.kind}
    if param.minimum is not None:
        schema["minimum"] = param.minimum
    if param.choices is not None:
        schema["enum"] = list(param.choices)
    if param.default is not None:
        schema["default"] = param.default
    if param.kind == "integer":
        schema["format"] = "int64"
    return {
        "name": param.name,
        "in": param.location,
        "required": param.location == "path",
        "description": param.description,
        "schema": schema,
    }


def _operation(route: Route) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {
            "description": "OK",
            "content": {route.content_type: {"schema": dict(route.response)}},
        }
    }
    for status in route.errors:
        responses[str(status)] = {
            "description": _STATUS_TEXT.get(status, "error"),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "parameters": [_parameter(p) for p in route.params],
        "responses": responses,
    }
    if not route.authenticated:
        operation["security"] = []
    return operation


def document(routes: Iterable[Route]) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "seglog broker HTTP API",
            "version": __version__,
            "description": (
                "Served by the broker when console.port is set. With SASL users, HTTP "
                "Basic with a user's name and password; ACLs apply as to Kafka clients."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR_SCHEMA},
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        },
        "security": [{"basic": []}],
    }
