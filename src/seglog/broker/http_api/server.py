"""The API's site: the route table registered on an aiohttp application, served on the loop.

aiohttp runs on the broker's own event loop: a request costs the loop only
its parsing and answer, and the storage work of a lookup runs in worker
threads (:mod:`.lookup`). A client that disconnects mid-request does not
cancel its handler (aiohttp's default since 3.9): the lookup under way ends
and its answer is dropped, so a thread is never abandoned holding storage.
Stopping waits for the requests under way (up to :data:`SHUTDOWN_SECONDS`)
before the broker closes its storage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from seglog.broker.http_api import (
    browse,
    console_static,
    consumer_groups,
    openapi,
    overview,
    produce,
    security_views,
    share_groups,
    topics,
    v3_cluster,
    v3_topics,
)
from seglog.broker.http_api.auth import ConsoleSecurity
from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.routes import SECURITY, STATE, Handler, Route, json_response
from seglog.broker.state import BrokerState
from seglog.protocol import error_codes

logger = logging.getLogger(__name__)

CONSOLE_HEADER = "X-Seglog-Console"
"""Sent as ``1`` by the console's page: a 401 then comes without ``WWW-Authenticate``."""
SHUTDOWN_SECONDS = 30.0
"""How long stopping waits for requests under way."""


async def _openapi(request: web.Request) -> web.StreamResponse:
    """The OpenAPI document of :data:`ROUTES`."""
    return json_response(openapi.document(ROUTES))


OPENAPI = Route(
    "GET",
    "/openapi.json",
    _openapi,
    "openapi",
    "This API's OpenAPI 3 document",
    response={"type": "object"},
    authenticated=False,
)

ROUTES: tuple[Route, ...] = (
    *topics.ROUTES,
    *v3_topics.ROUTES,
    *browse.ROUTES,
    *produce.ROUTES,
    *v3_cluster.ROUTES,
    *consumer_groups.ROUTES,
    *share_groups.ROUTES,
    *overview.ROUTES,
    *security_views.ROUTES,
    *console_static.ROUTES,
    OPENAPI,
)
"""Every route served; add a route here (and its module) to serve and document it."""


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as ``{"error_code", "message"}`` JSON, whatever raised it."""
    try:
        return await handler(request)
    except ApiError as exc:
        response = json_response(exc.body(), exc.status)
        response.headers.update(exc.headers)
        if request.headers.get(CONSOLE_HEADER) == "1":
            # The console's own page asks: its login form, not the browser's prompt.
            response.headers.popall("WWW-Authenticate", None)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        # aiohttp's own: no such route (404), method not allowed (405).
        code = error_codes.code_for("INVALID_REQUEST")
        response = json_response({"error_code": code, "message": exc.reason}, exc.status)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception:
        logger.exception("HTTP API: %s %s failed", request.method, request.path)
        return json_response(
            {"error_code": error_codes.UNKNOWN_SERVER_ERROR, "message": "internal error"}, 500
        )


def application(state: BrokerState, security: ConsoleSecurity) -> web.Application:
    """The API's application: :data:`ROUTES` over ``state``."""
    app = web.Application(middlewares=[_errors])
    app[STATE] = state
    app[SECURITY] = security
    app[overview.SAMPLER] = overview.ThroughputSampler(state)
    for route in ROUTES:
        app.router.add_route(route.method, route.path, _strict(route), name=route.operation_id)
    return app


def _strict(route: Route) -> Handler:
    """``route``'s handler, refusing (400) a query parameter it does not take.

    Every API route, so that a misspelt parameter is an error rather than
    silently ignored; the console's page and assets are browsed, not called,
    and keep theirs lenient.
    """
    if route.content_type != "application/json":
        return route.handler

    async def handle(request: web.Request) -> web.StreamResponse:
        route.query(request)
        return await route.handler(request)

    return handle


class AppServer:
    """An aiohttp application served on ``host:port`` on the broker's loop (HTTPS when
    ``security`` has a TLS context): the console's API, the schema registry."""

    def __init__(
        self, app: web.Application, security: ConsoleSecurity, host: str, port: int
    ) -> None:
        self._app = app
        self._security = security
        self._host = host
        self._requested_port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve (OSError when the port cannot be bound)."""
        runner = web.AppRunner(
            self._app,
            handle_signals=False,  # the broker's own handlers stop it
            access_log=None,
            shutdown_timeout=SHUTDOWN_SECONDS,
        )
        await runner.setup()
        try:
            site = web.TCPSite(
                runner,
                self._host or None,
                self._requested_port,
                ssl_context=self._security.ssl_context,
                reuse_address=True,
            )
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    @property
    def scheme(self) -> str:
        """``https`` or ``http``."""
        return "https" if self._security.ssl_context is not None else "http"

    @property
    def port(self) -> int:
        """The port bound (the one chosen when asked for 0)."""
        assert self._runner is not None
        address: Any = self._runner.addresses[0]
        return int(address[1])

    async def close(self) -> None:
        """Stop accepting, let the requests under way finish, release the port."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


class ConsoleServer(AppServer):
    """The API served on ``host:port``, with the throughput sampler of its overview."""

    def __init__(
        self,
        state: BrokerState,
        security: ConsoleSecurity,
        host: str,
        port: int,
        *,
        extra: Callable[[web.Application], None] | None = None,
    ) -> None:
        app = application(state, security)
        if extra is not None:
            extra(app)
        super().__init__(app, security, host, port)

    async def start(self) -> None:
        """Bind and serve, and start sampling throughput."""
        await super().start()
        self._app[overview.SAMPLER].start()

    async def close(self) -> None:
        """Stop sampling, then stop serving."""
        if self._runner is not None:
            await self._app[overview.SAMPLER].stop()
        await super().close()
