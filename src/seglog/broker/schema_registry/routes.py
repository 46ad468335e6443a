"""The registry's REST API, as Confluent Schema Registry 7.x serves it.

Paths, query parameters, bodies and errors (``{"error_code", "message"}``
with Confluent's codes: 40401 subject not found, 40403 schema not found,
409 incompatible, 42201 invalid schema ...) are Confluent's, so that
confluent-kafka's ``SchemaRegistryClient``, its serializers and any other
registry client work unchanged. Query parameters are lenient, as
Confluent's are (an unknown one is ignored).

Who may do what, with the broker's authorizer (see docs/schema-registry.md):
a subject belongs to the topic it names (``orders-value`` and ``orders-key``
to ``orders``; any other subject to the topic of its own name). Reading a
subject needs DESCRIBE on that topic, registering WRITE, deleting DELETE,
changing its compatibility or mode ALTER_CONFIGS; the global compatibility
and mode need DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster. A schema by id
is shown to a caller who may read one of the subjects holding it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.routes import SECURITY
from seglog.broker.http_api.topic_access import Caller, caller
from seglog.broker.schema_registry.store import RegistryStore
from seglog.broker.security.authorizer import Operation, ResourceType
from seglog.schemas import json_text
from seglog.schemas.log_records import StoredSchema
from seglog.schemas.registry import (
    SCHEMA_TYPES,
    RegistryError,
    RegistryReads,
    schema_json,
    schema_not_found,
    versions_json,
)

__all__ = ["CONTENT_TYPE", "ROUTES", "STORE", "add_routes"]

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
STORE = web.AppKey("schema_registry_store", RegistryStore)
CLUSTER_RESOURCE = "kafka-cluster"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answer(body: Any, status: int = 200) -> web.Response:
    """``body`` as the registry's JSON."""
    return web.Response(
        text=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type=CONTENT_TYPE,
    )


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def topic_of(subject: str) -> str:
    """The topic a subject belongs to, for authorization (the topic-name strategy's)."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def _allowed(request: web.Request, who: Caller, operation: Operation, subject: str | None) -> bool:
    authorizer = request.app[SECURITY].authorizer
    if authorizer is None:
        return True
    if subject is None:
        return authorizer.authorize(
            who.principal, who.host, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE
        )
    return authorizer.authorize(
        who.principal, who.host, operation, ResourceType.TOPIC, topic_of(subject)
    )


async def _require(request: web.Request, operation: Operation, subject: str | None) -> Caller:
    who = await caller(request)
    if not _allowed(request, who, operation, subject):
        what = f"Subject: {subject}" if subject is not None else "the registry's global settings"
        raise RegistryError(
            403, 40301, f"User {who.principal} is denied operation {operation.name} on {what}"
        )
    return who


async def _body(request: web.Request) -> Any:
    data = await request.read()
    try:
        return json_text.loads(data or b"null")
    except ValueError as exc:  # not JSON, not UTF-8, or nested too deep to take in
        raise RegistryError(400, 400, f"Unrecognized field or malformed JSON: {exc}") from exc


def _store(request: web.Request) -> RegistryStore:
    return request.app[STORE]


def _formatted(reads: RegistryReads, stored: StoredSchema, fmt: str | None) -> StoredSchema:
    """``stored`` with its text in ``format`` (Protobuf's ``serialized``: a base64 descriptor)."""
    if fmt != "serialized" or stored.schema_type != "PROTOBUF":
        return stored
    parsed: Any = reads.parsed(stored)
    return replace(stored, schema=parsed.serialized())


# ------------------------------------------------------------------ schemas


async def root(request: web.Request) -> web.StreamResponse:
    """``GET /``: an empty object, as Confluent's registry answers."""
    await caller(request)
    return answer({})


async def schema_types(request: web.Request) -> web.StreamResponse:
    """``GET /schemas/types``."""
    await caller(request)
    return answer(list(SCHEMA_TYPES))


async def contexts(request: web.Request) -> web.StreamResponse:
    """``GET /contexts``: the default context only."""
    await caller(request)
    return answer(["."])


async def schema_by_id(request: web.Request) -> web.StreamResponse:
    """``GET /schemas/ids/{id}``."""
    who = await caller(request)
    schema_id = _int(request.match_info["id"])
    fmt = request.query.get("format")

    def question(reads: RegistryReads) -> dict[str, Any]:
        stored = _visible_by_id(request, who, reads, schema_id)
        doc = schema_json(_formatted(reads, stored, fmt), with_subject=False)
        doc.pop("id", None)
        return doc

    return answer(await _store(request).read(question))


async def schema_text_by_id(request: web.Request) -> web.StreamResponse:
    """``GET /schemas/ids/{id}/schema``: the schema's text alone."""
    who = await caller(request)
    schema_id = _int(request.match_info["id"])
    fmt = request.query.get("format")

    def question(reads: RegistryReads) -> str:
        return _formatted(reads, _visible_by_id(request, who, reads, schema_id), fmt).schema

    text = await _store(request).read(question)
    return web.Response(text=text, content_type=CONTENT_TYPE)


async def schema_subjects(request: web.Request) -> web.StreamResponse:
    """``GET /schemas/ids/{id}/subjects``."""
    who = await caller(request)
    schema_id = _int(request.match_info["id"])
    deleted = _flag(request, "deleted")

    def question(reads: RegistryReads) -> list[str]:
        holders = _holders(request, who, reads, schema_id, deleted)
        return sorted({s.subject for s in holders})

    return answer(await _store(request).read(question))


async def schema_versions(request: web.Request) -> web.StreamResponse:
    """``GET /schemas/ids/{id}/versions``."""
    who = await caller(request)
    schema_id = _int(request.match_info["id"])
    deleted = _flag(request, "deleted")

    def question(reads: RegistryReads) -> list[dict[str, Any]]:
        return versions_json(_holders(request, who, reads, schema_id, deleted))

    return answer(await _store(request).read(question))


def _holders(
    request: web.Request, who: Caller, reads: RegistryReads, schema_id: int, deleted: bool
) -> list[StoredSchema]:
    holders = [
        s
        for s in reads.state.id_holders(schema_id, deleted=deleted)
        if _allowed(request, who, Operation.DESCRIBE, s.subject)
    ]
    if not holders:
        raise schema_not_found(schema_id)
    return holders


def _visible_by_id(
    request: web.Request, who: Caller, reads: RegistryReads, schema_id: int
) -> StoredSchema:
    holders = _holders(request, who, reads, schema_id, True)
    live = [s for s in holders if not s.deleted]
    return (live or holders)[0]


async def list_schemas(request: web.Request) -> web.StreamResponse:
    """``GET /schemas``: every version, filtered by ``subjectPrefix`` / ``latestOnly``."""
    who = await caller(request)
    prefix = request.query.get("subjectPrefix", "")
    deleted = _flag(request, "deleted")
    latest_only = _flag(request, "latestOnly")

    def question(reads: RegistryReads) -> list[dict[str, Any]]:
        out = []
        for subject in reads.state.subjects(deleted=deleted):
            if not subject.startswith(prefix) or not _allowed(
                request, who, Operation.DESCRIBE, subject
            ):
                continue
            versions = reads.state.versions(subject, deleted=deleted)
            for version in versions[-1:] if latest_only else versions:
                stored = reads.state.version(subject, version, deleted=True)
                assert stored is not None
                out.append(schema_json(stored))
        return out

    return answer(await _store(request).read(question))


# ----------------------------------------------------------------- subjects


async def list_subjects(request: web.Request) -> web.StreamResponse:
    """``GET /subjects``."""
    who = await caller(request)
    prefix = request.query.get("subjectPrefix", "")
    deleted = _flag(request, "deleted") or _flag(request, "deletedOnly")
    deleted_only = _flag(request, "deletedOnly")

    def question(reads: RegistryReads) -> list[str]:
        live = set(reads.state.subjects())
        return [
            s
            for s in reads.state.subjects(deleted=deleted)
            if s.startswith(prefix)
            and (not deleted_only or s not in live)
            and _allowed(request, who, Operation.DESCRIBE, s)
        ]

    return answer(await _store(request).read(question))


async def list_versions(request: web.Request) -> web.StreamResponse:
    """``GET /subjects/{subject}/versions``."""
    subject = request.match_info["subject"]
    await _require(request, Operation.DESCRIBE, subject)
    deleted = _flag(request, "deleted") or _flag(request, "deletedOnly")
    deleted_only = _flag(request, "deletedOnly")

    def question(reads: RegistryReads) -> list[int]:
        versions = reads.live_subject(subject, deleted=deleted)
        if deleted_only:
            live = set(reads.state.versions(subject))
            versions = [v for v in versions if v not in live]
        return versions

    return answer(await _store(request).read(question))


async def get_version(request: web.Request) -> web.StreamResponse:
    """``GET /subjects/{subject}/versions/{version}``."""
    subject, version = request.match_info["subject"], request.match_info["version"]
    await _require(request, Operation.DESCRIBE, subject)
    deleted, fmt = _flag(request, "deleted"), request.query.get("format")

    def question(reads: RegistryReads) -> dict[str, Any]:
        stored = reads.resolve_version(subject, version, deleted=deleted)
        return schema_json(_formatted(reads, stored, fmt))

    return answer(await _store(request).read(question))


async def latest_with_metadata(request: web.Request) -> web.StreamResponse:
    """``GET /subjects/{subject}/metadata?key=K&value=V...``: the newest version whose
    ``metadata.properties`` hold every pair given (confluent-kafka's
    ``get_latest_with_metadata``, its serializers' ``use.latest.with.metadata``)."""
    subject = request.match_info["subject"]
    await _require(request, Operation.DESCRIBE, subject)
    keys, values = request.query.getall("key", []), request.query.getall("value", [])
    if len(keys) != len(values):
        raise RegistryError(
            422, 42201, f"{len(keys)} metadata keys but {len(values)} values: give them in pairs"
        )
    wanted = dict(zip(keys, values, strict=True))
    deleted, fmt = _flag(request, "deleted"), request.query.get("format")

    def question(reads: RegistryReads) -> dict[str, Any]:
        for version in reversed(reads.live_subject(subject, deleted=deleted)):
            stored = reads.state.version(subject, version, deleted=deleted)
            properties = (stored.metadata or {}).get("properties") or {} if stored else {}
            if stored is not None and all(properties.get(k) == v for k, v in wanted.items()):
                return schema_json(_formatted(reads, stored, fmt))
        raise schema_not_found()

    return answer(await _store(request).read(question))


async def get_version_schema(request: web.Request) -> web.StreamResponse:
    """``GET /subjects/{subject}/versions/{version}/schema``: the text alone."""
    subject, version = request.match_info["subject"], request.match_info["version"]
    await _require(request, Operation.DESCRIBE, subject)
    deleted, fmt = _flag(request, "deleted"), request.query.get("format")

    def question(reads: RegistryReads) -> str:
        stored = reads.resolve_version(subject, version, deleted=deleted)
        return _formatted(reads, stored, fmt).schema

    return web.Response(text=await _store(request).read(question), content_type=CONTENT_TYPE)


async def referenced_by(request: web.Request) -> web.StreamResponse:
    """``GET /subjects/{subject}/versions/{version}/referencedby``: the ids referring to it."""
    subject, version = request.match_info["subject"], request.match_info["version"]
    await _require(request, Operation.DESCRIBE, subject)
    deleted = _flag(request, "deleted")

    def question(reads: RegistryReads) -> list[int]:
        stored = reads.resolve_version(subject, version, deleted=True)
        return reads.state.referenced_by(subject, stored.version, deleted=deleted)

    return answer(await _store(request).read(question))


async def register(request: web.Request) -> web.StreamResponse:
    """``POST /subjects/{subject}/versions``: ``{"id": N}``."""
    subject = request.match_info["subject"]
    await _require(request, Operation.WRITE, subject)
    body = await _body(request)
    args = {"subject": subject, "body": body, "normalize": _flag(request, "normalize")}
    return answer(await _store(request).change("register", args))


async def lookup(request: web.Request) -> web.StreamResponse:
    """``POST /subjects/{subject}``: the version holding the schema sent."""
    subject = request.match_info["subject"]
    await _require(request, Operation.DESCRIBE, subject)
    body = await _body(request)
    normalize, deleted = _flag(request, "normalize"), _flag(request, "deleted")
    return answer(
        await _store(request).read(
            lambda reads: reads.lookup(subject, body, normalize=normalize, deleted=deleted)
        )
    )


async def delete_subject(request: web.Request) -> web.StreamResponse:
    """``DELETE /subjects/{subject}``: the versions deleted."""
    subject = request.match_info["subject"]
    await _require(request, Operation.DELETE, subject)
    args = {"subject": subject, "permanent": _flag(request, "permanent")}
    return answer(await _store(request).change("delete_subject", args))


async def delete_version(request: web.Request) -> web.StreamResponse:
    """``DELETE /subjects/{subject}/versions/{version}``: the version deleted."""
    subject, version = request.match_info["subject"], request.match_info["version"]
    await _require(request, Operation.DELETE, subject)
    args = {"subject": subject, "version": version, "permanent": _flag(request, "permanent")}
    return answer(await _store(request).change("delete_version", args))


# ------------------------------------------------------------ compatibility


async def compatibility(request: web.Request) -> web.StreamResponse:
    """``POST /compatibility/subjects/{subject}/versions[/{version}]``."""
    subject = request.match_info["subject"]
    version = request.match_info.get("version")
    await _require(request, Operation.DESCRIBE, subject)
    body = await _body(request)
    normalize, verbose = _flag(request, "normalize"), _flag(request, "verbose")
    return answer(
        await _store(request).read(
            lambda reads: reads.compatibility(
                subject, version, body, normalize=normalize, verbose=verbose
            )
        )
    )


# ------------------------------------------------------------ config, mode


def _scope(request: web.Request) -> str | None:
    return request.match_info.get("subject")


async def get_config(request: web.Request) -> web.StreamResponse:
    """``GET /config[/{subject}]``."""
    subject = _scope(request)
    await _require(request, Operation.DESCRIBE if subject else Operation.DESCRIBE_CONFIGS, subject)
    default = _flag(request, "defaultToGlobal")
    return answer(
        await _store(request).read(lambda r: r.config(subject, default_to_global=default))
    )


async def put_config(request: web.Request) -> web.StreamResponse:
    """``PUT /config[/{subject}]``."""
    subject = _scope(request)
    await _require(request, Operation.ALTER_CONFIGS, subject)
    body = await _body(request)
    return answer(await _store(request).change("set_config", {"subject": subject, "body": body}))


async def delete_config(request: web.Request) -> web.StreamResponse:
    """``DELETE /config[/{subject}]``."""
    subject = _scope(request)
    await _require(request, Operation.ALTER_CONFIGS, subject)
    return answer(await _store(request).change("delete_config", {"subject": subject}))


async def get_mode(request: web.Request) -> web.StreamResponse:
    """``GET /mode[/{subject}]``."""
    subject = _scope(request)
    await _require(request, Operation.DESCRIBE if subject else Operation.DESCRIBE_CONFIGS, subject)
    default = _flag(request, "defaultToGlobal")
    return answer(await _store(request).read(lambda r: r.mode(subject, default_to_global=default)))


async def put_mode(request: web.Request) -> web.StreamResponse:
    """``PUT /mode[/{subject}]``."""
    subject = _scope(request)
    await _require(request, Operation.ALTER_CONFIGS, subject)
    body = await _body(request)
    args = {"subject": subject, "body": body, "force": _flag(request, "force")}
    return answer(await _store(request).change("set_mode", args))


async def delete_mode(request: web.Request) -> web.StreamResponse:
    """``DELETE /mode/{subject}``."""
    subject = request.match_info["subject"]
    await _require(request, Operation.ALTER_CONFIGS, subject)
    return answer(await _store(request).change("delete_mode", {"subject": subject}))


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise RegistryError(404, 40403, f"Schema {text} not found") from None


ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/schemas/types", schema_types),
    ("GET", "/schemas", list_schemas),
    ("GET", "/schemas/ids/{id}", schema_by_id),
    ("GET", "/schemas/ids/{id}/schema", schema_text_by_id),
    ("GET", "/schemas/ids/{id}/subjects", schema_subjects),
    ("GET", "/schemas/ids/{id}/versions", schema_versions),
    ("GET", "/subjects", list_subjects),
    ("POST", "/subjects/{subject}", lookup),
    ("DELETE", "/subjects/{subject}", delete_subject),
    ("GET", "/subjects/{subject}/versions", list_versions),
    ("POST", "/subjects/{subject}/versions", register),
    ("GET", "/subjects/{subject}/versions/{version}", get_version),
    ("DELETE", "/subjects/{subject}/versions/{version}", delete_version),
    ("GET", "/subjects/{subject}/versions/{version}/schema", get_version_schema),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby", referenced_by),
    ("GET", "/subjects/{subject}/metadata", latest_with_metadata),
    ("POST", "/compatibility/subjects/{subject}/versions", compatibility),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}", compatibility),
    ("GET", "/config", get_config),
    ("PUT", "/config", put_config),
    ("DELETE", "/config", delete_config),
    ("GET", "/config/{subject}", get_config),
    ("PUT", "/config/{subject}", put_config),
    ("DELETE", "/config/{subject}", delete_config),
    ("GET", "/mode", get_mode),
    ("PUT", "/mode", put_mode),
    ("GET", "/mode/{subject}", get_mode),
    ("PUT", "/mode/{subject}", put_mode),
    ("DELETE", "/mode/{subject}", delete_mode),
    ("GET", "/contexts", contexts),
)
"""Every route (``GET /`` too on the registry's own port, not on the console's)."""


def add_routes(app: web.Application, *, with_root: bool) -> None:
    """Register :data:`ROUTES` on ``app`` (``GET /`` too when ``with_root``)."""
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, _answering_errors(handler))
    if with_root:
        app.router.add_route("GET", "/", _answering_errors(root))


def _answering_errors(handler: Handler) -> Handler:
    """``handler`` with its refusals answered as the registry's errors, on any server."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except RegistryError as exc:
            return answer(exc.body(), exc.status)
        except web.HTTPException:
            # aiohttp's own answers (413 for a body over client_max_size) stay what they are;
            # each server's middleware gives them the shape of its errors.
            raise
        except ApiError as exc:
            # Authentication (401) and the broker's own refusals, in the registry's shape.
            code = {401: 40101, 403: 40301}.get(exc.status, exc.status * 100 + 1)
            response = answer({"error_code": code, "message": exc.message}, exc.status)
            response.headers.update(exc.headers)
            return response
        except Exception:
            logger.exception("schema registry: %s %s failed", request.method, request.path)
            return answer({"error_code": 50001, "message": "Error in the backend data store"}, 500)

    return handle
