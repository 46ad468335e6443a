"""``seglog schemas``: the schema registry's subjects, versions, compatibility and settings.

Like Confluent's ``schema-registry`` commands, over the registry's REST API:
the one the running broker serves (its ``schema.registry.port``, found as
``seglog console`` finds the console) unless ``--schema-registry-url`` names
another (Confluent's own registry included). With SASL client settings the
registry is asked with HTTP Basic as that user.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from seglog.cli._client import ClientError, ClientSettings, client_options, text_table
from seglog.cli._http import JsonHttp, served_url
from seglog.schemas.formats import LEVELS

__all__ = ["schemas"]

REGISTRY_URL_ENV = "SEGLOG_SCHEMA_REGISTRY_URL"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_TYPES_BY_SUFFIX = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}


def registry(client: ClientSettings, url: str | None) -> JsonHttp:
    """The registry to ask: ``url``, else the one the broker serves."""
    base = url or served_url(
        client,
        "schema.registry.port",
        "schema registry",
        "--schema-registry-port N",
        ", or give --schema-registry-url",
    )
    return JsonHttp(base, client, "schema registry")


def schema_source(http: JsonHttp) -> Callable[[int], tuple[str, str, dict[str, str]]]:
    """What a :class:`~seglog.schemas.decoding.WireDecoder` asks: a schema by id, with the
    texts of its references (theirs too, dependencies first)."""

    def references(refs: list[dict[str, Any]], into: dict[str, str]) -> None:
        for ref in refs:
            if ref["name"] in into:
                continue
            path = f"/subjects/{_subject(ref['subject'])}/versions/{ref['version']}"
            used = _call(http, "GET", path, deleted=True)
            references(used.get("references", []), into)
            into[ref["name"]] = used["schema"]

    def source(schema_id: int) -> tuple[str, str, dict[str, str]]:
        try:
            answer = _call(http, "GET", f"/schemas/ids/{schema_id}")
        except ClientError as exc:
            raise KeyError(f"schema {schema_id}: {exc}") from None
        found: dict[str, str] = {}
        references(answer.get("references", []), found)
        return answer.get("schemaType", "AVRO"), answer["schema"], found

    return source


def _call(http: JsonHttp, method: str, path: str, body: Any = None, **params: object) -> Any:
    given = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
    return http.call(method, path, body, params=given or None, accept=CONTENT_TYPE)


def _subject(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


registry_url_option = click.option(
    "--schema-registry-url",
    "registry_url",
    default=None,
    envvar=REGISTRY_URL_ENV,
    show_envvar=True,
    metavar="URL",
    help="The registry's URL [default: the one the broker serves].",
)


def _registry_options(func: Callable[..., Any]) -> Callable[..., Any]:
    return client_options(registry_url_option(func))


def _schema_body(
    path: Path, schema_type: str | None, references: tuple[str, ...]
) -> dict[str, Any]:
    """A register/check body: the file's text, its type (from its suffix unless given)."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read the schema file {path}: {exc}") from None
    kind = schema_type or _TYPES_BY_SUFFIX.get(path.suffix.lower(), "AVRO")
    body: dict[str, Any] = {"schema": text}
    if kind != "AVRO":
        body["schemaType"] = kind
    refs = []
    for given in references:
        name, sep, rest = given.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not sep or not colon or not version.isdigit():
            raise click.BadParameter(
                f"expected NAME=SUBJECT:VERSION, got {given!r}", param_hint="--reference"
            )
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _pretty(schema: str, schema_type: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), indent=2, ensure_ascii=False)
        except ValueError:
            return schema
    return schema


type_option = click.option(
    "--type",
    "schema_type",
    type=click.Choice(["AVRO", "JSON", "PROTOBUF"], case_sensitive=False),
    default=None,
    help="The schema's type [default: from FILE's suffix: .avsc AVRO, .json JSON, .proto "
    "PROTOBUF; else AVRO].",
)
reference_option = click.option(
    "--reference",
    "references",
    multiple=True,
    metavar="NAME=SUBJECT:VERSION",
    help="A schema this one uses, by the name it uses it under (repeatable).",
)


@click.group("schemas")
def schemas() -> None:
    """The schema registry: subjects, versions, compatibility, settings.

    \b
    Examples:
      seglog schemas list
      seglog schemas register orders-value order.avsc
      seglog schemas check orders-value order-v2.avsc
      seglog schemas show orders-value
      seglog schemas config orders-value --set FULL
      seglog schemas delete orders-value --version 1
    """


@schemas.command("list")
@click.option("--prefix", default="", help="Only subjects starting with this.")
@click.option("--deleted", is_flag=True, help="Soft-deleted subjects too.")
@_registry_options
def list_subjects(
    prefix: str, deleted: bool, registry_url: str | None, client: ClientSettings
) -> None:
    """The subjects: versions, latest version's id and type."""
    http = registry(client, registry_url)
    rows = [["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"]]
    for subject in _call(http, "GET", "/subjects", subjectPrefix=prefix, deleted=deleted):
        versions = _call(http, "GET", f"/subjects/{_subject(subject)}/versions", deleted=deleted)
        latest = _call(
            http, "GET", f"/subjects/{_subject(subject)}/versions/{versions[-1]}", deleted=deleted
        )
        rows.append(
            [
                subject,
                str(len(versions)),
                str(latest["version"]),
                str(latest["id"]),
                latest.get("schemaType", "AVRO"),
            ]
        )
    if len(rows) == 1:
        click.echo("no subjects", err=True)
        return
    for line in text_table(rows):
        click.echo(line)


