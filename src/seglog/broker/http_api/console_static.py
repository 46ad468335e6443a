"""``GET /`` and ``GET /static/{path}``: the console's page and its assets, shipped in the package.

The console is one HTML page, one stylesheet and one ES module (no build
step, nothing fetched from elsewhere), read from the package's ``console``
folder. Both routes are unauthenticated: the page itself asks ``/v1/whoami``
and shows its login form on a 401. The page names its assets with a version
(a digest of their bytes) in the query string, and the assets are served
with a long cache lifetime: a new release's page asks for new URLs, so a
browser never runs a stale script against a newer API. The page itself is
never cached, and carries the cluster id so that the script can build REST v3
URLs before any other call.
"""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass
from functools import cache
from importlib import resources

from aiohttp import web

from seglog.broker.http_api.errors import ApiError
from seglog.broker.http_api.routes import STATE, Param, Route

ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
"""The assets served under ``/static/``, with their content types (no other name is)."""

_SECURITY_HEADERS = {
    # The console renders hostile data (keys, values): no script but its own may run.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class Bundle:
    """The console's files, read once from the package."""

    index: str
    """index.html with ``{{version}}`` left to fill."""
    assets: dict[str, bytes]
    version: str
    """A digest of every file: changes whenever any of them does."""


@cache
def bundle() -> Bundle:
    """The console's files (read from the installed package on first use)."""
    folder = resources.files("seglog.broker.http_api") / "console"
    index = (folder / "index.html").read_text(encoding="utf-8")
    assets = {name: (folder / name).read_bytes() for name in ASSETS}
    digest = hashlib.sha256(index.encode("utf-8"))
    for name in sorted(assets):
        digest.update(assets[name])
    return Bundle(index, assets, digest.hexdigest()[:16])


async def index_page(request: web.Request) -> web.StreamResponse:
    """The console's page, naming its versioned assets and the cluster id."""
    files = bundle()
    page = files.index.replace("{{version}}", files.version).replace(
        "{{cluster_id}}", html.escape(request.app[STATE].cluster_id, quote=True)
    )
    return web.Response(
        text=page,
        content_type="text/html",
        charset="utf-8",
        headers={"Cache-Control": "no-cache", **_SECURITY_HEADERS},
    )


async def static_asset(request: web.Request) -> web.StreamResponse:
    """One of the console's assets (404 for any other name)."""
    name = request.match_info["path"]
    files = bundle()
    if name not in ASSETS:
        raise ApiError(404, "INVALID_REQUEST", f"no such asset: {name!r}")
    # Versioned URLs change with the content: safe to keep for a year.
    cache_control = (
        "public, max-age=31536000, immutable"
        if request.query.get("v") == files.version
        else "no-cache"
    )
    return web.Response(
        body=files.assets[name],
        headers={
            "Content-Type": ASSETS[name],
            "Cache-Control": cache_control,
            "X-Content-Type-Options": "nosniff",
        },
    )


ROUTES = (
    Route(
        "GET",
        "/",
        index_page,
        "consolePage",
        "The console (HTML page)",
        response={"type": "string"},
        authenticated=False,
        content_type="text/html",
    ),
    Route(
        "GET",
        "/static/{path}",
        static_asset,
        "consoleAsset",
        "One of the console's assets (script, stylesheet)",
        params=(Param("path", "string", "the asset's name", location="path"),),
        response={"type": "string"},
        errors=(404,),
        authenticated=False,
        content_type="application/octet-stream",
    ),
)
