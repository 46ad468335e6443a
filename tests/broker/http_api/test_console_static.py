"""The console's page and assets: served from the package, unauthenticated, versioned."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Callable
from importlib import resources

import pytest

from tests.broker.http_api.conftest import TIMEOUT, Api, ApiBroker
from tests.broker.http_api.test_security import _start
from tests.broker.security.conftest import Secured


def fetch(api: Api, path: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(api.url(path), timeout=TIMEOUT) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def test_page_and_assets(api_broker: Callable[..., ApiBroker]) -> None:
    api = api_broker().api
    status, headers, body = fetch(api, "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache"
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    page = body.decode()
    assert "{{" not in page
    cluster = re.search(r'name="seglog-cluster-id" content="([^"]+)"', page)
    assert cluster is not None and cluster.group(1) != ""
    versions = set(re.findall(r'/static/console\.(?:js|css)\?v=([0-9a-f]+)"', page))
    assert len(versions) == 1
    [version] = versions
    folder = resources.files("seglog.broker.http_api") / "console"
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        status, headers, body = fetch(api, f"/static/{name}?v={version}")
        assert status == 200
        assert headers["Content-Type"].startswith(kind)
        assert "immutable" in headers["Cache-Control"]
        assert body == (folder / name).read_bytes()
        # Without the current version (an old page's URL), not kept.
        assert fetch(api, f"/static/{name}?v=old")[1]["Cache-Control"] == "no-cache"


@pytest.mark.parametrize(
    "path", ["/static/index.html", "/static/..%2Fserver.py", "/static/nothing.js", "/static/"]
)
def test_only_the_assets_are_served(api_broker: Callable[..., ApiBroker], path: str) -> None:
    status, _, body = fetch(api_broker().api, path)
    assert status == 404
    assert b"console.js" not in body or b"error_code" in body


def test_the_page_needs_no_credentials(secured_broker: Callable[..., Secured]) -> None:
    _, api = _start(secured_broker, "SASL_PLAINTEXT")
    assert fetch(api, "/")[0] == 200
    page = fetch(api, "/")[2].decode()
    version = re.findall(r"\?v=([0-9a-f]+)", page)[0]
    assert fetch(api, f"/static/console.js?v={version}")[0] == 200
    # The data still needs them.
    assert api.get("/v1/topics").status == 401
