"""``seglog find``: a key's newest record, or all its records newest first.

Two ways to reach the records:

- ``--log-dir DIR`` reads a log directory in place and read-only
  (:mod:`seglog.storage.key_lookup`), also while a broker writes it: no lock,
  no write. Segments with a sealed ``.keyindex`` are looked up through it, the
  others are indexed in memory for the lookup; a topic that keeps no key index
  (``key.index.enable=false``) is scanned whole, which is said on stderr.
- otherwise the broker's HTTP API (``seglog serve --console-port N``):
  ``GET /v1/topics/{topic}/records``. Its port is what the broker answers for
  ``console.port`` to DescribeConfigs (its own broker resource), on the host of
  the bootstrap server; ``--console-url`` gives the API's address instead. Over
  an SSL or SASL_SSL client configuration the API is asked over HTTPS with the
  client's trust store and certificate, and a SASL user's name and password go
  as HTTP Basic credentials, as the broker checks them.

Output, newest first (one partition: by offset; several: by timestamp, then
offset):

- ``text``: one line a record, tab separated: partition, offset, timestamp
  (ISO-8601, UTC), key, value (``null`` for a null value); key and value as
  their bytes;
- ``json``: one object a line with topic, partition, offset, timestamp, key,
  key_encoding, value, value_encoding and headers (a list of objects with key,
  value and value_encoding), as the HTTP API answers: text where the bytes are
  UTF-8 (``"utf8"``), else base64 (``"base64"``); a null value is null with a
  null encoding.

A key with no record prints nothing and exits 0; errors are one line on stderr
and exit 1, as the other commands.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from seglog.cli._client import ClientError, ClientSettings, connection_options, resolve
from seglog.cli._http import JsonHttp, served_url
from seglog.storage.key_search import record_json

#: What a lookup asks for, over either path.
Query = dict[str, Any]


class TimeParam(click.ParamType[int]):
    """A point in time: milliseconds since the epoch, or ISO-8601 (UTC when no offset is given)."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        return parse_time(str(value), lambda message: self.fail(message, param, ctx))


def parse_time(text: str, fail: Any = None) -> int:
    """Milliseconds since the epoch of ``text`` (epoch ms, or ISO-8601; naive means UTC).

    ValueError (or whatever ``fail`` raises) when it is neither.
    """
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        # A trailing Z is ISO-8601's UTC; fromisoformat takes it from Python 3.11 on.
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"{text!r} is neither milliseconds since the epoch nor an ISO-8601 time"
        if fail is not None:
            fail(message)
        raise ValueError(message) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _bytes_of(text: str | None, encoding: str | None) -> bytes | None:
    """The inverse of :func:`~seglog.storage.key_search.text_or_base64`."""
    if text is None:
        return None
    return base64.b64decode(text) if encoding == "base64" else text.encode("utf-8")


# ---------------------------------------------------------------- log directory


def _from_log_dir(root: Path, topic: str, key: bytes, query: Query) -> list[dict[str, Any]]:
    from seglog.storage import key_lookup

    found = key_lookup.find_in_log_dir(
        root,
        topic,
        key,
        partition=query["partition"],
        limit=query["limit"],
        from_ms=query["from"],
        to_ms=query["to"],
        read_committed=query["read_committed"],
    )
    if not key_lookup.topic_keeps_key_index(root, topic):
        click.echo(
            f"seglog: note: topic '{topic}' keeps no key index (key.index.enable=false): "
            "its segments were scanned",
            err=True,
        )
    return [record_json(record) for record in found]


# ---------------------------------------------------------------- broker


def console_url(client: ClientSettings, *, hint: str = ", or give --console-url") -> str:
    """The HTTP API's base URL: the port the broker tells, on the bootstrap server's host.

    ``hint`` ends the error said when the broker serves none (what else the
    command could be given).
    """
    return served_url(client, "console.port", "HTTP API", "--console-port N", hint)


_told_console_url = console_url  # inside find(), its --console-url option shadows the name


