"""The registry served on a port of its own (``schema.registry.port``), as Confluent's is."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from seglog.broker.http_api.auth import ConsoleSecurity
from seglog.broker.http_api.routes import SECURITY, STATE, Handler
from seglog.broker.http_api.server import AppServer
from seglog.broker.schema_registry.routes import STORE, add_routes, answer
from seglog.broker.schema_registry.store import RegistryStore
from seglog.broker.state import BrokerState

__all__ = ["RegistryServer", "application", "mount"]


@web.middleware
async def _unrouted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own refusals (no such route, method not allowed) in the registry's shape."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = answer({"error_code": exc.status, "message": exc.reason}, exc.status)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response


def application(
    state: BrokerState, security: ConsoleSecurity, store: RegistryStore
) -> web.Application:
    """The registry's own application."""
    app = web.Application(middlewares=[_unrouted], client_max_size=16 * 1024 * 1024)
    app[STATE] = state
    app[SECURITY] = security
    app[STORE] = store
    add_routes(app, with_root=True)
    return app


def mount(store: RegistryStore) -> Callable[[web.Application], None]:
    """What adds the registry's routes to the console's application (all but ``GET /``)."""

    def add(app: web.Application) -> None:
        app[STORE] = store
        add_routes(app, with_root=False)

    return add


class RegistryServer(AppServer):
    """The registry on ``host:port``."""

    def __init__(
        self,
        state: BrokerState,
        security: ConsoleSecurity,
        store: RegistryStore,
        host: str,
        port: int,
    ) -> None:
        super().__init__(application(state, security, store), security, host, port)
