"""What the commands that talk to a broker's HTTP servers share (the console's API, the
schema registry): finding the URL the broker tells, HTTP Basic from the client's SASL
credentials, its trust store for HTTPS, and one-line errors.

A server's port is what the broker answers for its setting (``console.port``,
``schema.registry.port``) to DescribeConfigs, on the host of the bootstrap
server; over an SSL or SASL_SSL client configuration the URL is HTTPS.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from seglog.cli._client import ClientError, ClientSettings

__all__ = ["JsonHttp", "http_error", "served_url"]

_SSL_PROTOCOLS = ("ssl", "sasl_ssl")
_SASL_PROTOCOLS = ("sasl_plaintext", "sasl_ssl")


def served_url(client: ClientSettings, setting: str, what: str, start_hint: str, hint: str) -> str:
    """The base URL of the broker's server on ``setting``'s port (ClientError if none).

    ``start_hint`` says how to start the broker with it (``--console-port N``),
    ``hint`` ends the error with what else the command could be given.
    """
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        ResourceType,
    )

    from seglog.cli._client import reporting, wait_for_broker

    first = client.bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    with reporting("bad client configuration"):
        admin = AdminClient(client.config())
    wait_for_broker(admin, client)
    asking = f"cannot ask the broker for its {what}'s port"
    if hint:
        asking += f" ({hint.removeprefix(', or ').strip()})"
    with reporting(asking):
        brokers: dict[int, Any] = dict(admin.list_topics(timeout=client.timeout).brokers)

        def named_first(node: int) -> tuple[bool, int]:
            meta = brokers[node]
            return (not (str(meta.host) == host and str(meta.port) == port), node)

        # The broker the bootstrap server names (each node of several serves its own port).
        ids = sorted(brokers, key=named_first)
        if not ids:
            raise ClientError(f"{client.bootstrap} named no broker")
        resource = ConfigResource(ResourceType.BROKER, str(ids[0]))
        configs = admin.describe_configs([resource])[resource].result(client.timeout)
    entry = configs.get(setting)
    value = None if entry is None else entry.value
    if value in (None, "", "0"):
        raise ClientError(
            f"the broker at {first} serves no {what}: start it with {start_hint} ({setting}){hint}"
        )
    scheme = "https" if protocol(client) in _SSL_PROTOCOLS else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{value}"


def protocol(client: ClientSettings) -> str:
    """The client's ``security.protocol``, lower case."""
    return client.properties.get("security.protocol", "plaintext").lower()


def ssl_context(client: ClientSettings) -> ssl.SSLContext:
    """The client's trust store and, for mutual TLS, its certificate."""
    props = client.properties
    context = ssl.create_default_context(cafile=props.get("ssl.ca.location"))
    if props.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    certificate = props.get("ssl.certificate.location")
    if certificate:
        context.load_cert_chain(
            certificate, props.get("ssl.key.location"), props.get("ssl.key.password")
        )
    return context


def basic_auth(client: ClientSettings) -> str | None:
    """HTTP Basic of the client's SASL user, when it has one."""
    props = client.properties
    if protocol(client) not in _SASL_PROTOCOLS and "sasl.username" not in props:
        return None
    user, password = props.get("sasl.username", ""), props.get("sasl.password", "")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def http_error(status: int, raw: bytes) -> str:
    """One line for an error answer: what the status means and the server's message."""
    try:
        message = str(json.loads(raw)["message"])
    except (ValueError, KeyError, TypeError):
        message = raw.decode("utf-8", "replace").strip() or "no message"
    what = {
        401: "authentication required (give sasl.username and sasl.password)",
        403: "not authorized",
    }.get(status)
    return f"{what}: {message}" if what else message


class JsonHttp:
    """JSON requests to one of the broker's HTTP servers, as the client's user."""

    def __init__(self, base: str, client: ClientSettings, what: str) -> None:
        self.base = base.rstrip("/")
        self._client = client
        self._what = what

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        accept: str = "application/json",
    ) -> Any:
        """The decoded answer (ClientError with the server's message on an error status)."""
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", accept)
        auth = basic_auth(self._client)
        if auth is not None:
            request.add_header("Authorization", auth)
        context = ssl_context(self._client) if url.startswith("https:") else None
        try:
            with urllib.request.urlopen(
                request, timeout=self._client.timeout, context=context
            ) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            with error:
                raise ClientError(http_error(error.code, error.read())) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ClientError(f"cannot reach the {self._what} at {self.base}: {reason}") from None