def _from_broker(
    base: str, client: ClientSettings, topic: str, key: bytes, query: Query
) -> list[dict[str, Any]]:
    params: dict[str, str] = {}
    try:
        params["key"] = key.decode("utf-8")
    except UnicodeDecodeError:
        params["key_base64"] = base64.b64encode(key).decode("ascii")
    params["all"] = "true" if query["limit"] != 1 else "false"
    if query["limit"] is not None and query["limit"] != 1:
        params["limit"] = str(query["limit"])
    for name in ("partition", "from", "to"):
        if query[name] is not None:
            params[name] = str(query[name])
    params["isolation_level"] = "read_committed" if query["read_committed"] else "read_uncommitted"
    path = f"/v1/topics/{urllib.parse.quote(topic, safe='')}/records"
    body = JsonHttp(base, client, "HTTP API").call(
        "GET", path, params=params, accept="application/json"
    )
    records = body.get("records") if isinstance(body, dict) else None
    if not isinstance(records, list):
        raise ClientError(f"the HTTP API at {base} answered no record list")
    return records


# ---------------------------------------------------------------- output


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _print(records: list[dict[str, Any]], output: str) -> None:
    out = sys.stdout.buffer
    for record in records:
        if output == "json":
            line = json.dumps(record, ensure_ascii=False).encode("utf-8")
        else:
            key = _bytes_of(record["key"], record.get("key_encoding"))
            value = _bytes_of(record["value"], record.get("value_encoding"))
            line = b"\t".join(
                [
                    str(record["partition"]).encode(),
                    str(record["offset"]).encode(),
                    _iso(int(record["timestamp"])).encode(),
                    b"null" if key is None else key,
                    b"null" if value is None else value,
                ]
            )
        out.write(line + b"\n")
    out.flush()


# ---------------------------------------------------------------- command


def _with_connection_options(func: Any) -> Any:
    for option in reversed(connection_options()):
        func = option(func)
    return func


@click.command("find")
@click.argument("topic")
@click.argument("key")
@click.option("--all", "all_records", is_flag=True, help="Every record of KEY, newest first.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="At most N records, newest first (implies --all).",
)
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Only this partition.")
@click.option(
    "--from",
    "from_time",
    type=TimeParam(),
    default=None,
    metavar="TIME",
    help="Only records with a timestamp at or after TIME (epoch ms or ISO-8601, UTC by default).",
)
@click.option(
    "--to",
    "to_time",
    type=TimeParam(),
    default=None,
    metavar="TIME",
    help="Only records with a timestamp at or before TIME.",
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
    help="read_committed: not past the last stable offset, without aborted transactions.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: partition, offset, time, key, value; json: one object a line.",
)
@click.option("--key-base64", is_flag=True, help="KEY is the key's bytes in base64.")
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Read this log directory in place (read-only, also while a broker runs).",
)
@click.option(
    "--console-url",
    default=None,
    metavar="URL",
    help="The broker's HTTP API (http[s]://HOST:PORT) [default: the port the broker tells].",
)
@_with_connection_options
def find(
    topic: str,
    key: str,
    all_records: bool,
    limit: int | None,
    partition: int | None,
    from_time: int | None,
    to_time: int | None,
    isolation_level: str,
    output: str,
    key_base64: bool,
    log_dir: Path | None,
    console_url: str | None,
    bootstrap_server: str | None,
    command_config: Path | None,
    properties: tuple[tuple[str, str], ...],
    timeout: float,
) -> None:
    """Print the newest record of KEY in TOPIC, or with --all all of them, newest first.

    From a broker's HTTP API (seglog serve --console-port N), or with --log-dir
    from a log directory's files. The topic's key index (key.index.enable)
    answers at once; through --log-dir an unindexed topic is scanned.

    \b
    Examples:
      seglog find orders order-42
      seglog find orders order-42 --all --from 2026-01-01T00:00:00Z --format json
      seglog find orders order-42 --log-dir /var/lib/seglog
    """
    if from_time is not None and to_time is not None and from_time > to_time:
        raise click.UsageError("--from is after --to")
    if log_dir is not None and (bootstrap_server or console_url):
        raise click.UsageError("give --log-dir, or --bootstrap-server / --console-url, not both")
    if key_base64:
        try:
            key_bytes = base64.b64decode(key, validate=True)
        except binascii.Error:
            raise click.BadParameter("not valid base64", param_hint="KEY") from None
    else:
        key_bytes = os.fsencode(key)  # the bytes typed, as the shell passed them
    query: Query = {
        "limit": limit if limit is not None else (None if all_records else 1),
        "partition": partition,
        "from": from_time,
        "to": to_time,
        "read_committed": isolation_level == "read_committed",
    }
    if log_dir is not None:
        records = _from_log_dir(log_dir, topic, key_bytes, query)
    else:
        client = resolve(bootstrap_server, command_config, properties, timeout)
        base = console_url or _told_console_url(client)
        records = _from_broker(base, client, topic, key_bytes, query)
    _print(records, output)