@schemas.command("show")
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True, help="The version to show.")
@click.option("--id", "schema_id", type=int, default=None, help="The schema of this id instead.")
@click.option("--json", "as_json", is_flag=True, help="The registry's whole answer, as JSON.")
@_registry_options
def show(
    subject: str | None,
    version: str,
    schema_id: int | None,
    as_json: bool,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """A subject's version (the latest unless --version), or a schema by --id."""
    if (subject is None) == (schema_id is None):
        raise click.UsageError("give a SUBJECT or --id, not both")
    http = registry(client, registry_url)
    if schema_id is not None:
        answer = _call(http, "GET", f"/schemas/ids/{schema_id}")
        answer["id"] = schema_id
    else:
        assert subject is not None
        answer = _call(http, "GET", f"/subjects/{_subject(subject)}/versions/{version}")
    if as_json:
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False))
        return
    kind = answer.get("schemaType", "AVRO")
    where = f"{answer['subject']} version {answer['version']}, " if "subject" in answer else ""
    click.echo(f"# {where}id {answer['id']}, {kind}", err=True)
    for ref in answer.get("references", []):
        click.echo(f"# uses {ref['name']} = {ref['subject']} version {ref['version']}", err=True)
    click.echo(_pretty(answer["schema"], kind))


@schemas.command("register")
@click.argument("subject")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True))
@type_option
@reference_option
@click.option("--normalize", is_flag=True, help="Normalize the schema before registering it.")
@_registry_options
def register(
    subject: str,
    file: Path,
    schema_type: str | None,
    references: tuple[str, ...],
    normalize: bool,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """Register FILE's schema under SUBJECT ('-': standard input); print its id.

    Registering a schema the subject has already gives its id again; one the
    subject's compatibility level refuses is an error naming why.
    """
    http = registry(client, registry_url)
    body = _schema_body(file, schema_type and schema_type.upper(), references)
    answer = _call(
        http, "POST", f"/subjects/{_subject(subject)}/versions", body, normalize=normalize
    )
    click.echo(answer["id"])


@schemas.command("check")
@click.argument("subject")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True))
@type_option
@reference_option
@click.option(
    "--version",
    default=None,
    help="Check against this version only [default: the versions the level compares with].",
)
@_registry_options
def check(
    subject: str,
    file: Path,
    schema_type: str | None,
    references: tuple[str, ...],
    version: str | None,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """Whether FILE's schema may be registered under SUBJECT; exit 1 with the reasons if not."""
    http = registry(client, registry_url)
    body = _schema_body(file, schema_type and schema_type.upper(), references)
    path = f"/compatibility/subjects/{_subject(subject)}/versions"
    if version is not None:
        path += f"/{version}"
    answer = _call(http, "POST", path, body, verbose=True)
    if answer.get("is_compatible"):
        click.echo("compatible")
        return
    click.echo("incompatible", err=True)
    for message in answer.get("messages", []):
        click.echo(f"  {message}", err=True)
    sys.exit(1)


@schemas.command("delete")
@click.argument("subject")
@click.option("--version", default=None, help="Only this version [default: the whole subject].")
@click.option(
    "--permanent",
    is_flag=True,
    help="Delete for good what was soft-deleted before (its ids go too).",
)
@_registry_options
def delete(
    subject: str,
    version: str | None,
    permanent: bool,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """Delete SUBJECT, or one --version of it: soft first, then --permanent."""
    http = registry(client, registry_url)
    path = f"/subjects/{_subject(subject)}"
    if version is not None:
        path += f"/versions/{version}"
    answer = _call(http, "DELETE", path, permanent=permanent)
    versions = answer if isinstance(answer, list) else [answer]
    how = "permanently deleted" if permanent else "deleted"
    click.echo(
        f"{subject}: {how} version{'s' if len(versions) != 1 else ''} "
        f"{', '.join(str(v) for v in versions)}"
    )


@schemas.command("config")
@click.argument("subject", required=False)
@click.option(
    "--set",
    "level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default=None,
    help="Set the compatibility level.",
)
@click.option("--delete", "remove", is_flag=True, help="Remove the subject's own level.")
@_registry_options
def config(
    subject: str | None,
    level: str | None,
    remove: bool,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """The compatibility level of SUBJECT (its own, else the global one), or the global one."""
    http = registry(client, registry_url)
    path = "/config" + (f"/{_subject(subject)}" if subject is not None else "")
    if level is not None and remove:
        raise click.UsageError("give --set or --delete, not both")
    if level is not None:
        _call(http, "PUT", path, {"compatibility": level.upper()})
    elif remove:
        _call(http, "DELETE", path)
    params = {"defaultToGlobal": True} if subject is not None else {}
    answer = _call(http, "GET", path, **params)
    click.echo(answer.get("compatibilityLevel", "BACKWARD"))


@schemas.command("mode")
@click.argument("subject", required=False)
@click.option(
    "--set",
    "mode",
    type=click.Choice(["READWRITE", "READONLY", "IMPORT"], case_sensitive=False),
    default=None,
    help="Set the mode.",
)
@click.option("--force", is_flag=True, help="With --set IMPORT: even over existing schemas.")
@_registry_options
def mode(
    subject: str | None,
    mode: str | None,
    force: bool,
    registry_url: str | None,
    client: ClientSettings,
) -> None:
    """The mode of SUBJECT (its own, else the global one), or the global one."""
    http = registry(client, registry_url)
    path = "/mode" + (f"/{_subject(subject)}" if subject is not None else "")
    if mode is not None:
        _call(http, "PUT", path, {"mode": mode.upper()}, force=force)
    params = {"defaultToGlobal": True} if subject is not None else {}
    click.echo(_call(http, "GET", path, **params)["mode"])
